"""The training loop, one for ``driver.py`` and for each trial of a sweep: start the
workers, then play updates and apply RMSProp after each until the options stop it, one line
each; whatever ends it (a stop, Ray failing under it, an error), the last finished update is
saved."""

from __future__ import annotations

import sys
from collections.abc import Callable

from pong.core.train import Trainer, Update
from pong.run.cluster import ClusterError
from pong.run.config import Options, hyperparameters
from pong.run.directory import Run
from pong.run.report import batch_line, farewell, reached, started
from pong.run.stops import Stops
from pong.tools import snapshot

__all__ = ["train"]


def train(
    run: Run, options: Options, stops: Stops, address: str | None = None,
    script: str = "driver.py", after: Callable[[Update, Trainer], None] | None = None,
    placement: dict | None = None,
) -> None:  # fmt: skip
    """Train ``run`` for ``options.updates`` updates more (or forever, or until its
    running mean passes ``options.until_mean``); ``after`` is called with each update once it
    is recorded (a sweep's trial reports it to Tune there). ``script`` continues the run.
    ``placement``: the workers' Ray options (None: the trainer's, SPREAD over the nodes)."""
    trainer, first, updates = None, run.saved_at, options.updates
    run.training = True  # an error from here on says what the run kept
    try:
        trainer = Trainer(
            **hyperparameters(run.config), state=run.initial, workers=options.workers,
            placement=placement, say=lambda line: print(line, flush=True),
            wait_for_workers=options.wait_for_workers,
        )  # fmt: skip
        print(started(trainer), flush=True)
        while (updates is None or trainer.updates - first < updates) and not reached(
            trainer.running_mean, options.until_mean
        ):
            try:
                update = trainer.play()  # a stop or a failure here loses only this update's games
            except OSError as e:  # Ray's own connection broke (its raylet, or a node, is gone)
                raise ClusterError(f"lost contact with Ray ({e.strerror or e})") from None
            with stops.held():  # applied, counted, recorded and printed, or none of these
                trainer.rmsprop(update)
                run.record(update, trainer)
                for note in update.notes:
                    print(note, flush=True)
                print(batch_line(update, trainer), flush=True)
            if run.watch_due(trainer.updates):
                shot = snapshot.take(trainer.model, run.config.env, seed=trainer.updates)
                warning = run.watch(shot, trainer)
                if warning:
                    print(warning, flush=True)
            if after is not None:
                after(update, trainer)
    finally:
        stops.ending = True  # the last save: a stop from here on is only counted
        run.close(trainer)
        error = sys.exc_info()[0]
        if trainer is not None or error in (KeyboardInterrupt, BrokenPipeError):  # a stop
            done = farewell(run, trainer, first, address, options.until_mean, script, updates)
            stops.last_line = done  # a stop prints it last, after Ray's lines; a closed output
            if error is not KeyboardInterrupt and (error is None or run.kept):  # on stderr
                print(done, flush=True)  # (a failure that kept nothing: its line says so)
