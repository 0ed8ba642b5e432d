"""The policy network: a two-layer NumPy net from pixels to P(paddle up), and RMSProp.

Names are 2016's: ``H`` hidden units, ``D`` inputs, ``W1`` (H, D), ``W2`` (H,), ``aprob`` =
P(action 2); for a game of T steps ``epx`` (T, D) inputs, ``eph`` (T, H) hidden states,
``epdlogp`` (T,) each step's d log P(action taken) / d logit, and ``epr`` (T,) rewards.
These are 2016's dense ``policy_forward`` and ``policy_backward``; ``pong.core.rollout``
computes the same on the ~26 non-zero entries of a difference frame."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["D", "DOWN", "H", "UP", "Model", "policy_backward", "policy_forward", "sigmoid"]
__all__ += ["zeros_like_weights"]

H = 200  # hidden units
D = 80 * 80  # inputs: an 80 x 80 difference frame
UP, DOWN = 2, 3  # the two actions, ALE's "RIGHT" and "LEFT": the paddle moves up and down


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

    def rmsprop(self, grad_buffer: dict, rmsprop_cache: dict, learning_rate, decay_rate):
        """RMSProp ascent, as 2016's two lines (fewer arrays was no faster: benchmarks/README.md).
        New arrays replace the old in ``self.weights`` and ``rmsprop_cache`` (a checkpoint may
        hold the old). If the gradient, or a new weight or cache, is not finite, it raises
        ``FloatingPointError``, changing nothing."""
        new_cache, new_weights = {}, {}
        for k, w in self.weights.items():
            g = grad_buffer[k]
            with np.errstate(over="ignore", invalid="ignore"):  # refused below instead
                cache = new_cache[k] = decay_rate * rmsprop_cache[k] + (1 - decay_rate) * g**2
                new_weights[k] = w + learning_rate * g / (np.sqrt(cache) + 1e-5)
            if not (np.isfinite(cache).all() and np.isfinite(new_weights[k]).all()):
                raise FloatingPointError(f"the update would make {k} or its cache non-finite")
        rmsprop_cache.update(new_cache)
        self.weights.update(new_weights)


def policy_forward(model: Model, x: np.ndarray) -> tuple[float, np.ndarray]:
    """2016's forward pass for one (D,) input: ``(aprob, h)``, h the (H,) hidden state."""
    h = model.weights["W1"] @ x
    h[h < 0] = 0  # ReLU
    logp = float(model.weights["W2"] @ h)  # 2016's name; it holds the logit, not a log-probability
    return sigmoid(logp), h


def policy_backward(model: Model, eph: np.ndarray, epx: np.ndarray, weighted: np.ndarray) -> dict:
    """2016's backward pass for one game: the gradient ``{"W1": (H, D), "W2": (H,)}`` of
    ``sum_t weighted[t] * logit_t``; ``weighted`` is ``epdlogp`` times the advantages (2016
    multiplied its ``epdlogp`` in place and passed it under that name)."""
    weighted = np.asarray(weighted).ravel()
    dW2 = eph.T @ weighted
    dh = np.outer(weighted, model.weights["W2"])
    dh[eph <= 0] = 0  # backprop through the ReLU
    dW1 = dh.T @ epx  # (H, D)
    return {"W1": dW1, "W2": dW2}
