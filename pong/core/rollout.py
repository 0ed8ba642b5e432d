"""Playing one episode with the policy, and turning it into a gradient.

``rollout`` (used for training) stores an episode sparsely, about 127 bytes a
step; ``rollout_dense`` is the 2016 program's way, about 53 KB a step, kept as the
reference that tests compare against. Given the same weights, env seed and
random draws, both play the same game.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from pong.core.frames import frames_for
from pong.core.model import D, H, Model, SparseGrad
from pong.core.preprocess import preprocess
from pong.core.rewards import advantages, gamma

__all__ = [
    "DOWN",
    "UP",
    "Episode",
    "SparseEpisode",
    "episode_gradient",
    "episode_gradient_dense",
    "rollout",
    "rollout_dense",
]


ACTIVE_BYTES = (H + 7) // 8  # one step's ReLU pattern: H bits
UP, DOWN = 2, 3  # ALE's "RIGHT" and "LEFT": the paddle moves up and down


class Episode(NamedTuple):
    """One game, step by step (T steps).

    Attributes:
        epx: (T, D) float64 policy inputs (difference frames).
        eph: (T, H) float64 hidden states.
        epdlogp: (T,) float64 ``y - aprob``, the gradient of log P(action taken)
            w.r.t. the logit ("fake label" y = 1 for action 2, else 0).
        epr: (T,) float64 reward returned by each step.
    """

    epx: np.ndarray
    eph: np.ndarray
    epdlogp: np.ndarray
    epr: np.ndarray


class SparseEpisode(NamedTuple):
    """One game of T steps, with each input stored by its non-zero entries.

    Step ``t``'s difference frame is ``values[offsets[t]:offsets[t+1]]`` at
    pixels ``indices[offsets[t]:offsets[t+1]]``, zero elsewhere.

    Attributes:
        offsets: (T + 1,) int64, ``offsets[0] == 0``.
        indices: (N,) uint16 pixel indices, N ~ 30 T.
        values: (N,) int8, -1 or +1.
        active: (T, 25) uint8, which of the H hidden units were positive at each
            step, as bits (``np.packbits(h > 0)``): all the backward pass needs
            of the hidden states.
        epdlogp: (T,) float64, as in ``Episode``.
        epr: (T,) float64 rewards.
    """

    offsets: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    active: np.ndarray
    epdlogp: np.ndarray
    epr: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes of episode data held."""
        return sum(a.nbytes for a in self)

    def dense_inputs(self) -> np.ndarray:
        """The (T, D) float64 ``epx`` of the dense representation (for tests)."""
        epx = np.zeros((len(self.epr), D))
        rows = np.repeat(np.arange(len(self.epr)), np.diff(self.offsets))
        epx[rows, self.indices] = self.values
        return epx


def rollout(
    model: Model, env: gym.Env, rng: np.random.Generator, seed: int | None = None
) -> SparseEpisode:
    """Play one game with ``model`` (until terminated or truncated); store it sparsely.

    ``rng`` draws one ``rng.random()`` per step for the action; ``seed`` goes
    to ``env.reset`` (``None`` continues the env's own stream). Returns the
    same game ``rollout_dense`` plays from the same state.
    """
    frames = frames_for(env)  # on Atari: read straight from the emulator, same frames
    frames.reset(seed=seed)
    # The policy sees the difference of consecutive frames: none at the first step.
    idx, arrived = np.empty(0, np.intp), np.empty(0, bool)
    # Growing typed buffers: no Python object per step.
    offsets, indices, values, active = array("q", [0]), array("H"), array("b"), array("B")
    dlogps, drs = array("d"), array("d")
    done = False
    while not done:
        val = np.where(arrived, 1.0, -1.0)  # +1: an object arrived, -1: it left

        aprob, h = model.policy_forward_sparse(idx, val)
        action = UP if rng.random() < aprob else DOWN

        indices.frombytes(idx.astype(np.uint16).tobytes())
        values.frombytes(val.astype(np.int8).tobytes())
        offsets.append(len(indices))
        active.frombytes(np.packbits(h > 0).tobytes())  # the ReLU pattern, for the backward pass
        y = 1.0 if action == UP else 0.0  # the "fake label": pretend the sampled action was right
        dlogps.append(y - aprob)  # its log-likelihood gradient w.r.t. the logit

        idx, arrived, reward, done = frames.step(action)
        drs.append(reward)
    return SparseEpisode(
        np.frombuffer(offsets, dtype=np.int64),
        np.frombuffer(indices, dtype=np.uint16),
        np.frombuffer(values, dtype=np.int8),
        np.frombuffer(active, dtype=np.uint8).reshape(-1, ACTIVE_BYTES),
        np.frombuffer(dlogps, dtype=np.float64),
        np.frombuffer(drs, dtype=np.float64),
    )


def rollout_dense(
    model: Model, env: gym.Env, rng: np.random.Generator, seed: int | None = None
) -> Episode:
    """``rollout`` as the 2016 program did it, storing dense inputs and hidden states.

    Same arguments as ``rollout``; returns the ``Episode`` (about 53 KB a step).
    """
    observation, _ = env.reset(seed=seed)
    prev_x = None  # the policy sees the difference of consecutive frames
    xs, hs, dlogps, drs = [], [], [], []
    done = False
    while not done:
        cur_x = preprocess(observation)
        x = cur_x - prev_x if prev_x is not None else np.zeros(D)
        prev_x = cur_x

        aprob, h = model.policy_forward(x)
        action = UP if rng.random() < aprob else DOWN

        xs.append(x)
        hs.append(h)
        y = 1.0 if action == UP else 0.0  # the "fake label": pretend the sampled action was right
        dlogps.append(y - aprob)  # its log-likelihood gradient w.r.t. the logit

        observation, reward, terminated, truncated, _ = env.step(action)
        drs.append(float(reward))
        done = terminated or truncated
    return Episode(np.vstack(xs), np.vstack(hs), np.array(dlogps), np.array(drs))


def episode_gradient(
    model: Model, episode: SparseEpisode, gamma: float = gamma
) -> tuple[SparseGrad, str | None]:
    """Policy gradient of one episode: each step's ``dlogp`` scaled by its advantage.

    Returns:
        ``(grad, note)``: the gradient and ``None``, or a zero gradient and a
        note when the advantages are undefined (see ``pong.core.rewards.advantages``).
    """
    adv, note = advantages(episode.epr, gamma)
    epdlogp = episode.epdlogp * adv  # modulate the gradient with the advantage
    grad = model.policy_backward_sparse(
        episode.offsets, episode.indices, episode.values, episode.active, epdlogp
    )
    return grad, note


def episode_gradient_dense(
    model: Model, episode: Episode, gamma: float = gamma
) -> tuple[dict[str, np.ndarray], str | None]:
    """``episode_gradient`` for a dense ``Episode``, through ``Model.policy_backward``.

    Returns:
        ``({"W1": (H, D), "W2": (H,)}, note)``.
    """
    adv, note = advantages(episode.epr, gamma)
    epdlogp = episode.epdlogp * adv
    return model.policy_backward(episode.eph, episode.epx, epdlogp), note
