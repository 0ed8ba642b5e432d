"""Preprocessing: one 210 x 160 x 3 RGB Pong frame -> 6400 inputs of 0 or 1."""

from __future__ import annotations

import numpy as np

__all__ = ["BACKGROUND", "FIELD", "binarize", "is_object", "preprocess"]

BACKGROUND = (144, 109)  # red-channel values of Pong's two background colours
# Rows 35..194 (the playing field, without the score), every second row and column.
FIELD = (slice(35, 195, 2), slice(None, None, 2))


def is_object(red: np.ndarray) -> np.ndarray:
    """True where a red-channel value is not one of the background's (a paddle or the ball)."""
    return (red != BACKGROUND[0]) & (red != BACKGROUND[1])


def binarize(frame: np.ndarray) -> np.ndarray:
    """``preprocess`` as a (6400,) bool array: what the fast path stores and differences.

    Example:
        >>> frame = np.full((210, 160, 3), 109, dtype=np.uint8)
        >>> frame[193, 158, 0] = 92  # a paddle pixel, in the last kept position
        >>> np.flatnonzero(binarize(frame))
        array([6399])
    """
    if frame.shape != (210, 160, 3):
        raise ValueError(f"expected a (210, 160, 3) Pong frame, got shape {frame.shape}")
    # A contiguous (80, 80) copy: nothing is written into the frame, and the two
    # comparisons of is_object run on 6400 packed bytes rather than a strided view.
    return is_object(np.ascontiguousarray(frame[FIELD][..., 0])).ravel()


def preprocess(frame: np.ndarray) -> np.ndarray:
    """Crop, downsample and binarise one frame.

    Rows 35..194 (the playing field, without the score), every second row and
    column, red channel: an 80 x 80 image. Background pixels become 0, every
    other pixel (paddles, ball) becomes 1. The caller's frame is not modified
    (the original wrote into it).

    Args:
        frame: (210, 160, 3) uint8 RGB observation.

    Returns:
        (6400,) float64 array of 0.0 and 1.0.

    Example:
        >>> frame = np.full((210, 160, 3), 144, dtype=np.uint8)
        >>> frame[35, 0, 0] = 236  # the ball, in the first kept pixel
        >>> x = preprocess(frame)
        >>> x.shape, float(x.sum()), float(x[0])
        ((6400,), 1.0, 1.0)
    """
    return binarize(frame).astype(np.float64)
