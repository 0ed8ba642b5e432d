"""pong: Karpathy's policy-gradient Pong in NumPy, games played in parallel by Ray actors.

Four parts, each a subpackage:

- ``pong.core``: the algorithm, importing nothing else of ours: ``preprocess``,
  the two-layer ``Model`` and its RMSProp update, ``process_rewards``,
  ``play_game`` (one game) and its ``game_gradient``, the ``RolloutWorker``
  Ray actor and the ``Trainer`` whose ``update`` is one update.
- ``pong.envs``: making the Pong envs, their seeded reset, and a toy Pong.
- ``pong.run``: a run's settings, directory, checkpoint, metrics and printed lines.
- ``pong.tools``: watching, exporting, plotting and comparing what runs made.

``import pong`` loads this file and ``pong/core/__init__.py``, which lists the
algorithm's names; no module of the four parts, and not Ray. ``from pong import
Model`` (or ``RolloutWorker``, ``State``, ``Trainer``, ``process_rewards``,
``play_game``, ``game_gradient``) loads the one module it comes from; ``preprocess``
is imported from its module, ``pong.core.preprocess``.
"""

from __future__ import annotations

import pong.core
from pong.core import __all__  # the algorithm's names: pong.Model is pong.core.Model


def __getattr__(name: str) -> object:
    """``pong.Model`` and the rest, imported on first use (PEP 562): Ray only with the actor."""
    if name not in __all__:
        raise AttributeError(f"module 'pong' has no attribute {name!r}")
    return getattr(pong.core, name)
