"""An animated GIF written frame by frame: recording 1 game or 100 takes the same memory.

Pillow's writer holds every frame until it saves; this one writes each as it comes (the
rectangle that changed, with its own palette), keeping only the frame on screen."""

import struct
from typing import IO

import numpy as np
from PIL import GifImagePlugin, Image

__all__ = ["GifWriter"]


class GifWriter:
    """Writes RGB frames (``add``) into ``file`` as one looping GIF, each shown for
    ``frame_seconds``; a frame identical to the one before lengthens it instead."""

    def __init__(self, file: IO[bytes], frame_seconds: float) -> None:
        self.file, self.frame_seconds = file, frame_seconds
        self.shown: np.ndarray | None = None  # the frame on screen, as 0xRRGGBB
        self.pending: tuple[Image.Image, tuple[int, int]] | None = None  # its rectangle, offset
        self.frames = self.written_until = 0  # frames added; those whose time is in the file

    def add(self, frame: np.ndarray) -> None:
        """Add one ``(height, width, 3)`` uint8 frame."""
        rgb = frame.astype(np.uint32)
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        if self.shown is None:  # the screen's size, no global palette, and loop forever
            height, width = packed.shape
            self.file.write(b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0))
            self.file.write(b"!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00")
        changed = packed != self.shown if self.shown is not None else np.ones(packed.shape, bool)
        if changed.any():
            self._flush()
            rows, cols = np.flatnonzero(changed.any(1)), np.flatnonzero(changed.any(0))
            box = packed[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
            colours, inverse = np.unique(box, return_inverse=True)  # its palette
            if len(colours) > 256:
                raise ValueError("a GIF frame can hold at most 256 colours")
            image = Image.fromarray(inverse.reshape(box.shape).astype(np.uint8))
            image.putpalette((colours[:, None] >> [16, 8, 0]).astype(np.uint8).tobytes())
            self.pending = (image, (int(cols[0]), int(rows[0])))
        self.shown = packed
        self.frames += 1

    def close(self) -> None:
        """Write the last frame and the trailer; the file stays open."""
        if self.shown is None:
            raise ValueError("a GIF needs at least one frame")
        self._flush()
        self.file.write(b";")

    def _flush(self) -> None:
        """Write the pending rectangle, shown until now; times are rounded without drift."""
        if self.pending is None:
            return
        image, offset = self.pending
        per_frame = 100 * self.frame_seconds  # centiseconds
        duration = 10 * (round(per_frame * self.frames) - round(per_frame * self.written_until))
        # disposal 1: leave the frame in place, so the next rectangle draws over it
        params = {"duration": duration, "disposal": 1, "include_color_table": True}
        for chunk in GifImagePlugin.getdata(image, offset, **params):
            self.file.write(chunk)
        self.written_until, self.pending = self.frames, None
