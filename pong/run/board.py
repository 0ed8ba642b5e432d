"""TensorBoard event files beside the CSVs: ``tensorboard --logdir runs`` shows every run.

CleanRL's tags, against env steps: ``charts/episodic_return`` and ``charts/episodic_length``
per game; ``charts/SPS``, ``charts/running_mean`` and ``charts/update_seconds`` per update.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tensorboardX.proto.event_pb2 import Event, SessionLog
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.record_writer import masked_crc32c
from tensorboardX.summary import scalar

from pong.run.files import Directory, create_new

if TYPE_CHECKING:
    from pong.core.train import Trainer, Update

__all__ = ["EVENTS", "Board"]

EVENTS = "events.out.tfevents."  # how an event file's name starts, as TensorBoard's own


class Board:
    """Each update's scalars into a new event file in ``run_dir``; a resumed run's starts with
    TensorBoard's restart marker, which hides what a killed run wrote past its checkpoint."""

    def __init__(self, run_dir: Directory | Path, resumed_at_step: int | None = None) -> None:
        # Nanoseconds last: a quick resume's file is new, and sorts after (read in order)
        name = f"{EVENTS}{int(time.time())}.{socket.gethostname()}.{time.time_ns()}"
        new = isinstance(run_dir, Directory)  # a new file, never through a planted link
        self._file = run_dir.create(name) if new else create_new(run_dir / name)
        self._write(Event(file_version="brain.Event:2"))
        if resumed_at_step is not None:
            restart = SessionLog(status=SessionLog.START)
            self._write(Event(step=resumed_at_step + 1, session_log=restart))

    def record(self, update: Update, trainer: Trainer) -> None:
        step = trainer.steps - update.steps
        for score, steps in zip(update.scores, update.game_steps, strict=True):  # CleanRL's tags
            step += steps
            self._scalar("charts/episodic_return", score, step)
            self._scalar("charts/episodic_length", steps, step)
        self._scalar("charts/SPS", update.steps_per_second, trainer.steps)
        self._scalar("charts/running_mean", trainer.running_mean, trainer.steps)
        self._scalar("charts/update_seconds", update.seconds, trainer.steps)
        self._file.flush()
        os.fsync(self._file.fileno())

    def image(self, tag: str, encoded: bytes, shape: tuple[int, int], step: int) -> None:
        """A PNG or GIF (animated in TensorBoard) of ``shape`` (height, width)."""
        image = Summary.Image(height=shape[0], width=shape[1], colorspace=1)  # RGB
        image.encoded_image_string = encoded
        self._write(Event(step=step, summary=Summary(value=[Summary.Value(tag=tag, image=image)])))
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        self._write(Event(step=step, summary=scalar(tag, float(value))))

    def _write(self, event: Event) -> None:
        """One record of TensorBoard's format: length, its CRC, the event, its CRC."""
        event.wall_time = time.time()
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crcs = struct.pack("<I", masked_crc32c(header)), struct.pack("<I", masked_crc32c(data))
        self._file.write(header + crcs[0] + data + crcs[1])
