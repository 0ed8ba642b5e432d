"""The emulator's fast path to what the policy sees, for ale-py's Atari envs.

``pong.core.preprocess.GymFrames`` calls ``env.reset``/``env.step``, binarizes the
RGB observation and compares it with the last one. ``AleFrames`` gives the same
changes, rewards and game ends faster. It does what ``AtariEnv.step`` does (the same
``ale.act`` calls with the same frameskip, and sticky actions inside ALE), then reads
the screen as ALE stores it: one palette index per pixel. That skips converting all
100,800 bytes to RGB (a noticeable part of each step) and the Python of the
Gymnasium wrappers. A pixel's colour is a fixed function of its palette index, so
``binarize``'s test "is the red channel a background colour" is a 256-entry table
over palette indices. The table is filled from the real RGB screen the first time
each index appears, so no palette is written down here. And since a pixel's boolean
can only change where its palette index did, the table is looked up at those few
pixels only.

``with_fast_frames(env)`` wraps an env for which this is exact in ``FastFrames``,
whose ``fast_frames()`` the rollout takes (``pong.core.preprocess.frames_of``);
``pong.envs.make.make_env`` does it. Everywhere else (the toy env, recording
wrappers, colour averaging) the rollout reads frames through Gymnasium.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from pong.core.preprocess import FIELD, is_object

__all__ = ["AleFrames", "FastFrames", "with_fast_frames"]

UNKNOWN = 2  # table entry of a palette index not yet seen (known ones are 0 or 1)

# Wrappers that ``gym.make`` adds and that only check the API, and ``make_env``'s
# quicker seeded reset (the same state): stepping the emulator underneath them
# changes nothing a rollout sees.
PASSIVE_WRAPPERS = ("OrderEnforcing", "PassiveEnvChecker", "SeededReset")


class AleFrames:
    """``GymFrames`` for an ale-py ``AtariEnv``, read straight from the emulator.

    Use ``with_fast_frames``, which checks that ``env`` is one this is exact for.
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.atari = env.unwrapped
        self.ale = self.atari.ale
        self.screen = np.empty(self.ale.getScreenDims(), dtype=np.uint8)  # (210, 160) indices
        self.table = np.full(256, UNKNOWN, dtype=np.uint8)  # palette index -> is_object
        self.field = np.zeros(0, dtype=np.uint8)  # (D,) the last frame's palette indices

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game (``env.reset``: seeding stays Gymnasium's); its first frame."""
        self.env.reset(seed=seed)
        field = self._read_field()
        frame = self._look_up(field, slice(None))
        self.field = field  # every palette index in it is in the table from here on
        return frame.view(bool)

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``GymFrames.step``: the body of ``AtariEnv.step``, then only the pixels that changed."""
        frameskip = self.atari._frameskip
        if not isinstance(frameskip, int):  # (low, high): drawn as AtariEnv draws it
            frameskip = self.atari.np_random.integers(*frameskip)
        action_idx = self.atari._action_set[action]
        reward = 0.0
        for _ in range(frameskip):
            reward += self.ale.act(action_idx, 1.0)
        done = self.ale.game_over(with_truncation=False) or self.ale.game_truncated()

        field = self._read_field()
        candidates = (field != self.field).nonzero()[0]  # where the palette index changed
        now = self._look_up(field, candidates)
        moved = now != self.table.take(self.field[candidates])  # the boolean changed too
        self.field = field
        return candidates[moved], now[moved].view(bool), reward, bool(done)

    def _read_field(self) -> np.ndarray:
        """The screen's playing field as (D,) palette indices (a fresh array)."""
        self.ale.getScreen(self.screen)
        return np.ascontiguousarray(self.screen[FIELD]).ravel()

    def _look_up(self, field: np.ndarray, pixels: slice | np.ndarray) -> np.ndarray:
        """``is_object`` of ``field`` (the current screen's) at ``pixels``, as 0 or 1 (uint8).

        A colour not seen before is learned first, from the current RGB screen.
        """
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
    """``FastFrames(env)`` when ``AleFrames`` is exact for ``env``, else ``env``.

    Exact means: an ale-py ``AtariEnv`` with RGB observations, discrete
    actions, no sound and no colour averaging (which blends two frames, so a
    pixel's colour is no longer a function of its palette index), under no
    wrapper but Gymnasium's API checks.
    """
    wrapper = env
    while isinstance(wrapper, gym.Wrapper):
        if type(wrapper).__name__ not in PASSIVE_WRAPPERS:
            return env
        wrapper = wrapper.env
    from ale_py.env import AtariEnv

    exact = (
        isinstance(wrapper, AtariEnv)
        and getattr(wrapper, "_obs_type", None) == "rgb"
        and getattr(wrapper, "continuous", True) is False
        and not getattr(wrapper, "sound_obs", False)
        and isinstance(getattr(wrapper, "_frameskip", None), (int, tuple))
        and hasattr(wrapper, "_action_set")
        and not wrapper.ale.getBool("color_averaging")
    )
    return FastFrames(env) if exact else env
