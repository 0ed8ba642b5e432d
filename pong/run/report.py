"""What the driver prints: where a run trains, a line per update, and its last line (or the
one line of an error or a stop), which ends with the command that continues the run."""

from __future__ import annotations

import json
import os
import sys

import ray

from pong.core.state import State
from pong.core.train import Trainer, Update
from pong.run.cluster import joined
from pong.run.config import Options
from pong.run.directory import JOB_CONFIG, Run, in_ray_job
from pong.run.errors import UsageError, first_line, pasteable, printable, say_error, shell_word

__all__ = ["announce", "batch_line", "failed", "farewell", "started"]


def reached(running_mean: float | None, until_mean: float | None) -> bool:
    """Whether ``--until-mean`` stops the run at this running mean."""
    return until_mean is not None and running_mean is not None and running_mean > until_mean


def announce(run: Run, options: Options, where: str) -> None:
    config, updates = run.config, options.updates
    stops = [f"{updates} update{'s' * (updates != 1)}"] if updates else []
    if options.until_mean is not None:
        stops.append(f"until the running mean is above {options.until_mean:g}")
    until = " or ".join(stops) or ("until `ray job stop`" if in_ray_job() else "until Ctrl-C")
    if run.start_from is not None:
        path, source = run.start_from
        mean = "-" if source.running_mean is None else f"{source.running_mean:.2f}"
        print(
            f"Starting a new run from the weights of {printable(path)} (update"
            f" {source.updates} of its run, running mean {mean}), with a fresh RMSProp cache"
        )
    resumed = f"; resuming after update {run.saved.updates}" if run.saved else ""
    if run.metrics is not None and (dropped := run.metrics.dropped_to) is not None:
        resumed += (
            f" (the rows of updates {run.saved.updates + 1} to {dropped}, which it stopped before"
            " saving, were dropped: those games are played again, the same)"
        )
    print(
        f"Running on {where}: batch size {config.batch_size}, env {config.env},"
        f" seed {config.seed}, learning rate {config.learning_rate:g}, {until}\n"
        f"Run directory: {printable(run.directory)} (checkpoint every {run.checkpoint_every}"
        f" updates and {run.checkpoint_seconds:g} s, metrics in updates.csv, games.csv and"
        f" TensorBoard event files){resumed}",
        flush=True,
    )


def started(trainer: Trainer) -> str:
    """How many of the workers asked for started, and where."""
    dealer = trainer.dealer
    placed, asked, waiting = dealer.up_by_node(), len(dealer.workers), dealer.waiting()
    line = f"Started {sum(placed.values())} of {asked} RolloutWorker actor{'s' * (asked != 1)}"
    if placed:
        nodes, where = len(placed), ", ".join(f"{n} on {node}" for node, n in placed.items())
        line += f" (one CPU each) on {nodes} node{'s' * (nodes != 1)} ({where})"
    if waiting:
        them = "it" if waiting == 1 else "them"
        if ray.available_resources().get("CPU", 0) >= 1:  # placed, and still starting
            why = f"{'is' if waiting == 1 else 'are'} still starting (a runtime_env, say)"
        else:
            why = f"wait{'s' * (waiting == 1)} for a free CPU (on a node that joins, say)"
        line += f"; {waiting} {why} and will play once Ray has {them} up"
    return f"{line}; each plays the update's next game as it finishes one"


def batch_line(update: Update, trainer: Trainer) -> str:
    """The line people grep for: keep its words as they are."""
    return (
        f"Batch {update.number} computed {update.games} rollouts ({update.steps} steps) in"
        f" {update.seconds:.2f} seconds ({update.steps_per_second:.0f} steps/s), running mean is"
        f" {trainer.running_mean:.2f}"
    )


def farewell(
    run: Run, trainer: Trainer | None, first: int, address=None, until_mean=None,
    script="driver.py", updates: int | None = None,
) -> str:  # fmt: skip
    """The last line: what the run did (``trainer``'s counts; ``None``, stopped before the
    workers were up: the checkpoint's, or none) and, once saved, how to continue it (on the
    cluster at ``address``, with ``script``, to ``until_mean``, for what is left of
    ``updates``)."""
    trainer = trainer or run.saved or State({}, {}, 0, 0, 0, None, None)
    n, best = trainer.updates, trainer.best_running_mean
    line = f"Done: {n} update{'s' * (n != 1)} ({n - first} in this run), {trainer.games} games"
    line += "" if best is None else f", best running mean {best:.2f}"
    checkpoint = printable(run.checkpoint_path)
    if reached(trainer.running_mean, until_mean):
        return f"{line}; the running mean is above {until_mean:g}; checkpoint: {checkpoint}"
    goal = "" if until_mean is None else f" --until-mean={until_mean:g}"  # the same goal again
    if updates and (left := updates - (n - first)) > 0:  # stopped early: the rest of them
        goal = f" --updates={left}{goal}"
    if not run.kept:
        return f"{line}; no update finished, so nothing was saved"
    cluster = joined(address) if ray.is_initialized() else address  # the same cluster again
    if in_ray_job():  # submitted as a job: continue it as one, with the same packages
        job = json.loads(os.environ[JOB_CONFIG]).get("runtime_env") or {}
        pip = " --runtime-env runtime_env.yaml" if "pip" in job else ""
        again = (  # pasted where the job was submitted from: the README's venv has ray
            f".venv/bin/ray job submit --address {cluster} --working-dir .{pip} -- python driver.py"
        )
        directory = shell_word(str(run.directory))  # absolute: no leading -
    else:
        where = f" --address={shell_word(cluster)}" if cluster else ""
        again = f"{pasteable(sys.executable)} {pasteable(script)}{where}"
        directory = pasteable(run.directory)
    return f"{line}; checkpoint: {checkpoint} (continue with: {again} --resume {directory}{goal})"


def failed(prog: str, error: Exception, run: Run | None) -> int:
    """Say ``error`` in one line, with what the run kept if training failed; the exit code."""
    line = str(error)
    if isinstance(error, ray.exceptions.RayError):  # its own processes died under the run
        line = f"Ray failed under the run: {type(error).__name__}: {first_line(error)}"
    if run is not None and run.training and not isinstance(error, UsageError):
        if run.kept:
            where, at = printable(run.checkpoint_path), run.saved_at
            if run.recorded == at:
                line += f"; the last finished update ({at}) is saved in {where}"
            else:  # the save was due after rows that could not be written, or failed itself
                line += f"; the checkpoint of update {at} in {where} is kept"
        elif "no checkpoint was saved" not in line:  # a failed first save says so itself
            line += "; no update had finished, so nothing was saved"
    say_error(prog, line)
    return getattr(error, "exit_code", 1)
