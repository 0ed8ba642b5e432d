from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from PIL import Image, ImageSequence

from pong.tools.gif import GifWriter


def assert_gif_shows(path, frames: list[np.ndarray], frame_seconds: float) -> None:
    """Pillow's own reader: at every frame's start time the GIF shows exactly that frame."""
    with Image.open(path) as gif:
        assert gif.info["loop"] == 0
        shown = [
            (np.asarray(f.convert("RGB")), f.info["duration"]) for f in ImageSequence.Iterator(gif)
        ]
    starts = np.cumsum([0] + [duration for _, duration in shown])  # milliseconds
    assert starts[-1] == 10 * round(100 * frame_seconds * len(frames))  # no drift
    for i, frame in enumerate(frames):
        at = 10 * round(100 * frame_seconds * i)
        showing = np.searchsorted(starts, at, side="right") - 1
        assert (shown[showing][0] == frame).all(), f"frame {i}"


def moving_squares(n: int, seed: int = 0) -> list[np.ndarray]:
    """Frames of a few colours with some repeats, as a game's screen has."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(0, 256, (5, 3), dtype=np.uint8)
    frames, frame = [], np.zeros((40, 30, 3), np.uint8)
    for _ in range(n):
        if rng.random() < 0.7:  # otherwise the same frame again
            frame = frame.copy()
            y, x = rng.integers(0, 35), rng.integers(0, 25)
            frame[y : y + 5, x : x + 5] = colours[rng.integers(0, 5)]
        frames.append(frame)
    return frames


def test_every_frame_reads_back_exactly_at_its_time(tmp_path) -> None:
    frames = moving_squares(200)
    with open(tmp_path / "a.gif", "wb") as f:
        gif = GifWriter(f, 4 / 60)
        for frame in frames:
            gif.add(frame)
        gif.close()
    assert gif.frames == 200
    assert_gif_shows(tmp_path / "a.gif", frames, 4 / 60)


def test_memory_does_not_grow_with_the_frames(tmp_path) -> None:
    frame = np.zeros((210, 160, 3), np.uint8)  # Pong's screen: 100 KB a frame
    peaks = []
    for n in (50, 500):
        with open(tmp_path / f"{n}.gif", "wb") as f:
            tracemalloc.start()
            gif = GifWriter(f, 4 / 60)
            for i in range(n):
                frame[100, i % 160] = 255 - frame[100, i % 160]  # a change every frame
                gif.add(frame)
            gif.close()
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0] and peaks[1] < 2_000_000, peaks  # 500 frames: 50 MB kept


def test_more_than_256_colours_are_refused(tmp_path) -> None:
    frame = np.zeros((10, 30, 3), np.uint8)
    frame[..., 0], frame[..., 1] = (
        np.arange(300).reshape(10, 30) % 256,
        np.arange(300).reshape(10, 30) // 256,
    )
    with open(tmp_path / "a.gif", "wb") as f, pytest.raises(ValueError, match="256 colours"):
        GifWriter(f, 0.1).add(frame)
