"""An animated GIF written frame by frame: recording 1 game or 100 takes the same memory.

Pillow's own GIF writer holds every frame until it saves. This one writes each frame
as it comes, as the rectangle that changed since the one before, and keeps only the
previous frame and the palette. Pong draws with a handful of colours, so one palette
of at most 256 keeps every pixel exact; it is written on ``close``, into the room the
header left for it.
"""

from __future__ import annotations

import struct
from typing import IO

import numpy as np
from PIL import GifImagePlugin, Image

__all__ = ["GifWriter"]

_PALETTE_AT = 13  # bytes before the global colour table: "GIF89a", screen size, flags


class GifWriter:
    """Writes RGB frames (``add``) into ``file`` (seekable) as one looping GIF, each shown
    for ``frame_seconds``; a frame identical to the one before lengthens it instead."""

    def __init__(self, file: IO[bytes], frame_seconds: float) -> None:
        self.file, self.frame_seconds = file, frame_seconds
        self.palette: dict[int, int] = {}  # 0xRRGGBB -> its index
        self.shown: np.ndarray | None = None  # the frame on screen, as 0xRRGGBB
        self.pending: tuple[np.ndarray, tuple[int, int]] | None = None  # a changed rectangle
        self.frames = 0  # frames added
        self.written_until = 0  # frames whose time is already in the file

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 frame."""
        rgb = frame.astype(np.uint32)
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        if self.shown is None:
            height, width = packed.shape
            self.file.write(b"GIF89a" + struct.pack("<HHBBB", width, height, 0xF7, 0, 0))
            self.file.write(bytes(256 * 3))  # the palette, filled in by close()
            self.file.write(b"!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00")  # loop forever
            self.pending = (self._indices(packed), (0, 0))
        elif (changed := packed != self.shown).any():
            self._flush()
            rows, cols = np.flatnonzero(changed.any(1)), np.flatnonzero(changed.any(0))
            box = packed[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
            self.pending = (self._indices(box), (int(cols[0]), int(rows[0])))
        self.shown = packed
        self.frames += 1

    def close(self) -> None:
        """Write the last frame, the trailer and the palette; the file stays open."""
        if self.shown is None:
            raise ValueError("a GIF needs at least one frame")
        self._flush()
        self.file.write(b";")
        palette = np.zeros((256, 3), np.uint8)
        for colour, index in self.palette.items():
            palette[index] = (colour >> 16) & 255, (colour >> 8) & 255, colour & 255
        self.file.seek(_PALETTE_AT)
        self.file.write(palette.tobytes())
        self.file.seek(0, 2)

    def _indices(self, packed: np.ndarray) -> np.ndarray:
        """The palette indices of 0xRRGGBB pixels; a colour not seen before gets the next one."""
        colours, inverse = np.unique(packed, return_inverse=True)
        for colour in colours.tolist():
            self.palette.setdefault(colour, len(self.palette))
        if len(self.palette) > 256:
            raise ValueError("a GIF frame can hold at most 256 colours")
        lookup = np.array([self.palette[c] for c in colours.tolist()], np.uint8)
        return lookup[inverse].reshape(packed.shape)

    def _flush(self) -> None:
        """Write the pending rectangle, shown until now; its time is counted without drift."""
        if self.pending is None:
            return
        box, offset = self.pending
        centiseconds = round(100 * self.frame_seconds * self.frames) - round(
            100 * self.frame_seconds * self.written_until
        )
        image = Image.fromarray(box)  # mode "L": its bytes are the palette indices
        # disposal 1: leave the frame in place, so the next rectangle draws over it
        for chunk in GifImagePlugin.getdata(image, offset, duration=10 * centiseconds, disposal=1):
            self.file.write(chunk)
        self.written_until, self.pending = self.frames, None
