"""pong: Karpathy's policy-gradient Pong in NumPy, games played in parallel by Ray actors.

Four parts, each a subpackage:

- ``pong.core``: the algorithm, importing nothing else of ours: preprocessing, returns, the
  two-layer network and RMSProp, one game and its gradient, the ``RolloutWorker`` Ray actor
  and the ``Trainer`` whose ``update`` is one update. Its ``__init__`` gives the reading order.
- ``pong.envs``: making the Pong envs, their seeded reset, and a toy Pong.
- ``pong.run``: a run's settings, directory, checkpoint, metrics and printed lines.
- ``pong.tools``: watching, exporting, plotting and comparing what runs made.

``import pong`` loads this file alone; each name is imported from its module, and only
``pong.core.worker``, ``pong.core.train`` and ``pong.core.schedule`` bring Ray.
"""
