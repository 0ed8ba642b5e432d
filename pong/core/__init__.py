"""The algorithm: Karpathy's 2016 policy-gradient Pong, with Ray actors playing the games.
It imports nothing else of ours. Read in this order; each module uses only those before it,
except that ``train`` hands the dealing of games to ``schedule``, the last chapter.

The maths, as 2016 wrote it:

- ``preprocess``: an RGB frame -> 6400 inputs of 0 or 1.
- ``rewards``: discounted returns, reset at each point, and advantages.
- ``model``: the network: its forward and backward passes, and RMSProp.
- ``reference``: a game played and stored as 2016 did, and its gradient.

The fast path, which the tests check against ``reference``, and Ray's loop:

- ``rollout``: the same game played and stored sparsely (its frames read as the pixels that
  changed), and its gradient, by the network's passes on the few inputs that are not 0.
- ``worker``: ``RolloutWorker``, the Ray actor that plays games, and each game's seed.
- ``state`` and ``train``: what a checkpoint holds, and Ray's update loop: start the workers,
  get each game's gradient, add them in game order, apply RMSProp once.
- ``schedule``: ``Dealer``, which deals the games as workers come and go, and starts backups
  of slow games. A first reading can skip it.

``rollout`` and ``worker`` already use a few of the dealer's words (a copy of a game, a backup,
abandon): docs/algorithm.md defines them under "Glossary".
"""
