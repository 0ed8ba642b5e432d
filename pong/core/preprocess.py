"""Preprocessing: one 210 x 160 x 3 RGB Pong frame -> 6400 inputs of 0 or 1 (2016's
``prepro``), by a test the fast path also reads frames with (``binarize``)."""

from __future__ import annotations

import numpy as np

__all__ = ["BACKGROUND", "FIELD", "binarize", "is_object", "preprocess"]

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
