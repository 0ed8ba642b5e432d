"""Making the Atari Pong environment with Gymnasium and ale-py."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np

__all__ = ["DEFAULT_ENV", "UP", "DOWN", "check_env", "make_env"]

DEFAULT_ENV = "ALE/Pong-v5"  # frameskip 4, sticky actions 0.25
UP, DOWN = 2, 3  # ALE's "RIGHT" and "LEFT": the paddle moves up and down


def _register() -> None:
    """Register ale-py's envs (Gymnasium 1.x no longer discovers plugins) and our toy."""
    import ale_py

    from pong import toy

    # One banner per worker process says nothing a user needs.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    gym.register_envs(ale_py)
    toy.register()


def make_env(env_id: str = DEFAULT_ENV) -> gym.Env:
    """Create the env ``env_id`` (``ALE/Pong-v5``, the legacy ``Pong-v0``, ...).

    Raises:
        ValueError: unknown id, or an env whose frames or actions are not Pong's.
    """
    _register()
    with warnings.catch_warnings():
        # Pong-v0 is the id of the 2016 program; using it on purpose is fine.
        warnings.filterwarnings("ignore", message=".*is out of date", category=DeprecationWarning)
        try:
            env = gym.make(env_id)
        except gym.error.Error as e:
            raise ValueError(f"unknown env id {env_id!r}: {e}") from None
    shape = env.observation_space.shape
    if shape != (210, 160, 3) or env.observation_space.dtype != np.uint8:
        env.close()
        raise ValueError(
            f"env {env_id!r} has observations of shape {shape}; a (210, 160, 3) uint8"
            " Atari frame is needed"
        )
    n = getattr(env.action_space, "n", 0)
    if n <= max(UP, DOWN):
        env.close()
        raise ValueError(f"env {env_id!r} has {n} actions; actions {UP} and {DOWN} are needed")
    game = getattr(env.unwrapped, "_game", "pong")  # ale-py's ROM name; "pong" for others
    if game != "pong":
        env.close()
        raise ValueError(
            f"env {env_id!r} plays {game}, not Pong: the preprocessing and the rewards are"
            " Pong's (ALE/Pong-v5, Pong-v0 or PongToy/Catch-v0)"
        )
    return env


def check_env(env_id: str) -> None:
    """Raise ``ValueError`` with a one-line reason unless ``env_id`` makes a Pong-like env."""
    make_env(env_id).close()
