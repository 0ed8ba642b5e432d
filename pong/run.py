"""A run's life, with one owner: its directory, checkpoint and metrics, and how it stops.

``Run.start`` makes a new run, ``Run.resume`` continues a saved one with its
own settings. ``Run.record`` writes each finished update's metrics and, every
``checkpoint_every`` updates, its checkpoint; ``Run.close`` saves whatever the
last checkpoint lacks. ``signals_stop`` makes SIGTERM stop a run the way
Ctrl-C does.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pong.checkpoint import FILENAME, Checkpoint, CheckpointError, load, save
from pong.config import Config, fresh_seed
from pong.errors import UsageError
from pong.metrics import MetricsLog
from pong.train import Trainer, Update

__all__ = ["Run", "signals_stop"]


class Run:
    """A run directory and what is written into it; use ``start`` or ``resume``."""

    def __init__(
        self, directory: Path, config: Config, saved: Checkpoint | None, checkpoint_every: int
    ) -> None:
        self.directory = directory
        self.config = config
        self.saved = saved  # the checkpoint this run resumes from (None: a new run)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_path = directory / FILENAME
        self.metrics: MetricsLog | None = None
        self.saved_at = saved.iteration if saved else 0  # the update the checkpoint holds

    @classmethod
    def start(cls, directory: Path | None, config: Config, checkpoint_every: int) -> Run:
        """A new run in ``directory`` (default ``runs/<start time>``); a random seed if none."""
        directory = directory or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        if (directory / FILENAME).exists():
            raise UsageError(
                f"{directory} already holds a run; continue it with --resume {directory}"
                " or choose another --run-dir"
            )
        if config.seed is None:
            config = dataclasses.replace(config, seed=fresh_seed())
        return cls(directory, config, None, checkpoint_every)

    @classmethod
    def resume(cls, path: Path, flags: dict[str, Any], checkpoint_every: int) -> Run:
        """The run saved in ``path`` (its checkpoint or its directory), with its settings.

        Raises:
            UsageError: the checkpoint cannot be used, or a flag in ``flags``
                (settings given on the command line) contradicts its settings.
        """
        try:
            saved = load(path)
        except CheckpointError as e:
            raise UsageError(f"--resume: {e}") from None
        for name, given in flags.items():
            if given != getattr(saved.config, name):
                raise UsageError(
                    f"--{name.replace('_', '-')}={given} differs from the resumed run's"
                    f" {getattr(saved.config, name)}; a resumed run keeps its settings"
                )
        directory = path if path.is_dir() else path.parent
        return cls(directory, saved.config, saved, checkpoint_every)

    def open(self) -> None:
        """Make the directory and open the metrics (dropping rows the checkpoint lacks)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.metrics = MetricsLog(
            self.directory, after=self.saved.iteration if self.saved else None
        )

    def record(self, update: Update, trainer: Trainer) -> None:
        """The metrics of the update ``trainer`` just made; its checkpoint when one is due."""
        self.metrics.record(update, trainer)
        if trainer.iteration % self.checkpoint_every == 0:
            self.save(trainer)

    def save(self, trainer: Trainer) -> None:
        save(self.checkpoint_path, trainer.checkpoint())
        self.saved_at = trainer.iteration

    def close(self, trainer: Trainer | None) -> None:
        """Close the metrics and save the updates the last checkpoint lacks."""
        if self.metrics is not None:
            self.metrics.close()
        if trainer is not None and trainer.iteration > self.saved_at:
            self.save(trainer)


@contextmanager
def signals_stop() -> Iterator[list[signal.Signals]]:
    """The first SIGINT or SIGTERM raises ``KeyboardInterrupt``; yields the signals received.

    Later ones are only counted, so that an impatient second Ctrl-C cannot cut
    short the final checkpoint or Ray's shutdown. Installed explicitly: a
    shell starts background jobs with SIGINT ignored. The previous handlers
    come back on exit.
    """
    received: list[signal.Signals] = []

    def interrupt(signum: int, frame: object) -> None:
        received.append(signal.Signals(signum))
        if len(received) == 1:
            # KeyboardInterrupt, not an exception of our own: Ray's blocking calls
            # turn anything else raised by a signal handler into a SystemError.
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
