"""``State``: training's state between two updates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["State"]


@dataclass
class State:
    """What a checkpoint holds. ``weights``: ``{"W1": (H, D), "W2": (H,)}`` float64;
    ``rmsprop_cache``: the same shapes, RMSProp's running mean of squared gradients;
    ``iteration``: updates done; ``episodes``: games played; ``steps``: env steps played;
    ``running_reward``: the running mean of the games' scores (``None`` before any), and
    ``best_running_reward`` its best after any update."""

    weights: dict[str, np.ndarray]
    rmsprop_cache: dict[str, np.ndarray]
    iteration: int
    episodes: int
    steps: int
    running_reward: float | None
    best_running_reward: float | None
