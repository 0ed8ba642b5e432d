"""Training's state between two updates: the weights, RMSProp's cache and the counters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["State"]


@dataclass
class State:
    """Training's state between two updates: what a checkpoint holds.

    Attributes:
        weights: ``{"W1": (H, D), "W2": (H,)}`` float64.
        rmsprop_cache: the same shapes; RMSProp's running mean of squared gradients.
        iteration: updates done.
        episodes: games played.
        steps: env steps played.
        running_reward: the running mean of game scores (``None`` before any).
        best_running_reward: its best value after any update so far.
    """

    weights: dict[str, np.ndarray]
    rmsprop_cache: dict[str, np.ndarray]
    iteration: int
    episodes: int
    steps: int
    running_reward: float | None
    best_running_reward: float | None
