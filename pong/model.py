"""The policy network: a two-layer NumPy net from pixels to P(paddle up).

Vocabulary, kept from Karpathy's 2016 program so the two read side by side:

- ``H``, ``D``: hidden units and input size (80 x 80 difference frame).
- ``W1`` (H, D) and ``W2`` (H,): the weights, in ``Model.weights``.
- ``aprob``: probability of action 2 (paddle up) for one input ``x``.
- ``epx`` (T, D), ``eph`` (T, H), ``epdlogp`` (T,): one episode's inputs,
  hidden states and advantage-scaled gradients of the log-probability.
- ``learning_rate``, ``decay_rate``: the RMSProp step size and cache decay.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "D",
    "H",
    "Model",
    "decay_rate",
    "learning_rate",
    "zeros_like_weights",
]

H = 200  # number of hidden-layer neurons
D = 80 * 80  # input dimensionality: an 80 x 80 difference frame
learning_rate = 1e-4  # RMSProp step size
decay_rate = 0.99  # decay factor of RMSProp's running mean of squared gradients
rmsprop_eps = 1e-5  # keeps the RMSProp division finite where the cache is 0


def sigmoid(x: float | np.ndarray) -> float | np.ndarray:
    """Squash a logit into a probability in [0, 1]."""
    # exp overflows to inf for very negative logits; 1 / inf = 0 is the right answer.
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def zeros_like_weights(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A dict of zero arrays shaped like ``weights``: a gradient buffer or RMSProp cache."""
    return {k: np.zeros_like(v) for k, v in weights.items()}


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
        >>> aprob, h = model.policy_forward(np.zeros(D))
        >>> float(aprob), h.shape
        (0.5, (200,))
    """

    def __init__(self, seed: int | np.random.SeedSequence | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.weights = {
            "W1": rng.standard_normal((H, D)) / np.sqrt(D),  # (H, D)
            "W2": rng.standard_normal(H) / np.sqrt(H),  # (H,)
        }

    def policy_forward(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Forward pass for one input.

        Args:
            x: (D,) float difference frame.

        Returns:
            ``(aprob, h)``: the probability of action 2 and the (H,) hidden state.
        """
        h = self.weights["W1"] @ x  # (H,)
        h[h < 0] = 0  # ReLU
        logp = self.weights["W2"] @ h  # scalar logit
        return float(sigmoid(logp)), h

    def policy_backward(
        self, eph: np.ndarray, epx: np.ndarray, epdlogp: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Backward pass for one episode, dense (the formula of the 2016 program).

        Args:
            eph: (T, H) hidden states.
            epx: (T, D) inputs.
            epdlogp: (T,) or (T, 1) gradients of log P(action taken) w.r.t. the
                logit, already scaled by the advantage.

        Returns:
            ``{"W1": (H, D), "W2": (H,)}``: the gradient of
            ``sum_t epdlogp[t] * logit_t`` (policy-gradient ascent direction).
        """
        epdlogp = np.asarray(epdlogp).ravel()  # (T,)
        dW2 = eph.T @ epdlogp  # (H,)
        dh = np.outer(epdlogp, self.weights["W2"])  # (T, H)
        dh[eph <= 0] = 0  # backprop through the ReLU
        dW1 = dh.T @ epx  # (H, D)
        return {"W1": dW1, "W2": dW2}

    def update(
        self,
        grad_buffer: dict[str, np.ndarray],
        rmsprop_cache: dict[str, np.ndarray],
        lr: float = learning_rate,
        decay: float = decay_rate,
    ) -> None:
        """One RMSProp step of gradient ASCENT, in place on weights and cache.

        ``cache = decay * cache + (1 - decay) * g**2``;
        ``W += lr * g / (sqrt(cache) + 1e-5)``.

        Raises:
            FloatingPointError: if any gradient entry is NaN or infinite; then
                nothing (weights or cache) has been modified.
        """
        for k in self.weights:
            if not np.all(np.isfinite(grad_buffer[k])):
                raise FloatingPointError(f"refusing a non-finite gradient for {k}")
        for k, w in self.weights.items():
            g = grad_buffer[k]
            rmsprop_cache[k] = decay * rmsprop_cache[k] + (1 - decay) * g**2
            self.weights[k] = w + lr * g / (np.sqrt(rmsprop_cache[k]) + rmsprop_eps)
