"""What the network learned, as a picture: each hidden unit's ``W1`` row as an 80 x 80 image.

Drawn where its pixels are, a row shows what the unit looks for, as in the 2016 post: white
where a ball or paddle pixel arriving raises its activation, black where it lowers it.

>>> import numpy as np
>>> picture(np.zeros((200, 6400))).shape  # 10 rows of 20 units, 1-pixel gaps
(809, 1619)
"""

from typing import IO

import numpy as np
from PIL import Image

from pong.core.model import D

__all__ = ["COLUMNS", "SIDE", "picture", "save_png"]

SIDE, COLUMNS, GAP = 80, 20, 1  # an input is 80 x 80; units per row; black pixels between


def picture(W1: np.ndarray, columns: int = COLUMNS) -> np.ndarray:
    """The units of ``W1`` (H, D), ``columns`` a row, as a uint8 grey image (128: a weight of 0),
    each scaled by its own largest weight: the picture is where each looks, not how strongly."""
    if W1.shape[1:] != (D,):
        raise ValueError(f"W1 has shape {W1.shape}, expected (units, {D})")
    images = np.asarray(W1, dtype=np.float64).reshape(-1, SIDE, SIDE)
    largest = np.abs(images).max(axis=(1, 2), keepdims=True)
    images = images / np.where(largest > 0, largest, 1.0)
    step = SIDE + GAP
    canvas = np.full((-(-len(images) // columns) * step - GAP, columns * step - GAP), -1.0)
    for i, image in enumerate(images):
        r, c = divmod(i, columns)
        canvas[r * step : r * step + SIDE, c * step : c * step + SIDE] = image
    return np.round(127.5 + 127.5 * canvas).clip(0, 255).astype(np.uint8)


def save_png(W1: np.ndarray, file: IO[bytes]) -> tuple[int, int]:
    """Write ``picture(W1)`` to ``file`` as a PNG; its (height, width)."""
    image = picture(W1)
    Image.fromarray(image).save(file, format="PNG")
    return image.shape
