"""A game played and stored as the 2016 program did, each step's (D,) input and (H,) hidden
state (52.8 KB a step), and its gradient by ``policy_backward``. Training never calls it: the
tests play the same game both ways and check the fast path against it, actions, inputs and
ReLU pattern equal, gradients equal up to rounding."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from pong.core.model import DOWN, UP, D, Model, policy_backward, policy_forward
from pong.core.preprocess import preprocess
from pong.core.rewards import advantages

__all__ = ["DenseGame", "game_gradient_dense", "play_game_dense"]


class DenseGame(NamedTuple):
    """One game of T steps as 2016 stored it: ``epx`` (T, D), ``eph`` (T, H), and
    ``epdlogp`` (d log P(action taken) / d logit) and ``epr`` (each step's reward), (T,)."""

    epx: np.ndarray
    eph: np.ndarray
    epdlogp: np.ndarray
    epr: np.ndarray


def play_game_dense(
    model: Model, env: gym.Env, rng: np.random.Generator, reset_seed: int | None = None
) -> DenseGame:
    """One game played with ``model`` and stored as 2016 did (``epx``, ``eph``, ``epdlogp``,
    ``epr``): ``rng`` draws one ``rng.random()`` a step for the action, ``reset_seed`` goes to
    the env's reset."""
    observation, _ = env.reset(seed=reset_seed)
    prev_x = None  # the policy sees the difference of consecutive frames
    xs, hs, dlogps, drs = [], [], [], []  # each step's input x, hidden h, dlogp and reward
    done = False
    while not done:
        cur_x = preprocess(observation)  # this step's frame, as 6400 values of 0 or 1
        x = cur_x - prev_x if prev_x is not None else np.zeros(D)
        prev_x = cur_x
        aprob, h = policy_forward(model, x)
        action = UP if rng.random() < aprob else DOWN
        xs.append(x)
        hs.append(h)
        y = 1.0 if action == UP else 0.0  # the "fake label": as if the action taken were correct
        dlogps.append(y - aprob)  # d log P(action taken) / d logit
        observation, reward, terminated, truncated, _ = env.step(action)
        drs.append(float(reward))
        done = terminated or truncated
    return DenseGame(np.vstack(xs), np.vstack(hs), np.array(dlogps), np.array(drs))


def game_gradient_dense(model: Model, game: DenseGame) -> tuple[dict[str, np.ndarray], str | None]:
    """The game's policy gradient as 2016 computed it: each step's ``epdlogp`` times its
    advantage, back through ``policy_backward``: ``({"W1", "W2"}, note)``, with
    ``advantages``' note."""
    adv, note = advantages(game.epr)
    return policy_backward(model, game.eph, game.epx, game.epdlogp * adv), note
