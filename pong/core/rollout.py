"""The fast path: one game played with the policy and stored sparsely, and its gradient.
``reference`` computes the same as 2016 did; here only the ~26 inputs of a step that are not 0
(each -1 or +1) are stored and multiplied, and the tests check the two agree up to rounding."""

from __future__ import annotations

from array import array
from typing import NamedTuple, Protocol

import gymnasium as gym
import numpy as np

from pong.core.model import DOWN, UP, D, H, Model, sigmoid
from pong.core.preprocess import binarize
from pong.core.rewards import advantages

__all__ = ["Frames", "GymFrames", "SparseGame", "SparseGrad", "frames_of", "game_gradient"]
__all__ += ["play_game", "policy_backward_sparse", "policy_forward_sparse"]

STOP_EVERY = 256  # steps between asking whether a game is still wanted (~130 ms on a core)
BACKWARD_CHUNK = 64  # steps per block of the sparse backward pass: a block's memory stays small


class SparseGame(NamedTuple):
    """One game of T steps as the fast path stores it: step ``t``'s input is
    ``delta[offsets[t]:offsets[t+1]]`` at the pixels ``changed[offsets[t]:offsets[t+1]]``, zero
    elsewhere: each step's arguments of ``policy_forward_sparse``, one after another. A step
    takes 8 bytes of offset, 3 for each non-zero input (~26 of them: 78), 25 of ReLU pattern and
    16 of ``epdlogp`` and reward: ~127 (benchmarks/single_core.py), where 2016's ``epx`` and
    ``eph`` took 52.8 KB."""

    offsets: np.ndarray  # (T + 1,) int64, from 0
    changed: np.ndarray  # (N,) uint16 pixel indices
    delta: np.ndarray  # (N,) int8: -1, an object left; +1, one arrived
    on_bits: np.ndarray  # (T, 25) uint8 np.packbits(h > 0): all the backward pass needs of eph
    epdlogp: np.ndarray  # (T,) y - aprob = d log P(action) / d logit; y: 1 if up (2016's label)
    epr: np.ndarray  # (T,) each step's reward

    def epx(self) -> np.ndarray:
        """The game's inputs as 2016's (T, D) float64 ``epx`` (for checking against it)."""
        epx = np.zeros((len(self.epr), D))
        rows = np.repeat(np.arange(len(self.epr)), np.diff(self.offsets))
        epx[rows, self.changed] = self.delta
        return epx


def policy_forward_sparse(
    model: Model, changed: np.ndarray, delta: np.ndarray
) -> tuple[float, np.ndarray]:
    """2016's ``policy_forward`` for the input ``x`` that is ``delta`` (+-1) at the distinct
    pixels ``changed`` and 0 elsewhere: ``(aprob, h)``."""
    h = model.weights["W1"][:, changed] @ delta  # (H,): only the columns of the changed pixels
    np.maximum(h, 0, out=h)  # ReLU, in place
    return sigmoid(float(model.weights["W2"] @ h)), h


# A game's frames, read as the pixels whose 0 or 1 changed each step: the non-zero entries of
# 2016's difference frame ``preprocess(now) - preprocess(before)``, without the 6400 floats.


class Frames(Protocol):
    """A game's frames, binarized, step by step: ``GymFrames``, or an env's faster equal."""

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game; its first frame, binarized: (6400,) bool."""

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``(changed, arrived, reward, done)`` for one action: the sorted pixels whose
        boolean changed, their new values (True: an object arrived), the step's reward, and
        whether the game ended."""


