"""Playing one episode with the policy, and turning it into a gradient.

``rollout`` stores an episode sparsely, about 127 bytes a step, where the 2016
program stored about 53 KB (``pong.core.reference.rollout_dense``, which plays
the same game from the same weights, env seed and random draws).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from pong.core.model import H, Model, SparseGrad
from pong.core.preprocess import frames_of
from pong.core.rewards import advantages, gamma

__all__ = ["DOWN", "UP", "SparseEpisode", "episode_gradient", "rollout"]


ACTIVE_BYTES = (H + 7) // 8  # one step's ReLU pattern: H bits
STOP_EVERY = 256  # steps between asking whether a game is still wanted (a few ms of play)
UP, DOWN = 2, 3  # ALE's "RIGHT" and "LEFT": the paddle moves up and down


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
        epdlogp: (T,) float64 ``y - aprob``, the gradient of log P(action taken)
            w.r.t. the logit ("fake label" y = 1 for action 2, else 0).
        epr: (T,) float64 rewards.
    """

    offsets: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    active: np.ndarray
    epdlogp: np.ndarray
    epr: np.ndarray


def rollout(
    model: Model,
    env: gym.Env,
    rng: np.random.Generator,
    seed: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> SparseEpisode | None:
    """Play one game with ``model`` (until terminated or truncated); store it sparsely.

    ``rng`` draws one ``rng.random()`` per step for the action; ``seed`` goes
    to ``env.reset`` (``None`` continues the env's own stream). ``stop`` is asked every
    ``STOP_EVERY`` steps whether to give the game up (``None`` returned): another worker
    answered it first.
    """
    if stop is not None and stop():  # given up before it began
        return None
    frames = frames_of(env)  # from make_env's Atari: read straight from the emulator
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
        if stop is not None and len(drs) % STOP_EVERY == 0 and stop():
            return None
    return SparseEpisode(
        np.frombuffer(offsets, dtype=np.int64),
        np.frombuffer(indices, dtype=np.uint16),
        np.frombuffer(values, dtype=np.int8),
        np.frombuffer(active, dtype=np.uint8).reshape(-1, ACTIVE_BYTES),
        np.frombuffer(dlogps, dtype=np.float64),
        np.frombuffer(drs, dtype=np.float64),
    )


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
