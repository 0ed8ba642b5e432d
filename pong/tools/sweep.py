"""Seeds and settings swept on Ray Tune: ``python -m pong.sweep --seeds 1 2 --iterations 100``.

Each setting of the grid (batch size x learning rate x decay rate x seed) is one Tune trial,
and each trial is a run: ``DIR/<name>/`` holds what ``driver.py --run-dir DIR/<name>`` with
those settings would write, byte for byte, and ``driver.py --resume DIR/<name>`` continues it
alone. Tune keeps its own state in ``DIR/.tune`` (hidden, so ``DIR/*`` is the runs), with
no second copy of a run: a trial resumes from its run's checkpoint. ``DIR/summary.csv`` has
one row per setting, over its seeds.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pong.run.config import Config, Options, add_flags
from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser, first_line

__all__ = ["main", "trial_name"]

PROG = "python -m pong.sweep"
TUNE_DIR = ".tune"  # Tune's experiment state, beside the runs
SUMMARY = "summary.csv"
MAX_TRIALS = 1000
SWEPT = ("batch_size", "learning_rate", "decay_rate", "seed")  # flags that take several values
# The driver's flags a trial takes as they are.
PASSED = ("iterations", "address", "workers", "num_cpus", "checkpoint_every")
PASSED += ("checkpoint_seconds", "watch_every")
HELP = {  # where a sweep's default is not the driver's
    "seed": "seeds the weights, env resets and action draws (default: 1)",
    "workers": "RolloutWorker actors per trial, one CPU each (default: as many as let the"
    " trials fill the cluster, at most the batch size)",
    "iterations": "updates each trial runs (default: until Ctrl-C)",
}


def trial_name(config: Config) -> str:
    """A trial's directory name, from its settings: the same in every sweep."""
    return (
        f"batch{config.batch_size}-lr{config.learning_rate:g}-decay{config.decay_rate:g}"
        f"-seed{config.seed}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog=PROG,
        description="Sweep seeds and settings on Ray Tune; each trial is a driver.py run.",
    )
    grid = parser.add_argument_group("the grid: each of these takes one value or several")
    single = parser.add_argument_group("every trial's settings, as driver.py's")
    for f in dataclasses.fields(Config):
        meta = {k: v for k, v in f.metadata.items() if k != "flags"}
        meta["help"] = HELP.get(f.name, meta.get("help"))
        if f.name in SWEPT:
            flags = ["--seeds", "--seed"] if f.name == "seed" else ["--" + f.name.replace("_", "-")]
            grid.add_argument(*flags, dest=f.name, nargs="+", default=None, **meta)
        else:
            single.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=None, **meta)
    options = argparse.ArgumentParser(add_help=False)
    add_flags(options, Options)
    for action in options._actions:  # the driver's flags that make sense for a trial
        if action.dest in PASSED:
            action.help = HELP.get(action.dest, action.help)
            single._add_action(action)
        elif action.dest == "until_mean":  # the driver's --until-mean, by a sweep's name too
            single.add_argument("--stop-at", "--until-mean", dest="until_mean", type=action.type,
                                metavar="R", help="also end a trial once its running mean is"
                                " above R")  # fmt: skip
    sweep = parser.add_argument_group("the sweep")
    sweep.add_argument(
        "--sweep-dir",
        type=nonempty_path,
        metavar="DIR",
        help="where the trials' runs go (default: runs/sweep- and the start time)",
    )
    sweep.add_argument(
        "--scheduler",
        choices=("fifo", "asha"),
        default="fifo",
        help="asha: stop hopeless trials early on their running mean (Tune's"
        " ASHA; needs --iterations)",
    )
    sweep.add_argument("--resume", type=nonempty_path, metavar="DIR",
                       help="finish the sweep in DIR, each trial from its checkpoint")  # fmt: skip
    args = parser.parse_args(argv)
    if args.resume is not None:
        given = [a for a in (*SWEPT, "env", "sweep_dir") if getattr(args, a) is not None]
        if given:
            parser.error(f"argument --{given[0].replace('_', '-')}: not with --resume")
    elif args.scheduler == "asha" and args.iterations is None:
        parser.error("argument --scheduler asha: needs --iterations, the most a trial runs")
    return args


