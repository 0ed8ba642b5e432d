"""One game played with the policy and stored as a ``SparseGame``, and its gradient."""

from __future__ import annotations

from array import array

import gymnasium as gym
import numpy as np

from pong.core.model import DOWN, UP, Model, SparseGame, SparseGrad
from pong.core.preprocess import frames_of
from pong.core.rewards import advantages, gamma

__all__ = ["game_gradient", "play_game"]

STOP_EVERY = 256  # steps between asking whether a game is still wanted (~130 ms on a core)


def play_game(
    model: Model, env: gym.Env, rng: np.random.Generator, reset_seed: int | None = None, stop=None
) -> SparseGame | None:
    """Play one game with ``model``: ``rng`` draws one ``rng.random()`` a step for the action,
    ``reset_seed`` goes to the env's reset (``None``: the env's own stream). ``stop()``, if
    given, is asked before the first step and every ``STOP_EVERY`` steps whether the game is no
    longer wanted; if so, the unfinished game is given up and ``None`` returned (the dealer may
    start one game on two workers and keep the first to finish: ``pong.core.schedule``)."""
    if stop is not None and stop():
        return None
    frames = frames_of(env)
    frames.reset(seed=reset_seed)
    changed, arrived = np.empty(0, np.intp), np.empty(0, bool)  # the first step has no difference
    # Typed buffers that grow: no Python object per step.
    offsets, indices, values, on_bits = array("q", [0]), array("H"), array("b"), array("B")
    dlogps, drs = array("d"), array("d")
    done = False
    while not done:
        delta = np.where(arrived, 1.0, -1.0)  # +1: an object arrived, -1: it left
        aprob, h = model.policy_forward_sparse(changed, delta)
        action = UP if rng.random() < aprob else DOWN
        indices.frombytes(changed.astype(np.uint16).tobytes())
        values.frombytes(delta.astype(np.int8).tobytes())
        offsets.append(len(indices))
        on_bits.frombytes(np.packbits(h > 0).tobytes())
        y = 1.0 if action == UP else 0.0  # the "fake label": as if the action taken were correct
        dlogps.append(y - aprob)
        changed, arrived, reward, done = frames.step(action)
        drs.append(reward)
        if stop is not None and not done and len(drs) % STOP_EVERY == 0 and stop():
            return None
    return SparseGame(
        np.frombuffer(offsets, dtype=np.int64),
        np.frombuffer(indices, dtype=np.uint16),
        np.frombuffer(values, dtype=np.int8),
        np.frombuffer(on_bits, dtype=np.uint8).reshape(len(drs), -1),
        np.frombuffer(dlogps, dtype=np.float64),
        np.frombuffer(drs, dtype=np.float64),
    )


def game_gradient(
    model: Model, game: SparseGame, gamma: float = gamma
) -> tuple[SparseGrad, str | None]:
    """The policy gradient of ``game``: each step's ``epdlogp`` times its advantage, back
    through the network. ``(grad, note)``: ``note`` is ``None``, or says why the gradient is
    zero (``pong.core.rewards.advantages``)."""
    adv, note = advantages(game.epr, gamma)
    return model.policy_backward_sparse(game, game.epdlogp * adv), note
