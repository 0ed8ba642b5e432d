"""TensorBoard event files beside the CSVs: ``tensorboard --logdir runs`` shows every run.

CleanRL's tags over its x axis (env steps so far): ``charts/episodic_return`` and
``charts/episodic_length`` per game, ``charts/SPS``, ``charts/running_reward`` and
``charts/update_seconds`` per update, each update's written and flushed in this thread (a
full disk is an ``OSError`` here like any file's). The CSVs stay the run's record.
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

EVENTS = "events.out.tfevents."  # the start of an event file's name, as TensorBoard's own


class Board:
    """Writes one update's scalars at a time into an event file in ``run_dir``; a resumed
    run's (``resumed_at_step``) starts with TensorBoard's restart marker at the step after its
    checkpoint, which hides what a killed run wrote past it."""

    def __init__(self, run_dir: Directory | Path, resumed_at_step: int | None = None) -> None:
        # The name holds the second it was made, as tensorboardX's; nanoseconds keep a quick
        # resume's name new and, sorted, after the one before (TensorBoard reads them in order).
        name = f"{EVENTS}{int(time.time())}.{socket.gethostname()}.{time.time_ns()}"
        new = isinstance(run_dir, Directory)  # a new file, never through a planted link
        self._file = run_dir.create(name) if new else create_new(run_dir / name)
        self._write(Event(file_version="brain.Event:2"))
        if resumed_at_step is not None:
            restart = SessionLog(status=SessionLog.START)
            self._write(Event(step=resumed_at_step + 1, session_log=restart))

    def record(self, update: Update, trainer: Trainer) -> None:
        """The scalars of the update ``trainer`` just made, flushed."""
        step = trainer.steps - update.steps
        for reward, length in zip(update.scores, update.lengths, strict=True):
            step += length
            self._scalar("charts/episodic_return", reward, step)
            self._scalar("charts/episodic_length", length, step)
        self._scalar("charts/SPS", update.steps_per_second, trainer.steps)
        self._scalar("charts/running_reward", trainer.running_reward, trainer.steps)
        self._scalar("charts/update_seconds", update.seconds, trainer.steps)
        self._file.flush()
        os.fsync(self._file.fileno())

    def image(self, tag: str, encoded: bytes, shape: tuple[int, int], step: int) -> None:
        """A PNG or GIF (TensorBoard animates a GIF) of ``shape`` (height, width), flushed."""
        image = Summary.Image(height=shape[0], width=shape[1], colorspace=1)  # RGB
        image.encoded_image_string = encoded
        self._write(Event(step=step, summary=Summary(value=[Summary.Value(tag=tag, image=image)])))
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        self._write(Event(step=step, summary=scalar(tag, float(value))))

    def _write(self, event: Event) -> None:
        """One record of TensorBoard's file format: length, its CRC, the event, its CRC."""
        event.wall_time = time.time()
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crcs = struct.pack("<I", masked_crc32c(header)), struct.pack("<I", masked_crc32c(data))
        self._file.write(header + crcs[0] + data + crcs[1])