class GymFrames:
    """Steps ``env`` through Gymnasium and binarizes each observation: any env or wrapper.

    Example:
        >>> import ale_py, gymnasium as gym
        >>> gym.register_envs(ale_py)
        >>> frames = GymFrames(gym.make("ALE/Pong-v5"))
        >>> first = frames.reset(seed=0)
        >>> first.shape, first.dtype
        ((6400,), dtype('bool'))
        >>> changed, arrived, reward, done = frames.step(0)
        >>> bool((frames.frame[changed] == arrived).all() and (first[changed] != arrived).all())
        True
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.frame = np.zeros(0, dtype=bool)  # the last frame, binarized

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game; its first frame, binarized: (6400,) bool."""
        observation, _ = self.env.reset(seed=seed)
        self.frame = binarize(observation)
        return self.frame

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``Frames.step``."""
        observation, reward, terminated, truncated, _ = self.env.step(action)
        frame = binarize(observation)
        changed = np.flatnonzero(frame != self.frame)
        self.frame = frame
        return changed, frame[changed], float(reward), bool(terminated or truncated)


def frames_of(env: gym.Env) -> Frames:
    """``env.fast_frames()``, where ``env`` offers a faster reader of the same frames (as
    ``pong.envs`` gives Atari Pong), else ``GymFrames(env)``. A wrapper hides it: what the
    wrapper sees (a recorder, say) is then what is read."""
    fast = getattr(env, "fast_frames", None)
    return fast() if callable(fast) else GymFrames(env)


def play_game(
    model: Model, env: gym.Env, rng: np.random.Generator, reset_seed: int | None = None, stop=None
) -> SparseGame | None:
    """Play one game with ``model``: ``rng`` draws one ``rng.random()`` a step for the action,
    ``reset_seed`` goes to the env's reset (``None``: the env's own stream). ``stop()``, if
    given, is asked before the first step and every ``STOP_EVERY`` steps whether the game is no
    longer wanted; if so, the unfinished game is given up and ``None`` returned (the dealer may
    start a backup copy of a slow game and abandon the slower copy: ``pong.core.schedule``)."""
    if stop is not None and stop():
        return None
    frames = frames_of(env)
    frames.reset(seed=reset_seed)
    changed, arrived = np.empty(0, np.intp), np.empty(0, bool)  # the first step has no difference
    # Typed buffers that grow: no Python object per step.
    offsets, game_changed, game_delta = array("q", [0]), array("H"), array("b")
    on_bits = array("B")
    dlogps, drs = array("d"), array("d")
    done = False
    while not done:
        delta = np.where(arrived, 1.0, -1.0)  # +1: an object arrived, -1: it left
        aprob, h = policy_forward_sparse(model, changed, delta)
        action = UP if rng.random() < aprob else DOWN
        game_changed.frombytes(changed.astype(np.uint16).tobytes())
        game_delta.frombytes(delta.astype(np.int8).tobytes())
        offsets.append(len(game_changed))
        on_bits.frombytes(np.packbits(h > 0).tobytes())
        y = 1.0 if action == UP else 0.0  # the "fake label": as if the action taken were correct
        dlogps.append(y - aprob)
        # As 2016's difference frame: this step's changes are the next step's input (the first
        # step's is empty: aprob 0.5), and the last step's are never used
        changed, arrived, reward, done = frames.step(action)
        drs.append(reward)
        if stop is not None and not done and len(drs) % STOP_EVERY == 0 and stop():
            return None
    return SparseGame(
        np.frombuffer(offsets, dtype=np.int64),
        np.frombuffer(game_changed, dtype=np.uint16),
        np.frombuffer(game_delta, dtype=np.int8),
        np.frombuffer(on_bits, dtype=np.uint8).reshape(len(drs), -1),
        np.frombuffer(dlogps, dtype=np.float64),
        np.frombuffer(drs, dtype=np.float64),
    )


class SparseGrad(NamedTuple):
    """A gradient whose ``W1`` is zero outside ``columns``: the pixels that changed in the game
    (K of 6400), so 6400 / K times less to send: a median 6.5 in the short games of a freshly
    initialized network, 2.3 in a trained agent's long ones (benchmarks/sent_columns.py)."""

    columns: np.ndarray  # (K,) sorted pixel indices
    W1_columns: np.ndarray  # (H, K) the gradient's W1 at those columns
    W2: np.ndarray  # (H,)

    def add_to(self, grad_buffer: dict[str, np.ndarray]) -> None:
        """``grad_buffer += self``, in place."""
        grad_buffer["W1"][:, self.columns] += self.W1_columns
        grad_buffer["W2"] += self.W2

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.W1_columns).all() and np.isfinite(self.W2).all())

    def dense(self) -> dict[str, np.ndarray]:
        """As ``policy_backward`` gives a gradient: ``{"W1": (H, D), "W2": (H,)}``."""
        W1 = np.zeros((H, D), order="F")
        W1[:, self.columns] = self.W1_columns
        return {"W1": W1, "W2": self.W2.copy()}


