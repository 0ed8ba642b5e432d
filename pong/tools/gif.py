"""An animated GIF written frame by frame: recording 1 game or 100 takes the same memory.

Pillow's holds every frame until it saves; this one writes each as it comes, as the rectangle
that changed, keeping only the previous frame and the palette: Pong's few colours fit one palette
of 256, which ``close`` writes into the room the header left.
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
        self.frames = self.written_until = 0  # frames added; those whose time is in the file

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
        colours = np.zeros(256, ">u4")  # 0x00RRGGBB, big-endian: its last 3 bytes are R, G, B
        colours[: len(self.palette)] = list(self.palette)  # in the order of their indices
        self.file.seek(_PALETTE_AT)
        self.file.write(colours.view(np.uint8).reshape(256, 4)[:, 1:].tobytes())
        self.file.seek(0, 2)

    def _indices(self, packed: np.ndarray) -> np.ndarray:
        """The palette indices of 0xRRGGBB pixels; a colour not seen before gets the next one."""
        colours, inverse = np.unique(packed, return_inverse=True)
        lookup = [self.palette.setdefault(c, len(self.palette)) for c in colours.tolist()]
        if len(self.palette) > 256:
            raise ValueError("a GIF frame can hold at most 256 colours")
        return np.array(lookup, np.uint8)[inverse].reshape(packed.shape)

    def _flush(self) -> None:
        """Write the pending rectangle, shown until now; times are rounded without drift."""
        if self.pending is None:
            return
        box, offset = self.pending
        per_frame = 100 * self.frame_seconds  # centiseconds
        duration = 10 * (round(per_frame * self.frames) - round(per_frame * self.written_until))
        image = Image.fromarray(box)  # mode "L": its bytes are the palette indices
        # disposal 1: leave the frame in place, so the next rectangle draws over it
        for chunk in GifImagePlugin.getdata(image, offset, duration=duration, disposal=1):
            self.file.write(chunk)
        self.written_until, self.pending = self.frames, None
