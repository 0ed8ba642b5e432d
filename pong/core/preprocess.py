"""Preprocessing: one 210 x 160 x 3 RGB Pong frame -> 6400 inputs of 0 or 1, and a game's
frames as the pixels whose 0 or 1 changed each step: the non-zero entries of 2016's
difference frame ``preprocess(now) - preprocess(before)``, without the 6400 floats."""

from __future__ import annotations

from typing import Protocol

import gymnasium as gym
import numpy as np

__all__ = ["BACKGROUND", "FIELD", "Frames", "GymFrames", "binarize", "frames_of", "is_object"]
__all__ += ["preprocess"]

BACKGROUND = (144, 109)  # red-channel values of Pong's two background colours
FIELD = (slice(35, 195, 2), slice(None, None, 2))  # the field without the score, every 2nd pixel


def is_object(red: np.ndarray) -> np.ndarray:
    """True where a red-channel value is not one of the background's (a paddle or the ball)."""
    return (red != BACKGROUND[0]) & (red != BACKGROUND[1])


def binarize(frame: np.ndarray) -> np.ndarray:
    """A (210, 160, 3) frame's ``FIELD``, red channel, ``is_object``: the (6400,) bool inputs.

    Example:
        >>> frame = np.full((210, 160, 3), 109, dtype=np.uint8)
        >>> frame[193, 158, 0] = 92  # a paddle pixel, in the last kept position
        >>> np.flatnonzero(binarize(frame))
        array([6399])
    """
    if frame.shape != (210, 160, 3):
        raise ValueError(f"expected a (210, 160, 3) Pong frame, got shape {frame.shape}")
    # A contiguous copy: the frame is never written, and is_object runs on 6400 packed bytes
    return is_object(np.ascontiguousarray(frame[FIELD][..., 0])).ravel()


def preprocess(frame: np.ndarray) -> np.ndarray:
    """2016's ``prepro``: ``binarize`` as (6400,) float64, 0 for background and 1 for a paddle
    or the ball. Unlike 2016's, it does not write into the caller's frame, and a red value of 0
    is 1 here (2016's left it 0; Pong's field never has one)."""
    return binarize(frame).astype(np.float64)


# The fast path reads a game's frames through these (read them with ``rollout``).


class Frames(Protocol):
    """A game's frames, binarized, step by step: ``GymFrames``, or an env's faster equal."""

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game; its first frame, binarized: (6400,) bool."""

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``(changed, arrived, reward, done)`` for one action: the sorted pixels whose
        boolean changed, their new values (True: an object arrived), the step's reward, and
        whether the game ended."""


class GymFrames:
    """Steps ``env`` through Gymnasium and binarizes each observation: any env or wrapper.

    Example:
        >>> import ale_py, gymnasium as gym
        >>> gym.register_envs(ale_py)
        >>> frames = GymFrames(gym.make("ALE/Pong-v5"))
        >>> first = frames.reset(seed=0)
        >>> first.shape, first.dtype
        ((6400,), dtype('bool'))
        >>> changed, arrived, reward, done = frames.step(0)
        >>> bool((frames.frame[changed] == arrived).all() and (first[changed] != arrived).all())
        True
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.frame = np.zeros(0, dtype=bool)  # the last frame, binarized

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start a game; its first frame, binarized: (6400,) bool."""
        observation, _ = self.env.reset(seed=seed)
        self.frame = binarize(observation)
        return self.frame

    def step(self, action: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
        """``Frames.step``."""
        observation, reward, terminated, truncated, _ = self.env.step(action)
        frame = binarize(observation)
        changed = np.flatnonzero(frame != self.frame)
        self.frame = frame
        return changed, frame[changed], float(reward), bool(terminated or truncated)


def frames_of(env: gym.Env) -> Frames:
    """``env.fast_frames()``, where ``env`` offers a faster reader of the same frames (as
    ``pong.envs`` gives Atari Pong), else ``GymFrames(env)``. A wrapper hides it: what the
    wrapper sees (a recorder, say) is then what is read."""
    fast = getattr(env, "fast_frames", None)
    return fast() if callable(fast) else GymFrames(env)
