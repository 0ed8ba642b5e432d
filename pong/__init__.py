"""pong: Karpathy's policy-gradient Pong in NumPy, games played in parallel by Ray actors.

The pieces, in the order the data flows:

- ``preprocess``: RGB frame -> 6400 inputs (``pong.preprocess``).
- ``Model``: the two-layer policy network and its RMSProp update (``pong.model``).
- ``rollout``: play one episode, stored sparsely; ``rollout_dense``: the same, stored
  as the 2016 program did; ``episode_gradient``: its gradient (``pong.rollout``).
- ``process_rewards``: discounted returns with the per-point reset (``pong.rewards``).
- ``RolloutWorker``: the Ray actor that owns an env and returns gradients (``pong.worker``).
- ``Trainer``: the driver's side, one update per ``step`` (``pong.train``), with
  its settings in ``pong.config.Config``.

Importing ``pong`` registers the toy env with Gymnasium, as env packages do:
``gymnasium.make("PongToy/Catch-v0")`` (``pong.toy``).
"""

from pong import toy
from pong.model import Model
from pong.preprocess import preprocess
from pong.rewards import process_rewards
from pong.rollout import episode_gradient, rollout, rollout_dense
from pong.train import Trainer
from pong.worker import RolloutWorker

toy.register()  # gymnasium.make("PongToy/Catch-v0") after `import pong`

__all__ = [
    "Model",
    "RolloutWorker",
    "Trainer",
    "episode_gradient",
    "preprocess",
    "process_rewards",
    "rollout",
    "rollout_dense",
]
