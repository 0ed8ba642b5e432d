"""The algorithm: Karpathy's 2016 policy-gradient Pong, with Ray actors playing the games.

Read in this order, the order the data flows:

- ``preprocess``: an RGB frame -> the 6400 inputs, and a game's frames as the
  pixels that changed each step.
- ``model``: the two-layer policy network, its gradient and RMSProp.
- ``rewards``: discounted returns, reset at each point.
- ``rollout``: one game played and stored, and its gradient.
- ``worker``: ``RolloutWorker``, the Ray actor that plays games.
- ``schedule`` and ``train``: one update, as Ray's example has it; ``state``: what
  a checkpoint holds.

``reference`` keeps the 2016 program's dense formulas, which the tests prove
the fast path equal to; training never calls it.

It imports nothing else of ours: it takes plain hyperparameters and a function
that makes an env, and gives back plain state.
"""

from __future__ import annotations

import importlib

_HOMES = {  # where each name lives; the actor and the trainer bring Ray with them
    "Model": "model",
    "RolloutWorker": "worker",
    "State": "state",
    "Trainer": "train",
    "episode_gradient": "rollout",
    "process_rewards": "rewards",
}  # not ``preprocess`` and ``rollout``: the modules of those names would shadow them
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    """Each name imported on first use (PEP 562), so ``Model`` comes without Ray."""
    if name not in _HOMES:
        raise AttributeError(f"module 'pong.core' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pong.core.{_HOMES[name]}"), name)
