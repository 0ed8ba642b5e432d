"""``State``: training's state between two updates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["State"]


@dataclass
class State:
    """What a checkpoint holds besides the run's settings. (A policy file holds the weights
    alone, stored as float32, and the counters; read back, they are float64 here too.)"""

    weights: dict[str, np.ndarray]  # {"W1": (H, D), "W2": (H,)} float64
    rmsprop_cache: dict[str, np.ndarray]  # the same shapes: RMSProp's average of squared grads
    updates: int  # updates done
    games: int  # games played
    steps: int  # env steps played
    running_mean: float | None  # the running mean of the games' scores (None before any)
    best_running_mean: float | None  # its best after any update
