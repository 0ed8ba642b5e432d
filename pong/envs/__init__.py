"""The environments: Pong made with Gymnasium and ale-py (``make``), its seeded reset
without reloading the ROM (``seeded_reset``), and a toy Pong learned in seconds (``toy``).

Importing ``pong.envs`` registers the toy with Gymnasium, as env packages do:
``gymnasium.make("PongToy/Catch-v0")``.
"""

from pong.envs import toy

toy.register()
