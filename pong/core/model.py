"""The policy network: a two-layer NumPy net from pixels to P(paddle up), and RMSProp.

Names are 2016's: ``H`` hidden units, ``D`` inputs, ``W1`` (H, D), ``W2`` (H,), ``aprob`` =
P(action 2); for a game of T steps ``epx`` (T, D) inputs, ``eph`` (T, H) hidden states,
``epdlogp`` and ``epr`` (T,). First 2016's dense ``policy_forward`` and ``policy_backward``,
then what training uses: the same on the ~26 non-zero entries (each -1 or +1) of a difference
frame, equal up to rounding (the tests check)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["D", "DOWN", "H", "UP", "Model", "SparseGame", "SparseGrad", "policy_backward"]
__all__ += ["policy_forward", "zeros_like_weights"]

H = 200  # hidden units
D = 80 * 80  # inputs: an 80 x 80 difference frame
UP, DOWN = 2, 3  # the two actions, ALE's "RIGHT" and "LEFT": the paddle moves up and down
BACKWARD_CHUNK = 64  # steps per block of the sparse backward pass (fastest here; small memory)


def sigmoid(x: float) -> float:
    """Squash a logit into a probability in [0, 1].

    Example:
        >>> sigmoid(0.0), sigmoid(-1000.0)
        (0.5, 0.0)
    """
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:  # exp(-x) is beyond float range: the probability is 0
        return 0.0


def zeros_like_weights(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A dict of zero arrays shaped like ``weights``: a gradient buffer or RMSProp cache."""
    return {k: np.zeros_like(v) for k, v in weights.items()}


def policy_forward(model: Model, x: np.ndarray) -> tuple[float, np.ndarray]:
    """2016's forward pass for one (D,) input: ``(aprob, h)``, h the (H,) hidden state."""
    h = model.weights["W1"] @ x
    h[h < 0] = 0  # ReLU
    logp = float(model.weights["W2"] @ h)  # 2016's name; it holds the logit, not a log-probability
    return sigmoid(logp), h


def policy_backward(model: Model, eph: np.ndarray, epx: np.ndarray, epdlogp: np.ndarray) -> dict:
    """2016's backward pass for one game: the gradient ``{"W1": (H, D), "W2": (H,)}`` of
    ``sum_t epdlogp[t] * logit_t``, ``epdlogp`` weighted by the advantages (as 2016 did)."""
    epdlogp = np.asarray(epdlogp).ravel()
    dW2 = eph.T @ epdlogp
    dh = np.outer(epdlogp, model.weights["W2"])
    dh[eph <= 0] = 0  # backprop through the ReLU
    dW1 = dh.T @ epx  # (H, D)
    return {"W1": dW1, "W2": dW2}


class SparseGame(NamedTuple):
    """One game of T steps as the fast path stores it: step ``t``'s input is
    ``values[offsets[t]:offsets[t+1]]`` at pixels ``indices[offsets[t]:offsets[t+1]]``, zero
    elsewhere: each step's ``changed`` pixels and their ``delta`` (the arguments of
    ``policy_forward_sparse``), one after another. A step takes 8 bytes of offset, 3 for each
    non-zero input (~26 of them: 78), 25 of ReLU pattern and 16 of ``epdlogp`` and reward:
    ~127 (benchmarks/single_core.py), where 2016's ``epx`` and ``eph`` took 52.8 KB."""

    offsets: np.ndarray  # (T + 1,) int64, from 0
    indices: np.ndarray  # (N,) uint16 pixel indices
    values: np.ndarray  # (N,) int8: -1, an object left; +1, one arrived
    on_bits: np.ndarray  # (T, 25) uint8 np.packbits(h > 0), the ReLU pattern: all of eph needed
    # (T,) y - aprob = d log P(action taken) / d logit, before advantages (y: 1 if the action
    # taken was up, else 0, as 2016's "fake label")
    epdlogp: np.ndarray
    epr: np.ndarray  # (T,) each step's reward


class SparseGrad(NamedTuple):
    """A gradient whose ``W1`` is zero outside ``columns``: the pixels that changed in the game
    (a few hundred of 6400), so 6400 / K times less to send (21 for 300 pixels)."""

    columns: np.ndarray  # (K,) sorted pixel indices
    W1_columns: np.ndarray  # (H, K) the gradient's W1 at those columns
    W2: np.ndarray  # (H,)

    def add_to(self, grad_buffer: dict[str, np.ndarray]) -> None:
        """``grad_buffer += self``, in place."""
        grad_buffer["W1"][:, self.columns] += self.W1_columns
        grad_buffer["W2"] += self.W2

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.W1_columns).all() and np.isfinite(self.W2).all())


def block_inputs(game: SparseGame, start: int, stop: int, row: np.ndarray) -> tuple:
    """Steps ``start:stop``'s inputs as a dense (B, M) ``block`` over only the M pixels they
    touch: ``(rows, block)``. Pixels are numbered by ``row``: ``row[e]`` is the number of
    stored entry ``e``'s pixel among all the game's changed pixels; ``rows[m]`` is that number
    for the pixel of ``block``'s column ``m``."""
    first, last = int(game.offsets[start]), int(game.offsets[stop])
    rows, column = np.unique(row[first:last], return_inverse=True)  # each entry's, in block
    step = np.repeat(np.arange(stop - start), np.diff(game.offsets[start : stop + 1]))  # its row
    block = np.zeros((stop - start, rows.size))
    block[step, column] = game.values[first:last]
    return rows, block


