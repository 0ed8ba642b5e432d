"""The environments: Atari Pong (``make``, ``frames``, ``seeded_reset``) and a toy (``toy``).

Importing ``pong.envs`` registers the toy, as env packages do: ``gymnasium.make(toy.ENV_ID)``.
"""

import gymnasium as gym

from pong.envs import toy

gym.register(id=toy.ENV_ID, entry_point=toy.Catch)