def grid(args: argparse.Namespace) -> list[Config]:
    """Every combination of the swept values, seeds innermost."""
    defaults = Config()
    values = [getattr(args, n) or [getattr(defaults, n)] for n in SWEPT]
    if args.seed is None:
        values[-1] = [1]  # a sweep is repeatable: seed 1 unless told
    env = args.env or defaults.env
    configs = []
    for combo in itertools.product(*(list(dict.fromkeys(v)) for v in values)):
        configs.append(Config(env=env, **dict(zip(SWEPT, combo, strict=True))))
    return configs


def refuse(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from ray import tune  # noqa: F401
    except ImportError:
        return refuse("Ray Tune is not installed: pip install -e '.[sweep]'")
    if args.resume is not None:
        directory = args.resume
        if not (directory / TUNE_DIR).is_dir():
            return refuse(f"--resume {directory}: no sweep there (no {TUNE_DIR} directory)")
    else:
        configs = grid(args)
        if len(configs) > MAX_TRIALS:
            return refuse(f"the grid has {len(configs):,} trials, more than {MAX_TRIALS:,}")
        directory = args.sweep_dir or Path("runs") / time.strftime("sweep-%Y%m%d-%H%M%S")
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            return refuse(f"--sweep-dir {directory}: not a directory")
        if directory.exists() and any(directory.iterdir()):
            return refuse(
                f"--sweep-dir {directory}: holds files already; choose a new directory, or"
                f" --resume {directory} to finish a sweep there"
            )
    return run_sweep(args, directory.absolute(), None if args.resume else configs)


def _open_run(settings: dict[str, Any], sweep_dir: str):
    """The trial's run, opened: new, or the one in its directory continued (a resumed sweep)."""
    from pong.run.checkpoint import FILENAME
    from pong.run.directory import Run

    config = Config.from_dict(settings["config"])
    directory, every = Path(sweep_dir) / trial_name(config), settings["checkpoint_every"]
    exists = (directory / FILENAME).exists()
    run = Run.resume(directory, {}, every) if exists else Run.start(directory, config, every)
    run.watch_every = settings["watch_every"]
    run.checkpoint_seconds = settings["checkpoint_seconds"]
    run.open()
    return run


def trial(space: dict[str, Any], sweep_dir: str) -> None:
    """One Tune trial: a run in ``sweep_dir/<name>``, trained as ``driver.py`` trains one,
    one ``tune.report`` per update."""
    from ray import tune

    from pong.core.train import Trainer
    from pong.run.config import hyperparameters
    from pong.run.report import reached
    from pong.tools import snapshot

    settings = space["settings"]  # the trial's point of the grid (see ``_settings``)
    iterations, goal = settings["iterations"], settings["until_mean"]
    run, trainer = _open_run(settings, sweep_dir), None
    try:
        trainer = Trainer(
            **hyperparameters(run.config), state=run.initial, workers=settings["workers"]
        )
        while (iterations is None or trainer.iteration < iterations) and not reached(
            trainer.running_reward, goal
        ):
            update = trainer.step()
            run.record(update, trainer)
            if run.watch_due(trainer.iteration):
                shot = snapshot.take(trainer.model, run.config.env, seed=trainer.iteration)
                run.watch(shot, trainer)
            mean = trainer.running_reward
            tune.report(
                {
                    "update": trainer.iteration,
                    "episodes": trainer.episodes,
                    "running_mean": mean if mean is not None else -math.inf,
                    "steps_per_s": update.steps_per_second,
                }
            )
    finally:
        run.close(trainer)  # the last finished update saved, also when Tune stops the trial


def run_sweep(args: argparse.Namespace, directory: Path, configs: list[Config] | None) -> int:
    """Join Ray, run (or restore) the Tune experiment, print and write the summary."""
    # Tune's own per-trial CSV and TensorBoard logs would copy the runs' metrics (its JSON
    # one is kept: its results are read from it), and its progress tables would bury the
    # one line per update printed here.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    import ray
    from ray import tune

    from pong.run.cluster import connect
    from pong.run.errors import PongError

    # Tune's lines on a stop (its own resume hint, trials never started) and a failed trial's
    # traceback: ours say it here, in a line each.
    for name in ("ray.tune.tune", "ray.tune.analysis.experiment_analysis"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("ray.tune.execution.tune_controller").setLevel(logging.CRITICAL)
    try:
        # The sweep prints what each trial reports; what a trial's process prints stays in its
        # log file. Forwarded, Ray's SIGTERM to trials at shutdown showed as a stray traceback.
        connect(args.address, args.num_cpus, log_to_driver=False)
    except PongError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    try:
        if configs is None:
            tuner = tune.Tuner.restore(
                str(directory / TUNE_DIR), trainable=_trainable(directory), resume_unfinished=True
            )
            print(f"Resuming the sweep in {_shown(directory)}", flush=True)
        else:
            tuner = _tuner(args, directory, configs)
        started = time.monotonic()
        return _report(directory, tuner.fit(), time.monotonic() - started)
    finally:
        ray.shutdown()


def _shown(path: Path) -> str:
    from pong.run.errors import printable

    return printable(path)


def _trainable(directory: Path):
    """``trial`` for Tune: the sweep's directory given, its workers' placement group asked for
    (from its settings, so that a restore asks for the same)."""
    from ray import tune

    from pong.core.worker import WORKER_MEMORY

    worker = {"CPU": 1, "memory": WORKER_MEMORY}  # what each RolloutWorker holds
    return tune.with_resources(
        tune.with_parameters(trial, sweep_dir=str(directory)),
        lambda space: tune.PlacementGroupFactory([{}] + [worker] * space["settings"]["workers"]),
    )


def _tuner(args: argparse.Namespace, directory: Path, configs: list[Config]):
    """A new Tune experiment of ``configs``, its state in ``directory/.tune``; says so."""
    import ray
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback

    from pong.run.cluster import cluster_summary

    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    smallest = min(c.batch_size for c in configs)
    workers = args.workers or max(1, min(smallest, cpus // min(len(configs), cpus)))
    at_once = max(1, cpus // workers)
    print(
        f"Sweeping {len(configs)} trial{'s' * (len(configs) != 1)} on"
        f" {cluster_summary(args.address)}: {workers} RolloutWorker{'s' * (workers != 1)}"
        f" each, {at_once} trial{'s' * (at_once != 1)} at once; runs in {_shown(directory)}",
        flush=True,
    )
    return tune.Tuner(
        _trainable(directory),
        param_space={"settings": tune.grid_search([_settings(c, args, workers) for c in configs])},
        tune_config=tune.TuneConfig(
            scheduler=_scheduler(args), trial_name_creator=_name, trial_dirname_creator=_name
        ),
        run_config=tune.RunConfig(
            name=TUNE_DIR,
            storage_path=str(directory),
            verbose=0,
            callbacks=[_lines(), JsonLoggerCallback()],
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    )


def _report(directory: Path, grid, took: float) -> int:
    """The failed trials, the summary (printed and in ``summary.csv``), and the last line:
    done, or the command that finishes the sweep; the exit code."""
    from pong.run.errors import command

    configs, ended = _ended(directory, grid)
    seconds = {_name(r): (r.metrics or {}).get("time_total_s", math.nan) for r in grid if r.config}
    table = summarize(directory, configs, seconds, ended)
    write_summary(directory, table)
    print(f"\n{markdown(table)}\n")
    if unfinished := list(ended.values()).count("unfinished"):  # Ctrl-C: each saved its update
        again = command("--resume", directory, module="pong.sweep")
        print(f"Stopped with {unfinished} trial(s) unfinished; continue with: {again}")
        return 130
    tally = {how: list(ended.values()).count(how) for how in ("failed", "stopped-early")}
    said = ", ".join(f"{n} {how}" for how, n in tally.items() if n)
    said = f" ({said})" if said else ""
    print(f"Done: {len(configs)} trials in {took:.0f} s{said}; {_shown(directory / SUMMARY)}")
    return 1 if tally["failed"] else 0


def _ended(directory: Path, grid) -> tuple[list[Config], dict[str, str]]:
    """Every trial's settings, and how those that did not reach their end ended: failed (said
    here, a line each), unfinished (a Ctrl-C), or stopped early by ASHA. The statuses are
    the experiment state Tune saved (a Ctrl-C leaves its trials unended there; the grid
    returned has only those that started)."""
    from ray.tune import ExperimentAnalysis

    trials = ExperimentAnalysis(str(directory / TUNE_DIR)).trials
    results = {_name(r): r for r in grid if r.config}
    configs, ended = [], {}
    for t in trials:
        configs.append(Config.from_dict(t.config["settings"]["config"]))
        name, result = trial_name(configs[-1]), results.get(_name(t))
        if result is not None and result.error:  # the others went on
            why = first_line(getattr(result.error, "cause", None) or result.error)
            print(f"note: trial {name} failed: {why}", flush=True)  # Ray's wrapping off
            ended[name] = "failed"
        elif t.status not in ("TERMINATED", "ERROR"):
            ended[name] = "unfinished"
        elif result is None or not _done(result.metrics or {}, t.config):
            ended[name] = "stopped-early"
    return configs, ended


def _done(metrics: dict[str, Any], space: dict[str, Any]) -> bool:
    """Whether a trial reached its end: its updates, or its running-mean goal."""
    iterations, goal = space["settings"]["iterations"], space["settings"]["until_mean"]
    update, mean = metrics.get("update", 0), metrics.get("running_mean", -math.inf)
    return (iterations is not None and update >= iterations) or (goal is not None and mean > goal)


def _settings(config: Config, args: argparse.Namespace, workers: int) -> dict[str, Any]:
    """What a trial needs to train its run, all in Tune's param space (kept for a restore)."""
    return {
        "config": dataclasses.asdict(config),
        "iterations": args.iterations,
        "until_mean": args.until_mean,
        "workers": workers,
        "checkpoint_every": args.checkpoint_every or 10,
        "checkpoint_seconds": args.checkpoint_seconds or 60.0,
        "watch_every": 100 if args.watch_every is None else args.watch_every,
    }


def _name(t) -> str:
    """A Tune trial's (or result's) name, from its settings."""
    return trial_name(Config.from_dict(t.config["settings"]["config"]))


def _scheduler(args: argparse.Namespace):
    """Tune's ASHA on the running mean, or none (every trial to its end)."""
    if args.scheduler != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr="update", metric="running_mean", mode="max", max_t=args.iterations,
        grace_period=max(1, args.iterations // 10),
    )  # fmt: skip


def markdown(table: list[dict[str, Any]]) -> str:
    header = list(table[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(row[k]) for k in header) + " |" for row in table]
    return "\n".join(lines)


def _lines():
    """A Tune callback that prints one line per trial update, as the driver's Batch lines,
    instead of Tune's tables."""
    from ray.tune import Callback

    class Lines(Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            mean = result.get("running_mean", -math.inf)
            shown = "-" if mean == -math.inf else f"{mean:.2f}"
            print(
                f"{_name(trial)}: update {result.get('update')}, running mean {shown},"
                f" {result.get('steps_per_s', 0):,.0f} steps/s",
                flush=True,
            )

    return Lines()


def summarize(
    directory: Path, configs: list[Config], seconds: dict[str, float], ended: dict[str, str]
) -> list[dict]:
    """One row per setting over its seeds, from each trial's ``updates.csv``; ``ended`` says
    how the trials that did not reach their end ended (by name)."""
    from pong.run.metrics import rows

    by_setting: dict[tuple, list[Config]] = {}
    for c in configs:
        by_setting.setdefault((c.batch_size, c.learning_rate, c.decay_rate), []).append(c)
    table = []
    for (batch, lr, decay), trials in sorted(by_setting.items()):  # the same after a restore
        trials.sort(key=lambda c: c.seed)
        finals, to_zero, took = [], [], []
        for c in trials:
            name = trial_name(c)
            path = directory / name / "updates.csv"
            updates = list(rows(path)) if path.is_file() else []
            if updates:
                finals.append(float(updates[-1]["running_reward"]))
            reached = [int(u["episodes"]) for u in updates if float(u["running_reward"]) > 0]
            to_zero.append(str(reached[0]) if reached else "-")
            took.append(seconds.get(name, math.nan))
        table.append(
            {
                "batch_size": batch,
                "learning_rate": f"{lr:g}",
                "decay_rate": f"{decay:g}",
                "seeds": " ".join(str(c.seed) for c in trials),
                "final_running_mean": f"{statistics.fmean(finals):.2f}" if finals else "-",
                "spread": f"{statistics.pstdev(finals):.2f}" if finals else "-",
                "games_to_running_mean_0": " ".join(to_zero),
                "seconds": "-" if math.isnan(sum(took)) else f"{statistics.fmean(took):.0f}",
                "ended": " ".join(ended.get(trial_name(c), "done") for c in trials),
            }
        )
    return table


def write_summary(directory: Path, table: list[dict[str, Any]]) -> None:
    """``DIR/summary.csv``, written whole and renamed in (never through a planted link)."""
    partial = directory / f".{SUMMARY}.{os.getpid()}"
    with open(partial, "x", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    os.replace(partial, directory / SUMMARY)
