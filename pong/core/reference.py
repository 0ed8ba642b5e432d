"""The 2016 program's dense formulas, kept as the reference that training is proven against.

Karpathy's program stores each step's input as a (D,) float64 difference frame, and
its hidden state, about 53 KB a step, and computes the gradient with dense matrix
products. Training computes the same numbers sparsely (``Model.policy_forward_sparse``,
``Model.policy_backward_sparse``, ``pong.core.rollout``): a difference frame has ~30
non-zero entries of 6400. The tests play the same games both ways and compare; the
benchmarks time both. Nothing in training calls this module.
"""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from pong.core.model import D, H, Model, SparseGrad, sigmoid
from pong.core.preprocess import preprocess
from pong.core.rewards import advantages, gamma
from pong.core.rollout import DOWN, UP, SparseEpisode

__all__ = ["Episode", "dense_grad", "dense_inputs", "episode_gradient_dense", "policy_backward"]
__all__ += ["policy_forward", "rollout_dense"]


def policy_forward(model: Model, x: np.ndarray) -> tuple[float, np.ndarray]:
    """Forward pass for one (D,) input: ``(aprob, h)``, the probability of action 2 and
    the (H,) hidden state."""
    h = model.weights["W1"] @ x  # (H,)
    h[h < 0] = 0  # ReLU
    logp = float(model.weights["W2"] @ h)  # the logit of P(action 2)
    return sigmoid(logp), h


def policy_backward(
    model: Model, eph: np.ndarray, epx: np.ndarray, epdlogp: np.ndarray
) -> dict[str, np.ndarray]:
    """Backward pass for one episode: hidden states ``eph`` (T, H), inputs ``epx`` (T, D)
    and ``epdlogp`` (T,), the gradients of log P(action taken) w.r.t. the logit, already
    scaled by the advantage. Returns ``{"W1": (H, D), "W2": (H,)}``, the gradient of
    ``sum_t epdlogp[t] * logit_t`` (policy-gradient ascent direction)."""
    epdlogp = np.asarray(epdlogp).ravel()  # (T,)
    dW2 = eph.T @ epdlogp  # (H,)
    dh = np.outer(epdlogp, model.weights["W2"])  # (T, H)
    dh[eph <= 0] = 0  # backprop through the ReLU
    dW1 = dh.T @ epx  # (H, D)
    return {"W1": dW1, "W2": dW2}


class Episode(NamedTuple):
    """One game, step by step (T steps), as the 2016 program stored it.

    Attributes:
        epx: (T, D) float64 policy inputs (difference frames).
        eph: (T, H) float64 hidden states.
        epdlogp: (T,) float64, as in ``SparseEpisode``.
        epr: (T,) float64 reward returned by each step.
    """

    epx: np.ndarray
    eph: np.ndarray
    epdlogp: np.ndarray
    epr: np.ndarray


def rollout_dense(
    model: Model, env: gym.Env, rng: np.random.Generator, seed: int | None = None
) -> Episode:
    """``rollout`` as the 2016 program did it, storing dense inputs and hidden states.

    Same arguments as ``rollout``, and the same game; returns the ``Episode``.
    """
    observation, _ = env.reset(seed=seed)
    prev_x = None  # the policy sees the difference of consecutive frames
    xs, hs, dlogps, drs = [], [], [], []
    done = False
    while not done:
        cur_x = preprocess(observation)
        x = cur_x - prev_x if prev_x is not None else np.zeros(D)
        prev_x = cur_x

        aprob, h = policy_forward(model, x)
        action = UP if rng.random() < aprob else DOWN

        xs.append(x)
        hs.append(h)
        y = 1.0 if action == UP else 0.0  # the "fake label": pretend the sampled action was right
        dlogps.append(y - aprob)  # its log-likelihood gradient w.r.t. the logit

        observation, reward, terminated, truncated, _ = env.step(action)
        drs.append(float(reward))
        done = terminated or truncated
    return Episode(np.vstack(xs), np.vstack(hs), np.array(dlogps), np.array(drs))


def episode_gradient_dense(
    model: Model, episode: Episode, gamma: float = gamma
) -> tuple[dict[str, np.ndarray], str | None]:
    """``episode_gradient`` for a dense ``Episode``, through ``policy_backward``:
    ``({"W1": (H, D), "W2": (H,)}, note)``."""
    adv, note = advantages(episode.epr, gamma)
    epdlogp = episode.epdlogp * adv
    return policy_backward(model, episode.eph, episode.epx, epdlogp), note


def dense_inputs(episode: SparseEpisode) -> np.ndarray:
    """A ``SparseEpisode``'s inputs as the (T, D) float64 ``epx`` of an ``Episode``."""
    epx = np.zeros((len(episode.epr), D))
    rows = np.repeat(np.arange(len(episode.epr)), np.diff(episode.offsets))
    epx[rows, episode.indices] = episode.values
    return epx


def dense_grad(grad: SparseGrad) -> dict[str, np.ndarray]:
    """A ``SparseGrad`` as ``policy_backward`` gives one: ``{"W1": (H, D), "W2": (H,)}``."""
    W1 = np.zeros((H, D), order="F")
    W1[:, grad.columns] = grad.W1_columns
    return {"W1": W1, "W2": grad.W2.copy()}
