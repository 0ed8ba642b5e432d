"""The emulator's fast path to the frames the policy sees, for ale-py's Atari envs.

``AleFrames`` is ``pong.core.rollout.GymFrames`` without RGB conversion or wrappers: it steps
ALE as ``AtariEnv.step`` does and reads palette indices, ``is_object`` a table over them, learned
from the RGB screen as each index first appears and looked up only where an index changed."""

import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv

from pong.core.preprocess import FIELD, is_object

__all__ = ["AleFrames", "FastFrames", "with_fast_frames"]

UNKNOWN = 2  # table entry of a palette index not yet seen (known ones are 0 or 1)
# Wrappers that change nothing the policy sees when the emulator is stepped beneath them.
PASSIVE_WRAPPERS = ("OrderEnforcing", "PassiveEnvChecker", "SeededReset")


class AleFrames:
    """``GymFrames`` for an ale-py ``AtariEnv``, read straight from the emulator."""

    def __init__(self, env: gym.Env) -> None:
        self.env, self.atari, self.ale = env, env.unwrapped, env.unwrapped.ale
        self.screen = np.empty(self.ale.getScreenDims(), dtype=np.uint8)  # (210, 160) indices
        self.table = np.full(256, UNKNOWN, dtype=np.uint8)  # index -> is_object of its colour
        self.field = np.zeros(0, dtype=np.uint8)  # (D,) the last frame's palette indices

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game with ``env.reset``; its first frame."""
        self.env.reset(seed=seed)
        self.field = self._read_field()
        return self._look_up(self.field, slice(None)).view(bool)

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``GymFrames.step``: the body of ``AtariEnv.step``, then only the pixels that changed."""
        frameskip = self.atari._frameskip
        if not isinstance(frameskip, int):  # (low, high): drawn as AtariEnv draws it
            frameskip = self.atari.np_random.integers(*frameskip)
        action_index = self.atari._action_set[action]
        reward = sum((self.ale.act(action_index, 1.0) for _ in range(frameskip)), 0.0)
        done = self.ale.game_over(with_truncation=False) or self.ale.game_truncated()
        before, self.field = self.field, self._read_field()
        candidates = (self.field != before).nonzero()[0]  # where the palette index changed
        now = self._look_up(self.field, candidates)
        moved = now != self.table.take(before[candidates])  # the boolean changed too
        return candidates[moved], now[moved].view(bool), reward, bool(done)

    def _read_field(self) -> np.ndarray:
        """The screen's playing field as (D,) palette indices (a fresh array)."""
        self.ale.getScreen(self.screen)
        return np.ascontiguousarray(self.screen[FIELD]).ravel()

    def _look_up(self, field: np.ndarray, pixels: slice | np.ndarray) -> np.ndarray:
        """``is_object`` of ``field`` (the screen's) at ``pixels``, 0 or 1; new colours learned."""
        found = self.table.take(field[pixels])
        if found.size and found.max() == UNKNOWN:  # (max's initial= costs more than this)
            self.table[field] = is_object(self.ale.getScreenRGB()[FIELD][..., 0]).ravel()
            found = self.table.take(field[pixels])
        return found


class FastFrames(gym.Wrapper):
    """``env`` as it is, with ``fast_frames()``: its frames read by ``AleFrames``."""

    def fast_frames(self) -> AleFrames:
        return AleFrames(self.env)


def with_fast_frames(env: gym.Env) -> gym.Env:
    """``FastFrames(env)`` where ``AleFrames`` is exact, else ``env``: an ``AtariEnv`` under
    ``PASSIVE_WRAPPERS`` alone, RGB, discrete, silent, with no colour averaging (which blends
    two frames: a colour would no longer be a function of an index)."""
    atari = env
    while type(atari).__name__ in PASSIVE_WRAPPERS:
        atari = atari.env
    if not isinstance(atari, AtariEnv) or atari._obs_type != "rgb" or atari.continuous:
        return env
    if getattr(atari, "sound_obs", False) or atari.ale.getBool("color_averaging"):
        return env
    return FastFrames(env)
