"""pong.tools.weights: the W1 rows drawn as 80 x 80 images, checked tile by tile."""

from __future__ import annotations

import numpy as np
import pytest

from pong.core.model import D, H, Model
from pong.tools.weights import COLUMNS, GAP, SIDE, picture


def test_each_tile_is_its_unit_s_row_as_an_80_by_80_image() -> None:
    W1 = Model(seed=3).weights["W1"]
    image = picture(W1)
    step = SIDE + GAP
    assert image.dtype == np.uint8 and image.shape == (10 * step - GAP, COLUMNS * step - GAP)
    for unit in (0, 7, 19, 20, 199):
        r, c = divmod(unit, COLUMNS)
        tile = image[r * step : r * step + SIDE, c * step : c * step + SIDE].astype(float)
        # Pixel (y, x) of the frame is input y * 80 + x: row-major, as preprocess flattens it.
        row = W1[unit].reshape(SIDE, SIDE)
        expected = 127.5 + 127.5 * row / np.abs(row).max()
        np.testing.assert_allclose(tile, expected, atol=0.5 + 1e-9)
    assert (image[SIDE, :] == 0).all() and (image[:, SIDE] == 0).all()  # black gaps


def test_a_pixel_the_unit_likes_is_white_one_it_dislikes_black() -> None:
    W1 = np.zeros((H, D))
    W1[0, 3 * SIDE + 5] = 2.0  # unit 0 likes pixel (3, 5)
    W1[0, 10 * SIDE + 40] = -1.0  # and dislikes (10, 40)
    image = picture(W1)
    assert image[3, 5] == 255 and image[10, 40] == 64 and image[0, 0] == 128
    assert (image[:SIDE, SIDE + GAP : 2 * SIDE + GAP] == 128).all()  # unit 1: all zero, grey


def test_a_matrix_that_is_not_w1_is_refused() -> None:
    with pytest.raises(ValueError, match=r"W1 has shape \(200, 80\)"):
        picture(np.zeros((200, 80)))
