"""The environments: Atari Pong (``make``, ``frames``, ``seeded_reset``) and a toy (``toy``),
which importing ``pong.envs`` registers with Gymnasium, as env packages do."""

from pong.envs import toy  # noqa: F401 (registers the toy)
