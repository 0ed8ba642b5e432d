"""Playing one episode with the policy, and turning it into a gradient."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from pong.env import DOWN, UP
from pong.model import D, Model
from pong.preprocess import preprocess
from pong.rewards import advantages, gamma

__all__ = ["Episode", "episode_gradient", "rollout"]


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


def rollout(
    model: Model, env: gym.Env, rng: np.random.Generator, seed: int | None = None
) -> Episode:
    """Play one episode (one game, until terminated or truncated) with ``model``.

    Args:
        model: the policy.
        env: a Pong env (see ``pong.env.make_env``).
        rng: source of the action-sampling draws, one ``rng.random()`` per step.
        seed: passed to ``env.reset``; ``None`` continues the env's own stream.

    Returns:
        The ``Episode``.
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
    model: Model, episode: Episode, gamma: float = gamma
) -> tuple[dict[str, np.ndarray], str | None]:
    """Policy gradient of one episode: each step's ``dlogp`` scaled by its advantage.

    Returns:
        ``(grad, note)``: ``{"W1": (H, D), "W2": (H,)}`` and ``None``, or a
        zero gradient and a note when the advantages are undefined (see
        ``pong.rewards.advantages``).
    """
    adv, note = advantages(episode.epr, gamma)
    epdlogp = episode.epdlogp * adv  # modulate the gradient with the advantage
    return model.policy_backward(episode.eph, episode.epx, epdlogp), note