class Model:
    """Policy network ``x -> h = max(0, W1 @ x) -> aprob = sigmoid(W2 @ h)``. ``W1`` and ``W2``
    are standard normal draws from ``seed`` divided by ``sqrt(D)`` and ``sqrt(H)`` (LeCun's
    1/sqrt(fan_in)). ``W1`` is column-major: each column an input touches is one contiguous run.
    """

    def __init__(self, seed: int | np.random.SeedSequence | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.weights = {
            "W1": np.asfortranarray(rng.standard_normal((H, D)) / np.sqrt(D)),
            "W2": rng.standard_normal(H) / np.sqrt(H),
        }

    @classmethod
    def from_weights(cls, weights: dict[str, np.ndarray]) -> Model:
        """A model with the given ``W1`` (H, D) and ``W2`` (H,), e.g. from a checkpoint."""
        model = cls.__new__(cls)
        model.weights = {"W1": np.asfortranarray(weights["W1"]), "W2": np.asarray(weights["W2"])}
        return model

    def policy_forward_sparse(
        self, changed: np.ndarray, delta: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """2016's ``policy_forward`` for the input ``x`` that is ``delta`` (+-1) at the distinct
        pixels ``changed`` and 0 elsewhere: ``(aprob, h)``."""
        h = self.weights["W1"][:, changed] @ delta  # (H,): only the columns of the changed pixels
        np.maximum(h, 0, out=h)  # ReLU (h[h < 0] = 0 would keep a -0.0)
        return sigmoid(float(self.weights["W2"] @ h)), h

    def policy_backward_sparse(self, game: SparseGame, weighted: np.ndarray) -> SparseGrad:
        """``policy_backward`` for ``game`` and ``weighted`` (T,), ``game.epdlogp`` times the
        advantages, never building the (T, D) ``epx``.

        Derivation: for hidden unit ``j``, let ``on[t, j] = eph[t, j] > 0`` and ``G[j] = sum_t
        weighted[t] * on[t, j] * x_t``, a vector over the K pixels that changed in the game
        (stored transposed: ``GT``, (K, H)). ``policy_backward``'s ``dh``, zeroed where off,
        gives ``dW1[j] = (dh.T @ epx)[j] = W2[j] * G[j]``; and since ``eph[t, j] = W1[j] . x_t``
        where on, ``dW2[j] = sum_t weighted[t] * eph[t, j] = W1[j] . G[j]``. So only the ReLU
        pattern is needed, and ``G`` is summed ``BACKWARD_CHUNK`` steps at a time over the
        pixels they touch.
        """
        W1, W2 = self.weights["W1"], self.weights["W2"]
        weighted = np.asarray(weighted, dtype=np.float64).ravel()
        # Only pixels that ever changed get a non-zero column; row: each entry's pixel's number
        columns, row = np.unique(game.indices, return_inverse=True)
        GT = np.zeros((columns.size, H))  # G transposed, (K, H): one row per pixel in columns
        for start in range(0, weighted.size, BACKWARD_CHUNK):
            stop = min(start + BACKWARD_CHUNK, weighted.size)
            if game.offsets[start] == game.offsets[stop]:
                continue  # no pixel changed in these steps
            on = np.unpackbits(game.on_bits[start:stop], axis=1, count=H)  # (steps, H)
            rows, block = block_inputs(game, start, stop, row)
            GT[rows] += block.T @ (weighted[start:stop, None] * on)  # G[j] += sum_t w_t on[t,j] x_t
        dW2 = np.einsum("jk,kj->j", W1[:, columns], GT)  # row-wise W1[j] . G[j]
        return SparseGrad(columns.astype(np.intp), GT.T * W2[:, None], dW2)

    def rmsprop(self, grad_buffer: dict, rmsprop_cache: dict, learning_rate, decay_rate):
        """RMSProp ascent, as 2016's two lines (fewer arrays was no faster: benchmarks/README.md).
        New arrays replace the old in ``self.weights`` and ``rmsprop_cache`` (a checkpoint may
        hold the old). If the gradient, or a new weight or cache, is not finite, it raises
        ``FloatingPointError``, changing nothing."""
        for k in self.weights:
            if not np.all(np.isfinite(grad_buffer[k])):
                raise FloatingPointError(f"refusing a non-finite gradient for {k}")
        new = {}
        for k, w in self.weights.items():
            g = grad_buffer[k]
            with np.errstate(over="ignore", invalid="ignore"):  # refused below instead
                cache = decay_rate * rmsprop_cache[k] + (1 - decay_rate) * g**2
                new[k] = cache, w + learning_rate * g / (np.sqrt(cache) + 1e-5)
            if not (np.isfinite(new[k][0]).all() and np.isfinite(new[k][1]).all()):
                raise FloatingPointError(f"the update would make {k} or its cache non-finite")
        for k, (cache, w) in new.items():
            rmsprop_cache[k], self.weights[k] = cache, w
