"""The policy network: a two-layer NumPy net from pixels to P(paddle up).

Vocabulary, kept from Karpathy's 2016 program so the two read side by side:

- ``H``, ``D``: hidden units and input size (80 x 80 difference frame).
- ``W1`` (H, D) and ``W2`` (H,): the weights, in ``Model.weights``.
- ``aprob``: probability of action 2 (paddle up) for one input ``x``.
- ``epx`` (T, D), ``eph`` (T, H), ``epdlogp`` (T,): one episode's inputs, hidden
  states and gradients of log P(action taken) w.r.t. the logit (``y - aprob``). As in
  2016, ``epdlogp`` keeps its name once scaled by the advantages for the backward pass.
- ``learning_rate``, ``decay_rate``: the RMSProp step size and cache decay
  (their defaults are in ``pong.run.config.Config``).

The 2016 formulas (``policy_forward``, ``policy_backward``) are dense, over all
6400 inputs; ``pong.core.reference`` keeps them, and the tests compare. These are
sparse, with the same numbers up to rounding: a difference frame has ~30 non-zero
entries of 6400, each -1 or +1, so ``W1 @ x`` only needs those ~30 columns of
``W1``, and an episode is stored as (step offsets, pixel indices, +-1 values) instead of a
(T, D) float64 matrix. ``W1`` is kept in column-major (Fortran) order so that
those columns are contiguous in memory.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "D",
    "H",
    "Model",
    "SparseGrad",
    "zeros_like_weights",
]

BACKWARD_CHUNK = 64  # steps per block of the sparse backward pass (fastest here; small memory)

H = 200  # number of hidden-layer neurons
D = 80 * 80  # input dimensionality: an 80 x 80 difference frame
rmsprop_eps = 1e-5  # keeps the RMSProp division finite where the cache is 0


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


class SparseGrad(NamedTuple):
    """A gradient whose ``W1`` part is zero outside a few columns.

    An episode's inputs touch only the pixels that ever changed (a few hundred
    of 6400), so the other columns of its ``dW1`` are exactly zero. Sending the
    non-zero ones is ~10x less data and adds up to the same sums.

    Attributes:
        columns: (K,) sorted pixel indices.
        W1_columns: (H, K) the gradient's ``W1`` columns at those indices.
        W2: (H,) the gradient's ``W2``.
    """

    columns: np.ndarray
    W1_columns: np.ndarray
    W2: np.ndarray

    def add_to(self, grad_buffer: dict[str, np.ndarray]) -> None:
        """``grad_buffer += self``, in place."""
        grad_buffer["W1"][:, self.columns] += self.W1_columns
        grad_buffer["W2"] += self.W2

    def is_finite(self) -> bool:
        """True when no entry is NaN or infinite."""
        return bool(np.isfinite(self.W1_columns).all() and np.isfinite(self.W2).all())


class Model:
    """Policy network ``x -> h = max(0, W1 @ x) -> aprob = sigmoid(W2 @ h)``.

    Args:
        seed: seed for the weight initialisation (``None``: fresh entropy).
            ``W1`` and ``W2`` are standard normal draws divided by ``sqrt(D)``
            and ``sqrt(H)`` ("Xavier" initialisation).

    Example:
        >>> model = Model(seed=0)
        >>> model.weights["W1"].shape, model.weights["W2"].shape
        ((200, 6400), (200,))
        >>> aprob, h = model.policy_forward_sparse(np.array([], dtype=int), np.array([]))
        >>> float(aprob), h.shape
        (0.5, (200,))
    """

    def __init__(self, seed: int | np.random.SeedSequence | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.weights = {
            # (H, D), column-major: the sparse forward pass reads whole columns
            "W1": np.asfortranarray(rng.standard_normal((H, D)) / np.sqrt(D)),
            "W2": rng.standard_normal(H) / np.sqrt(H),  # (H,)
        }

    @classmethod
    def from_weights(cls, weights: dict[str, np.ndarray]) -> Model:
        """A model with the given ``W1`` (H, D) and ``W2`` (H,), e.g. from a checkpoint."""
        model = cls.__new__(cls)
        model.weights = {"W1": np.asfortranarray(weights["W1"]), "W2": np.asarray(weights["W2"])}
        return model

    def policy_forward_sparse(self, idx: np.ndarray, val: np.ndarray) -> tuple[float, np.ndarray]:
        """The 2016 ``policy_forward`` for an input given by its non-zero entries.

        Args:
            idx: (K,) indices of the non-zero inputs (distinct).
            val: (K,) float64 values at those indices.

        Returns:
            ``(aprob, h)``: the probability of action 2 and the (H,) hidden state, equal
            to the dense ``policy_forward(x)`` up to rounding.
        """
        h = self.weights["W1"][:, idx] @ val  # (H,): only the K columns that matter
        np.maximum(h, 0, out=h)  # ReLU, in one call (h[h < 0] = 0 would keep a -0.0)
        return sigmoid(float(self.weights["W2"] @ h)), h

    def policy_backward_sparse(
        self,
        offsets: np.ndarray,
        indices: np.ndarray,
        values: np.ndarray,
        active: np.ndarray,
        epdlogp: np.ndarray,
    ) -> SparseGrad:
        """The 2016 ``policy_backward`` for an episode stored sparsely; never builds (T, D).

        Step ``t``'s input has the values ``values[offsets[t]:offsets[t+1]]`` at
        ``indices[offsets[t]:offsets[t+1]]``. Instead of the hidden states
        (1.6 KB a step), only their ReLU pattern is needed: which units were
        positive (25 bytes a step). With ``G[j] = sum_t epdlogp[t] * active[t, j] * x_t``:

        - ``dW1[j] = W2[j] * G[j]``, as ``dh.T @ epx`` with ``dh = outer(epdlogp, W2)``
          zeroed where the unit was off;
        - ``dW2[j] = sum_t epdlogp[t] * h[t, j] = W1[j] . G[j]``, since
          ``h[t, j] = W1[j] . x_t`` wherever the unit was on.

        ``G`` is built a block of steps at a time, as ``dh.T @ epx`` over the few
        hundred pixels that changed in the block: never the (T, D) matrix.

        Takes ``offsets`` (T + 1,) from 0, ``indices`` and ``values`` (N,) (-1 or +1),
        ``active`` (T, 25) uint8 (``np.packbits(h > 0)`` per step) and ``epdlogp`` (T,);
        returns the gradient of ``sum_t epdlogp[t] * logit_t``, as the dense one up to rounding.
        """
        W1, W2 = self.weights["W1"], self.weights["W2"]
        epdlogp, offsets = np.asarray(epdlogp, dtype=np.float64).ravel(), np.asarray(offsets)
        T = epdlogp.size
        # Only pixels that ever changed get a non-zero column; `row_of` maps each
        # stored entry to its pixel's row in GT.
        columns, row_of = np.unique(indices, return_inverse=True)
        GT = np.zeros((columns.size, H))  # (K, H): row k is column columns[k] of G
        for start in range(0, T, BACKWARD_CHUNK):
            stop = min(start + BACKWARD_CHUNK, T)
            first, last = int(offsets[start]), int(offsets[stop])  # the block's entries
            if first == last:
                continue  # no pixel changed in these steps
            on = np.unpackbits(active[start:stop], axis=1, count=H)  # (block, H) of 0 and 1
            dh = epdlogp[start:stop, None] * on  # (block, H): dh without the factor W2
            # The block's inputs, dense over only the pixels that changed in it: `touched`
            # are their rows in GT; each entry goes to its step's row, its pixel's column.
            touched, column_of = np.unique(row_of[first:last], return_inverse=True)
            step_of = np.repeat(np.arange(stop - start), np.diff(offsets[start : stop + 1]))
            epx = np.zeros((stop - start, touched.size))  # (block, touched)
            epx[step_of, column_of] = values[first:last]
            GT[touched] += epx.T @ dh  # (touched, H)
        dW2 = np.einsum("jk,kj->j", W1[:, columns], GT)  # (H,): row-wise W1[j] . G[j]
        return SparseGrad(columns.astype(np.intp), GT.T * W2[:, None], dW2)

    def update(
        self,
        grad_buffer: dict[str, np.ndarray],
        rmsprop_cache: dict[str, np.ndarray],
        learning_rate: float,
        decay_rate: float,
    ) -> None:
        """One RMSProp step of gradient ASCENT: new arrays replace the old in ``self.weights``
        and ``rmsprop_cache`` (an array held elsewhere keeps its values).

        ``cache = decay_rate * cache + (1 - decay_rate) * g**2``;
        ``W += learning_rate * g / (sqrt(cache) + 1e-5)``.

        Computed as those two lines are, operation for operation, but into 3 new
        arrays rather than 9: the workers wait while the driver does this.

        Raises:
            FloatingPointError: a gradient entry is NaN or infinite, or the step
                would make a weight or the cache so (it overflowed); then
                nothing (weights or cache) has been modified.
        """
        for k in self.weights:
            if not np.all(np.isfinite(grad_buffer[k])):
                raise FloatingPointError(f"refusing a non-finite gradient for {k}")
        new = {}
        for k, w in self.weights.items():
            g = grad_buffer[k]
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
                cache = decay_rate * rmsprop_cache[k]  # new cache (the old may be referenced)
                scratch = g * g  # g**2
                scratch *= 1 - decay_rate
                cache += scratch
                np.sqrt(cache, out=scratch)
                scratch += rmsprop_eps
                step = learning_rate * g  # new weights (the old ones may be referenced)
                step /= scratch
                step += w
            new[k] = cache, step
        for k, (cache, step) in new.items():
            if not (np.isfinite(step).all() and np.isfinite(cache).all()):
                raise FloatingPointError(f"the step would make {k} or its cache non-finite")
        for k, (cache, step) in new.items():
            rmsprop_cache[k], self.weights[k] = cache, step
