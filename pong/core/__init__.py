"""The algorithm: Karpathy's 2016 policy-gradient Pong, with Ray actors playing the games.
It imports nothing else of ours. Read in this order; each module uses only those before it:

- ``preprocess``: an RGB frame -> 6400 inputs; a game's frames as the pixels that changed.
- ``rewards``: discounted returns, reset at each point, and advantages.
- ``model``: the policy network on sparse inputs: a game's storage, its gradient, RMSProp.
- ``rollout``: one game played and stored, and its gradient.
- ``reference``: the 2016 dense formulas, which the tests prove the sparse path equal to.
- ``worker``: ``RolloutWorker``, the Ray actor that plays games.
- ``schedule``: ``Dealer``, which deals an update's games to the workers.
- ``state`` and ``train``: what a checkpoint holds, and the update: Ray's example's loop,
  with one worker per CPU and results added in game order (docs/algorithm.md says why).
"""

from __future__ import annotations

import importlib

# Where each name lives; the actor and the trainer bring Ray with them. Not ``preprocess``:
# its module, ``pong.core.preprocess``, would shadow it.
_HOMES = dict(Model="model", RolloutWorker="worker", State="state", Trainer="train")
_HOMES |= dict(game_gradient="rollout", play_game="rollout", process_rewards="rewards")
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    """Each name imported on first use (PEP 562), so ``Model`` comes without Ray."""
    if name not in _HOMES:
        raise AttributeError(f"module 'pong.core' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pong.core.{_HOMES[name]}"), name)