def block_inputs(game: SparseGame, start: int, end: int, entry_column: np.ndarray) -> tuple:
    """Steps ``start:end``'s inputs as a dense (steps, M) ``block`` over only the M pixels
    they touch: ``(block_columns, block)``. Both count in the game's sorted changed pixels
    (``policy_backward_sparse``'s ``columns``, the rows of its ``GT``): ``entry_column[e]`` is
    stored entry e's place there, ``block_columns[m]`` block column m's."""
    first, last = int(game.offsets[start]), int(game.offsets[end])
    block_columns, in_block = np.unique(entry_column[first:last], return_inverse=True)
    step = np.repeat(np.arange(end - start), np.diff(game.offsets[start : end + 1]))  # its row
    block = np.zeros((end - start, block_columns.size))
    block[step, in_block] = game.delta[first:last]
    return block_columns, block


def policy_backward_sparse(model: Model, game: SparseGame, weighted: np.ndarray) -> SparseGrad:
    """``policy_backward`` for ``game`` and ``weighted`` (T,), ``game.epdlogp`` times the
    advantages, never building the (T, D) ``epx``.

    Derivation: for hidden unit ``j``, let ``on[t, j] = eph[t, j] > 0`` and ``G[j] = sum_t
    weighted[t] * on[t, j] * x_t``, a vector over the K pixels that changed in the game
    (stored transposed: ``GT``, (K, H)). ``policy_backward``'s ``dh``, zeroed where off,
    gives ``dW1[j] = (dh.T @ epx)[j] = W2[j] * G[j]``; and since ``eph[t, j] = W1[j] . x_t``
    where on, ``dW2[j] = sum_t weighted[t] * eph[t, j] = W1[j] . G[j]``. So only the ReLU
    pattern is needed, with the weights that played the game (``dW2`` comes from ``W1``, not
    from a stored ``eph``). Densely, ``GT = epx[:, columns].T @ (weighted[:, None] * on)``; here
    it is summed ``BACKWARD_CHUNK`` steps at a time over the pixels they touch.
    """
    W1, W2 = model.weights["W1"], model.weights["W2"]
    weighted = np.asarray(weighted, dtype=np.float64).ravel()
    # Only the K pixels that ever changed get a non-zero column: each stored entry's, in columns
    columns, entry_column = np.unique(game.changed, return_inverse=True)
    GT = np.zeros((columns.size, H))  # G transposed, (K, H): row k for pixel columns[k]
    for start in range(0, weighted.size, BACKWARD_CHUNK):
        end = min(start + BACKWARD_CHUNK, weighted.size)
        if game.offsets[start] == game.offsets[end]:
            continue  # no pixel changed in these steps
        on = np.unpackbits(game.on_bits[start:end], axis=1, count=H)  # (steps, H)
        block_columns, block = block_inputs(game, start, end, entry_column)
        # G[j] += sum_t weighted[t] on[t, j] x_t, for these steps
        GT[block_columns] += block.T @ (weighted[start:end, None] * on)
    dW2 = np.einsum("jk,kj->j", W1[:, columns], GT)  # row-wise W1[j] . G[j]
    return SparseGrad(columns.astype(np.intp), GT.T * W2[:, None], dW2)


def game_gradient(model: Model, game: SparseGame) -> tuple[SparseGrad, str | None]:
    """The policy gradient of ``game``: each step's ``epdlogp`` times its advantage, back
    through the network. ``(grad, note)``: ``note`` is ``None``, or says why the gradient is
    zero (``pong.core.rewards.advantages``)."""
    adv, note = advantages(game.epr)
    return policy_backward_sparse(model, game, game.epdlogp * adv), note
