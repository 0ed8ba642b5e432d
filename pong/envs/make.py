"""Making the Atari Pong environment with Gymnasium and ale-py."""

import functools
import warnings
from collections.abc import Callable

import ale_py
import gymnasium as gym

from pong.envs import toy
from pong.envs.frames import with_fast_frames
from pong.envs.seeded_reset import SeededReset

__all__ = ["DEFAULT_ENV", "PONG_ENVS", "check_env", "check_goal", "check_id", "env_maker"]
__all__ += ["make_env"]

DEFAULT_ENV = "ALE/Pong-v5"  # frameskip 4, sticky actions 0.25
# ale-py's Pong ids (Pong-v0 is the 2016 program's) and our toy: all this program plays.
PONG_ENVS = (DEFAULT_ENV, "Pong-v0", "Pong-v4", "PongNoFrameskip-v0", "PongNoFrameskip-v4")
PONG_ENVS += (toy.ENV_ID,)


def check_id(env_id: str) -> None:
    """A one-line ``ValueError`` for an id outside ``PONG_ENVS``, checked before Gymnasium sees
    an id from a flag or a file: it would import the module named before a ``:`` in it."""
    plays = f"this program plays {', '.join(PONG_ENVS)}"
    if ":" in env_id and env_id not in PONG_ENVS:
        raise ValueError(f"env id {env_id!r} names a Python module to import; {plays}")
    if env_id not in PONG_ENVS:
        raise ValueError(f"unknown env id {env_id!r}: {plays}")


def check_goal(env_id: str, until_mean: float | None) -> None:
    """A one-line ``ValueError`` for a running mean to pass that no game of ``env_id`` reaches
    (Pong's 21 points, the toy's ``POINTS`` balls), or that every one is above."""
    best = toy.POINTS if env_id == toy.ENV_ID else 21
    if until_mean is not None and until_mean >= best:
        raise ValueError(
            f"a game of {env_id} scores at most {best}, so no running mean is above {until_mean:g}"
        )
    if until_mean is not None and until_mean < -best:
        raise ValueError(f"a game of {env_id} scores at least {-best}, so every running mean is"
                         f" above {until_mean:g}")  # fmt: skip


def make_env(env_id: str = DEFAULT_ENV) -> gym.Env:
    """The env ``env_id`` (``check_id`` first); an Atari env wrapped in ``SeededReset`` (seeded
    resets without reloading the ROM) and ``FastFrames`` (frames read from the emulator)."""
    check_id(env_id)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # one banner per worker: noise
    gym.register_envs(ale_py)  # Gymnasium 1.x no longer discovers plugins
    with warnings.catch_warnings():  # Pong-v0 is the 2016 program's id: used on purpose
        warnings.filterwarnings("ignore", message=".*is out of date", category=DeprecationWarning)
        env = gym.make(env_id)
    return with_fast_frames(SeededReset(env)) if env_id != toy.ENV_ID else env


def env_maker(env_id: str) -> Callable[[], gym.Env]:
    """What makes ``env_id`` in a ``RolloutWorker`` (which Ray pickles by reference)."""
    check_id(env_id)
    return functools.partial(make_env, env_id)


def check_env(env_id: str) -> None:
    """Raise ``ValueError`` with a one-line reason unless ``env_id`` makes a Pong env."""
    make_env(env_id).close()
