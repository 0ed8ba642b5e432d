from __future__ import annotations

import numpy as np
import pytest

from pong.core.preprocess import preprocess


def reference_preprocess(frame: np.ndarray) -> np.ndarray:
    """The preprocessing of docs/algorithm.md, pixel by pixel."""
    out = np.zeros(6400)
    for i, row in enumerate(range(35, 195, 2)):
        for j, col in enumerate(range(0, 160, 2)):
            value = frame[row, col, 0]
            out[i * 80 + j] = 0.0 if value in (144, 109) else 1.0
    return out


@pytest.mark.parametrize("background", [144, 109])
def test_background_is_zero_and_objects_are_one(background: int) -> None:
    frame = np.full((210, 160, 3), background, dtype=np.uint8)
    frame[35, 0, 0] = 236  # ball, first kept pixel
    frame[194 - 1, 158, 0] = 92  # paddle, last kept pixel (row 193, column 158)
    frame[36, 0, 0] = 236  # odd row: dropped
    frame[35, 1, 0] = 236  # odd column: dropped
    frame[34, 0, 0] = 236  # above the field (score): dropped
    frame[195, 0, 0] = 236  # below the field: dropped
    frame[35, 2, 1] = 236  # green channel only: not seen
    x = preprocess(frame)
    assert x.shape == (6400,) and x.dtype == np.float64
    assert x[0] == 1.0 and x[6399] == 1.0
    assert x.sum() == 2.0


def test_matches_pixel_by_pixel_reference_on_random_frames() -> None:
    rng = np.random.default_rng(0)
    for _ in range(3):
        frame = rng.choice(np.array([144, 109, 0, 92, 213, 236], dtype=np.uint8), (210, 160, 3))
        np.testing.assert_array_equal(preprocess(frame), reference_preprocess(frame))


def test_does_not_modify_the_callers_frame() -> None:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (210, 160, 3), dtype=np.uint8)
    frame[40:50, 10:20, 0] = 144
    before = frame.copy()
    preprocess(frame)
    np.testing.assert_array_equal(frame, before)


def test_rejects_a_frame_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"\(210, 160, 3\)"):
        preprocess(np.zeros((84, 84, 3), dtype=np.uint8))
