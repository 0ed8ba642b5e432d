"""Seeds and settings swept on Ray Tune: ``python -m pong sweep --seeds 1 2 --iterations 100``.

Each setting of the grid (batch size x learning rate x decay rate x seed) is one Tune trial,
and each trial is a run: it trains in a directory of its own node, as ``driver.py --run-dir``
would, and reports every update to Tune with that directory as its checkpoint, which Tune
copies to the sweep's storage (``pong.run.storage``): a local directory, or a URI such as
``s3://bucket/prefix`` that every node reaches. ``DIR/sweep.json`` says what the sweep is; a
resume builds the same Tuner again from it, each trial continuing from its own checkpoint.
Nothing in ``DIR`` is ever unpickled: Tune's own state files there are written, never read.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import itertools
import json
import math
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pong.run.checkpoint import unique
from pong.run.config import Config, Options, add_flags
from pong.run.config import path as nonempty_path
from pong.run.errors import (
    OneLineParser,
    UsageError,
    command,
    first_line,
    pasteable,
    printable,
    shell_word,
)
from pong.run.metrics import UPDATES, MetricsFileError, _WholeLines, rows
from pong.run.stops import STOPS, Stops
from pong.run.storage import Storage, StorageError, is_uri

__all__ = ["main", "trial_name"]

PROG = "python -m pong sweep"
DEFINITION = "sweep.json"  # what the sweep is and how its trials ended: plain, checked JSON
FORMAT = "pong-sweep/1"
SUMMARY = "summary.csv"
LOCK = ".lock"  # a local sweep directory's owner holds an OS lock on it
OWNER = "owner.json"  # a URI's owner says so in a file (an object store has no lock)
MAX_TRIALS = 1000
MAX_DEFINITION = 4 * 2**20  # bytes of sweep.json: 1,000 trials take about 200 KB
MAX_METRICS = 256 * 2**20  # bytes of a remote updates.csv read for the summary
SWEPT = ("batch_size", "learning_rate", "decay_rate", "seed")  # flags that take several values
# The driver's flags a trial takes as they are, stored in sweep.json. (Not the checkpoint
# flags: a trial's checkpoint is saved, and reaches the storage, after every update.)
PASSED = ("iterations", "until_mean", "workers", "watch_every")
RESUMABLE = ("address", "num_cpus")  # flags a resume takes: where, not what
HELP = {  # where a sweep's meaning or default is not the driver's
    "seed": "seeds the weights, env resets and action draws (default: 1)",
    "workers": "RolloutWorker actors per trial, one CPU each (default: as many as let the"
    " trials fill the cluster, at most the batch size)",
    "iterations": "updates each trial runs in all, counted from its start, also after a"
    " --resume (driver.py's --iterations counts from where it resumes; default: until Ctrl-C)",
}
ENDED = ("done", "failed", "stopped-early")  # how a trial that will not run again ended


def trial_name(config: Config) -> str:
    """A trial's directory name, from its settings at full precision (``repr``): distinct
    settings always get distinct names, the same in every sweep."""
    return (
        f"batch{config.batch_size}-lr{config.learning_rate!r}-decay{config.decay_rate!r}"
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
        if action.dest in PASSED + RESUMABLE and action.dest != "until_mean":
            action.help = HELP.get(action.dest, action.help)
            single._add_action(action)
        elif action.dest == "until_mean":  # the driver's --until-mean, by a sweep's name too
            single.add_argument("--stop-at", "--until-mean", dest="until_mean", type=action.type,
                                metavar="R", help="also end a trial once its running mean is"
                                " above R")  # fmt: skip
    _sweep_flags(parser.add_argument_group("the sweep"))
    args = parser.parse_args(argv)
    chosen = [a for a in ("resume", "download") if getattr(args, a) is not None]
    if chosen:
        allowed = RESUMABLE if chosen[0] == "resume" else ()
        names = (*SWEPT, "env", *PASSED, "sweep_dir", "scheduler", "download", *RESUMABLE)
        given = [a for a in names if getattr(args, a) is not None and a not in allowed]
        given = [a for a in given if a != chosen[0]]
        if given:
            parser.error(
                f"argument --{given[0].replace('_', '-')}: not with --{chosen[0]}"
                + (", which keeps the sweep's own settings" if chosen[0] == "resume" else "")
            )
    elif args.scheduler == "asha" and args.iterations is None:
        parser.error("argument --scheduler asha: needs --iterations, the most a trial runs")
    return args


def _sweep_flags(sweep: argparse._ArgumentGroup) -> None:
    """The flags of the sweep itself: where it goes, its scheduler, resuming, copying down."""
    sweep.add_argument(
        "--sweep-dir", type=where, metavar="DIR",
        help="where the sweep keeps its trials: a new directory every node sees (one machine,"
        " or a shared filesystem), or a URI such as s3://bucket/prefix (default: runs/sweep-"
        " and the start time)",
    )  # fmt: skip
    sweep.add_argument(
        "--scheduler", choices=("fifo", "asha"), default=None,
        help="asha: stop hopeless trials early on their running mean (Tune's ASHA; needs"
        " --iterations; default: fifo, every trial to its end)",
    )  # fmt: skip
    sweep.add_argument("--resume", type=where, metavar="DIR",
                       help="finish the sweep in DIR, each trial from its checkpoint")  # fmt: skip
    sweep.add_argument(
        "--download", nargs=2, type=where, metavar=("SWEEP", "DEST"),
        help="copy each trial's run (or one trial's, SWEEP/NAME) into the new directory DEST,"
        " where driver.py --resume DEST/NAME continues it",
    )  # fmt: skip


def where(text: str) -> str | Path:
    """A sweep directory: a URI as its text (a ``Path`` would fold its ``//``), else a path."""
    return text if is_uri(text) else nonempty_path(text)


def grid(args: argparse.Namespace) -> list[Config]:
    """Every combination of the swept values, seeds innermost; the same setting twice is one."""
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


@dataclasses.dataclass
class Sweep:
    """What ``sweep.json`` holds: the grid, every trial's settings, and how trials ended."""

    configs: list[Config]
    settings: dict[str, Any]  # PASSED, and the scheduler
    ended: dict[str, str] = dataclasses.field(default_factory=dict)  # by trial name
    seconds: float = 0.0  # of the sweep's launches, summed over resumes

    def to_json(self) -> bytes:
        body = {"format": FORMAT, "trials": [dataclasses.asdict(c) for c in self.configs]}
        body |= {"settings": self.settings, "ended": self.ended, "seconds": self.seconds}
        return (json.dumps(body, indent=1) + "\n").encode()

    def check(self) -> None:
        """A ``ValueError`` for what no trial could run: an env this program does not play,
        more workers than a trial's batch has games."""
        from pong.envs.make import check_env

        for env in {c.env for c in self.configs}:
            try:
                check_env(env)
            except ValueError as e:
                raise ValueError(f"--env: {e}") from None
        smallest = min(c.batch_size for c in self.configs)
        if (workers := self.settings["workers"]) is not None and workers > smallest:
            raise ValueError(
                f"--workers {workers}: at most the smallest batch size ({smallest}), since each"
                " worker plays one game at a time"
            )

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Sweep:
        """The sweep ``data`` spells, every value checked as its flag is; one-line
        ``UsageError``s naming ``where``."""
        try:
            body = json.loads(data, object_pairs_hook=unique)
            if not isinstance(body, dict) or body.get("format") != FORMAT:
                raise ValueError(f"not a pong sweep (format {str(body.get('format'))[:40]!r})"
                                 if isinstance(body, dict) else "not a pong sweep")  # fmt: skip
            if set(body) != {"format", "trials", "settings", "ended", "seconds"}:
                raise ValueError("expected the keys format, trials, settings, ended, seconds")
            trials = body["trials"]
            if not isinstance(trials, list) or not 0 < len(trials) <= MAX_TRIALS:
                raise ValueError(f"trials: expected a list of 1 to {MAX_TRIALS:,} settings")
            configs = [Config.from_dict(t) for t in trials]
            names = [trial_name(c) for c in configs]
            if len(set(names)) != len(names) or any(c.seed is None for c in configs):
                raise ValueError("trials: each setting once, each with a seed")
            settings = _checked_settings(body["settings"])
            ended = body["ended"]
            if not isinstance(ended, dict) or not all(
                k in names and v in ENDED for k, v in ended.items()
            ):
                raise ValueError(f"ended: expected trial names, each one of {', '.join(ENDED)}")
            seconds = body["seconds"]
            if not isinstance(seconds, (int, float)) or not 0 <= seconds < math.inf:
                raise ValueError("seconds: expected a number of at least 0")
            sweep = cls(configs, settings, ended, float(seconds))
            sweep.check()
        except (ValueError, RecursionError, TypeError, AttributeError) as e:
            raise UsageError(f"{where}: damaged ({first_line(e)})") from None
        return sweep


def _checked_settings(settings: Any) -> dict[str, Any]:
    """sweep.json's settings, each parsed by its flag's own parser (``None``: not given)."""
    fields = {f.name: f for f in dataclasses.fields(Options)}
    if not isinstance(settings, dict) or set(settings) != {*PASSED, "scheduler"}:
        raise ValueError(f"settings: expected {', '.join((*PASSED, 'scheduler'))}")
    for name in PASSED:
        value = settings[name]
        if value is None and name in ("iterations", "until_mean", "workers"):
            continue
        try:
            parsed = fields[name].metadata["type"](str(value))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"settings: {name}: {e}") from None
        if parsed != value or isinstance(value, bool):
            raise ValueError(f"settings: {name}: expected a number, got {value!r}")
    if settings["scheduler"] not in ("fifo", "asha") or (
        settings["scheduler"] == "asha" and settings["iterations"] is None
    ):
        raise ValueError("settings: scheduler: expected fifo, or asha with iterations")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    stops = _STOPS
    stops.install()  # the first stop raises KeyboardInterrupt until Tune runs (see run_sweep)
    try:
        args = parse_args(argv)
        if args.download is not None:
            return download(*args.download)
        try:
            from ray import tune  # noqa: F401
        except ImportError:
            return refuse("Ray Tune is not installed: pip install -e '.[sweep]'")
        where = args.resume if args.resume is not None else args.sweep_dir
        if where is None:
            where = Path("runs") / time.strftime("sweep-%Y%m%d-%H%M%S")
        storage = Storage(where)
        if args.resume is not None:
            sweep = read_definition(storage)
        else:
            sweep = new_sweep(args, storage)
        with owned(storage, creating=args.resume is None):
            return run_sweep(args, storage, sweep, stops)
    except (UsageError, StorageError) as e:
        return refuse(str(e))
    except OSError as e:  # a file of ours the checks could not foresee (no permission, say)
        if e.filename is None:  # the output itself: quiet_when_piped says so
            raise
        return refuse(f"{printable(e.filename)}: {e.strerror or e}")
    except KeyboardInterrupt:
        stop = stops.received[0] if stops.received else signal.SIGINT
        print(f"Interrupted by {stop.name}; no trial had started.", file=sys.stderr, flush=True)
        return 128 + stop.value


def new_sweep(args: argparse.Namespace, storage: Storage) -> Sweep:
    """The sweep the flags ask for, once its directory is known to be free."""
    configs = grid(args)
    if len(configs) > MAX_TRIALS:
        raise UsageError(f"the grid has {len(configs):,} trials, more than {MAX_TRIALS:,}")
    names = [trial_name(c) for c in configs]
    if len(set(names)) != len(names):  # repr tells floats apart; this cannot happen
        raise UsageError("two settings of the grid have one name")
    if not storage.remote:
        directory = Path(storage.root)
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            raise UsageError(f"--sweep-dir {printable(directory)}: not a directory")
        made_in = next(p for p in directory.parents if p.exists() or p.is_symlink())
        if not made_in.is_dir():
            raise UsageError(
                f"--sweep-dir {printable(directory)}: {printable(made_in)} is not a directory"
            )
    if _holds_files(storage):
        raise UsageError(
            f"--sweep-dir {printable(str(storage))}: holds files already; choose a new directory,"
            " or"
            f" --resume {_shown(storage)} to finish a sweep there"
        )
    settings = {name: getattr(args, name) for name in PASSED}
    settings |= {"watch_every": 100 if args.watch_every is None else args.watch_every,
                 "scheduler": args.scheduler or "fifo"}  # fmt: skip
    sweep = Sweep(configs, settings)
    try:
        sweep.check()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return sweep


def _holds_files(storage: Storage) -> bool:
    """Whether the directory holds anything but an owner's lock (a sweep refused at once)."""
    try:
        return bool(set(storage.names()) - {LOCK, OWNER})
    except StorageError as e:
        raise UsageError(f"--sweep-dir {e}") from None


def read_definition(storage: Storage) -> Sweep:
    """The sweep ``--resume DIR`` names, read as hostile."""
    try:
        data = storage.read(DEFINITION, MAX_DEFINITION)
    except FileNotFoundError:
        raise UsageError(
            f"--resume {printable(str(storage))}: no sweep there (no {DEFINITION})"
        ) from None
    return Sweep.from_json(data, storage.name(DEFINITION))


class owned:  # noqa: N801 (a context manager, named as the state it holds)
    """The sweep directory owned by this process while the block runs: a local one by an OS
    lock (as a run directory), a URI by an owner file; a second owner gets one line."""

    def __init__(self, storage: Storage, creating: bool) -> None:
        self.storage, self.creating, self.lock, self.made = storage, creating, None, False

    def __enter__(self) -> owned:
        from pong.run.directory import lock
        from pong.run.files import Directory

        me = f"{PROG} (pid {os.getpid()} on {socket.gethostname()})"  # as lock() writes it
        if self.storage.remote:
            try:
                holder = self.storage.read(OWNER, 4096).decode(errors="replace").strip()
            except FileNotFoundError:
                holder = None
            if holder and holder.split("(pid ")[-1] != f"{os.getpid()} on {socket.gethostname()})":
                raise UsageError(
                    f"{self.storage} is in use by {holder[:200]}; one sweep per directory (if"
                    f" that sweep has ended, delete {self.storage.name(OWNER)})"
                )
            self.storage.write(OWNER, f"{me}\n".encode())
            return self
        directory = Path(self.storage.root)
        self.made = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.opened = Directory.open(directory)
            self.lock = lock(self.opened, PROG, "one sweep per directory")
        except OSError as e:
            raise UsageError(f"--sweep-dir {printable(directory)}: {e.strerror or e}") from None
        if self.creating and _holds_files(self.storage):  # another sweep won the race
            self.__exit__()
            raise UsageError(f"--sweep-dir {self.storage}: holds files already")
        return self

    def __exit__(self, *exc) -> None:
        if self.storage.remote:
            try:
                self.storage.fs.delete_file(self.storage._path(OWNER))
            except OSError:
                pass
            return
        if self.lock is not None:
            self.lock.close()
            self.opened.close()
            self.lock = None


def run_sweep(args: argparse.Namespace, storage: Storage, sweep: Sweep, stops: Stops) -> int:
    """Join Ray, run the trials not yet ended, then print and write the summary."""
    started, given = time.monotonic(), args.address
    # From here a stop is counted, not raised: raised inside Ray's start (an at-fork hook of
    # its logging, say) it showed as a stray traceback. It takes effect before Tune starts,
    # or through Tune's stopper (``Interrupted``) once it runs.
    stops.holding = True
    try:
        from pong.run.cluster import ClusterError, connect, resolve_address

        _quiet_tune()
        try:
            # A trial's own output stays in its log file (Ray's SIGTERM to trials at shutdown
            # showed as a stray traceback when forwarded); the sweep prints what each reports.
            args.address = resolve_address(args.address)  # RAY_ADDRESS too, as driver.py
            connect(args.address, args.num_cpus, log_to_driver=False)
        except ClusterError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # Ray's own SIGTERM handler, as it gave up starting
            stops.install()
            raise
        stops.install()  # ours again, whatever Ray's start left in place
        check_visible(storage)
        storage.write(DEFINITION, sweep.to_json())  # from here on, it can be resumed
        todo = [c for c in sweep.configs if trial_name(c) not in sweep.ended]
        if args.resume is not None:
            print(f"Resuming the sweep in {printable(str(storage))}: {len(todo)} of"
                  f" {len(sweep.configs)}"
                  " trials to finish", flush=True)  # fmt: skip
        if todo and not stops.received:
            from ray.tune import TuneError

            tuner = _tuner(args, storage, sweep, todo)
            try:
                tuner.fit()
            except (OSError, TuneError) as e:  # the storage failed under Tune, say
                print(f"{PROG}: error: Tune stopped: {first_line(e)}", file=sys.stderr)
        stops.ending = True  # the sweep has ended: a stop now is only counted
    except KeyboardInterrupt:  # a stop before Tune started its trials: it ends the same way
        stops.ending = True
    finally:
        stops.ending = True
        if "ray" in sys.modules:  # a no-op when Ray never started
            shut_down(stops)
    return report(storage, sweep, stops, time.monotonic() - started, given)


def _quiet_tune() -> None:
    """Tune as the sweep runs it: no logs of its own, no tables, no signal handler."""
    import logging

    # Tune's own per-trial CSV, JSON and TensorBoard logs would copy the runs' metrics, and
    # its progress tables would bury the one line per update printed here.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # a stop is ours (``Interrupted``)
    # Every update is a checkpoint (so a stop loses none), which Tune warns is often.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    for name in ("ray.tune.tune", "ray.tune.execution.tune_controller",
                 "ray.tune.analysis.experiment_analysis"):  # fmt: skip
        logging.getLogger(name).setLevel(logging.CRITICAL)  # ours say it, in a line each


def shut_down(stops: Stops) -> None:
    """``ray.shutdown()`` with the stop signals held back: Ray puts the default handlers
    back as it ends (a SIGTERM then would kill the sweep before its summary). Ours are put
    in place again, and a signal held back is then counted."""
    import ray

    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        ray.shutdown()
    finally:
        stops.install()
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def check_visible(storage: Storage) -> None:
    """Refuse a local sweep directory that some node of the cluster cannot see (each node
    has its own disk): every trial's checkpoint must reach it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if storage.remote:
        return
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if len(alive) < 2:
        return
    marker = f".visible-{os.getpid()}-{time.time_ns()}"
    Path(storage.root, marker).write_text("")

    @ray.remote(num_cpus=0)
    def sees(path: str) -> bool:
        return os.path.exists(path)

    try:
        on = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in alive]
        path = os.path.join(storage.root, marker)
        seen = ray.get([sees.options(scheduling_strategy=s).remote(path) for s in on], timeout=120)
    finally:
        os.unlink(os.path.join(storage.root, marker))
    blind = [n["NodeManagerAddress"] for n, ok in zip(alive, seen, strict=True) if not ok]
    if blind:
        raise UsageError(
            f"--sweep-dir {printable(str(storage))}: not seen from the"
            f" node{'s' * (len(blind) > 1)} at"
            f" {', '.join(blind)} (each has its own disk); give a directory every node mounts,"
            " or storage they all reach, such as s3://bucket/prefix"
        )


def check_trial_directory(storage: Storage, name: str) -> None:
    """Refuse a trial's directory that is a link or a file (Tune would write through it or
    fail on it), and remove links planted under a checkpoint's name in it."""
    if storage.remote:
        return
    path = Path(storage.root, name)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        what = "a symbolic link" if path.is_symlink() else "not a directory"
        raise UsageError(f"{printable(path)}: {what}; refusing to write through it (move it away)")
    for planted in [n for n in (os.listdir(path) if path.is_dir() else [])
                    if (path / n).is_symlink() and n.startswith("checkpoint_")]:  # fmt: skip
        (path / planted).unlink()
        print(f"note: {printable(path / planted)} was a symbolic link; removed", flush=True)


def _trainable(storage: Storage):
    """``trial`` for Tune: the storage given, its workers' placement group asked for."""
    from ray import tune

    from pong.core.worker import WORKER_MEMORY

    worker = {"CPU": 1, "memory": WORKER_MEMORY}  # what each RolloutWorker holds
    return tune.with_resources(
        tune.with_parameters(trial, where=str(storage)),
        lambda space: tune.PlacementGroupFactory([{}] + [worker] * space["settings"]["workers"]),
    )


def _tuner(args: argparse.Namespace, storage: Storage, sweep: Sweep, todo: list[Config]):
    """A Tune experiment of the trials in ``todo``, each from its checkpoint if it has one,
    into ``storage`` (the experiment's directory); says so."""
    import ray
    from ray import tune

    from pong.run.cluster import cluster_summary

    settings = dict(sweep.settings)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    smallest = min(c.batch_size for c in todo)
    settings["workers"] = workers = settings["workers"] or max(
        1, min(smallest, cpus // min(len(todo), cpus))
    )
    at_once = max(1, cpus // workers)
    print(
        f"Sweeping {len(todo)} trial{'s' * (len(todo) != 1)} on"
        f" {cluster_summary(args.address)}: {workers} RolloutWorker{'s' * (workers != 1)}"
        f" each, {at_once} trial{'s' * (at_once != 1)} at once; storage {printable(str(storage))}",
        flush=True,
    )
    spaces = [settings | {"config": dataclasses.asdict(c)} for c in todo]
    for config in todo:
        check_trial_directory(storage, trial_name(config))
    parent, name = storage.parent_and_name()
    return tune.Tuner(
        _trainable(storage),
        param_space={"settings": tune.grid_search(spaces)},
        tune_config=tune.TuneConfig(
            scheduler=_scheduler(settings), trial_name_creator=_name, trial_dirname_creator=_name
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=parent,
            verbose=0,
            stop=Interrupted(),
            callbacks=[Lines(sweep, storage)],
            failure_config=tune.FailureConfig(max_failures=0),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )


def trial(space: dict[str, Any], where: str) -> None:
    """One Tune trial: a run in a directory of its node, trained by ``driver.py``'s loop,
    each update reported with the run directory as its checkpoint (so a stop or a lost node
    loses no finished update)."""
    from ray import tune

    from pong.run.report import reached
    from pong.run.training import train

    settings = space["settings"]
    config = Config.from_dict(settings["config"])
    local = Path(tempfile.mkdtemp(prefix="pong-trial-")) / trial_name(config)
    storage = Storage(where)
    try:
        run = _trial_run(config, storage, local)
        run.watch_every = settings["watch_every"]
        iterations, goal = settings["iterations"], settings["until_mean"]
        if (iterations is not None and run.saved_at >= iterations) or (
            run.saved and reached(run.saved.running_reward, goal)
        ):  # it ended before the sweep could write so: said again, for the sweep to see
            run.close()
            mean = run.saved.running_reward
            tune.report({"update": run.saved_at, "running_mean": _shown_mean(mean)})
            return
        remaining = None if iterations is None else iterations - run.saved_at
        options = Options(iterations=remaining, until_mean=goal, workers=settings["workers"])
        pruned = False

        def report(update, trainer) -> None:
            tune.report(
                {"update": trainer.iteration, "episodes": trainer.episodes,
                 "running_mean": _shown_mean(trainer.running_reward),
                 "steps_per_s": update.steps_per_second, "seconds": update.seconds},
                checkpoint=tune.Checkpoint.from_directory(str(local)),
            )  # fmt: skip
            nonlocal pruned
            if not pruned:  # the checkpoints before this launch's first are older now
                new = f"{trial_name(config)}/{Path(tune.get_checkpoint().path).name}"
                storage.prune(trial_name(config), keep=new)
                pruned = True

        train(run, options, Stops(), after=report)
    finally:
        shutil.rmtree(local.parent, ignore_errors=True)


def _trial_run(config: Config, storage: Storage, local: Path):
    """The trial's run in ``local``, opened: its latest checkpoint in the storage that can
    be resumed (a damaged one is passed over for the one before it), copied down; a new run
    where it has none. A ``UsageError`` naming the storage's file where none can be."""
    from pong.run.directory import Run

    name, problem = trial_name(config), None
    for _, rel in storage.checkpoints(name):
        try:
            storage.copy_down(rel, local)
            run = Run.resume(local, {}, 1)
            if run.config != config:
                raise UsageError("the checkpoint of another setting")
            run.open()
            return run
        except (UsageError, StorageError, OSError) as e:
            problem = problem or f"{storage.name(rel)}: {str(e).replace(str(local), rel)}"
            print(f"note: {problem}; trying the checkpoint before it", flush=True)  # its log
            shutil.rmtree(local, ignore_errors=True)
    if problem is not None:
        raise UsageError(problem)
    run = Run.start(local, config, 1)  # every update saved: each one is reported
    run.open()
    return run


def _shown_mean(mean: float | None) -> float:
    """A running mean as Tune's schedulers take it (none yet: the lowest)."""
    return -math.inf if mean is None else mean


def Interrupted():  # noqa: N802 (a class, made once Tune is imported)
    """Tune's stopper for a stop signal: Tune ends every trial (each has reported its last
    finished update with its checkpoint) and starts no other."""
    from ray import tune

    class _Interrupted(tune.Stopper):
        def __call__(self, trial_id, result) -> bool:
            return False

        def stop_all(self) -> bool:
            return bool(_STOPS.received)

    return _Interrupted()


_STOPS = Stops()  # the sweep's stop signals: ``main`` installs it, Tune's stopper reads it


def _name(t) -> str:
    """A Tune trial's (or result's) name, from its settings."""
    return trial_name(Config.from_dict(t.config["settings"]["config"]))


def _scheduler(settings: dict[str, Any]):
    """Tune's ASHA on the running mean, or none (every trial to its end)."""
    if settings["scheduler"] != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr="update", metric="running_mean", mode="max", max_t=settings["iterations"],
        grace_period=max(1, settings["iterations"] // 10),
    )  # fmt: skip


def _done(metrics: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Whether a trial reached its end: its updates, or its running-mean goal."""
    iterations, goal = settings["iterations"], settings["until_mean"]
    update, mean = metrics.get("update", 0), metrics.get("running_mean", -math.inf)
    return (iterations is not None and update >= iterations) or (goal is not None and mean > goal)


def Lines(sweep: Sweep, storage: Storage):  # noqa: N802 (a class, made once Tune is imported)
    """A Tune callback: one line per trial update, as the driver's Batch lines, instead of
    Tune's tables; a trial that ends is written into ``sweep.json`` with how it ended."""
    from ray.tune import Callback

    class _Lines(Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            mean = result.get("running_mean", -math.inf)
            shown = "-" if mean == -math.inf else f"{mean:.2f}"
            print(
                f"{_name(trial)}: update {result.get('update')}, running mean {shown},"
                f" {result.get('steps_per_s', 0):,.0f} steps/s",
                flush=True,
            )

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            result = trial.last_result or {}
            if _done(result, trial.config["settings"]):
                self._ended(trial, "done")
            elif not _STOPS.received:  # a stop leaves it unfinished, to resume
                self._ended(trial, "stopped-early")

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            why = _error_of(trial)
            print(f"note: trial {_name(trial)} failed: {why}", flush=True)
            self._ended(trial, "failed")

        def _ended(self, trial, how: str) -> None:
            sweep.ended[_name(trial)] = how
            storage.write(DEFINITION, sweep.to_json())

    return _Lines()


def _error_of(trial) -> str:
    """Why a Tune trial failed: the message of the exception its traceback ends with, from
    the text file Tune wrote here (its error.txt)."""
    try:
        with open(trial.error_file, errors="replace") as f:
            lines = [line.rstrip() for line in f.read(2**20).splitlines() if line.strip()]
    except (OSError, TypeError):
        return "see its log"
    raised = [line for line in lines if not line[0].isspace() and ": " in line]
    return raised[-1].split(": ", 1)[1] if raised else "see its log"


def report(
    storage: Storage, sweep: Sweep, stops: Stops, took: float, address: str | None = None
) -> int:
    """The summary (printed and in ``summary.csv``) and the last line: done, or the command
    that finishes the sweep (on the cluster at ``address``, as given); the exit code."""
    sweep.seconds += took
    storage.write(DEFINITION, sweep.to_json())
    table = summarize(storage, sweep)
    storage.write(SUMMARY, _csv(table))
    print(f"\n{markdown(table)}\n")
    names = [trial_name(c) for c in sweep.configs]
    unfinished = sum(n not in sweep.ended for n in names)
    tally = {how: list(sweep.ended.values()).count(how) for how in ("failed", "stopped-early")}
    said = ", ".join(f"{n} {how}" for how, n in tally.items() if n)
    if unfinished:
        again = command("--resume", module="pong sweep") + f" {_shown(storage)}"
        if address:  # the same cluster again
            again += f" --address={shell_word(address)}"
        stop = stops.received[0] if stops.received else None
        print(f"Stopped with {unfinished} of {len(names)} trials unfinished"
              f"{f' ({said})' if said else ''}; continue with: {again}", flush=True)  # fmt: skip
        return 128 + stop.value if stop else 1
    print(f"Done: {len(names)} trial{'s' * (len(names) != 1)} in {took:.0f} s"
          f"{f' ({said})' if said else ''}; {printable(storage.name(SUMMARY))}")  # fmt: skip
    return 1 if tally["failed"] else 0


def _shown(storage: Storage) -> str:
    """The sweep directory as a command names it: a URI as it is, a path pasteable."""
    return shell_word(str(storage)) if storage.remote else pasteable(storage.root)


def updates_of(storage: Storage, name: str) -> tuple[list[dict[str, str]], str | None]:
    """The rows of trial ``name``'s ``updates.csv`` in its latest checkpoint, and a note
    when they cannot be read (the file is read as hostile)."""
    latest = storage.latest(name)
    if latest is None:
        return [], None
    rel = f"{latest[0]}/{UPDATES}"
    try:
        if not storage.remote:
            return list(rows(Path(storage.root, rel))), None
        data = storage.read(rel, MAX_METRICS)
        lines = _WholeLines(Path(rel), lambda: io.BytesIO(data))
        return [dict(r) for r in lines.rows()], None
    except (MetricsFileError, StorageError, FileNotFoundError) as e:
        return [], f"note: {name}: {first_line(e)}"


def summarize(storage: Storage, sweep: Sweep) -> list[dict[str, str]]:
    """One row per setting over its seeds, every trial of the grid counted (started or not);
    the best setting marked: the highest final running mean, and the fewest games to a
    running mean above 0."""
    by_setting: dict[tuple, list[Config]] = {}
    for c in sweep.configs:
        by_setting.setdefault((c.batch_size, c.learning_rate, c.decay_rate), []).append(c)
    table = []
    for (batch, lr, decay), trials in sorted(by_setting.items()):
        trials.sort(key=lambda c: c.seed)
        finals, to_zero, seconds, ended = [], [], [], []
        for c in trials:
            name = trial_name(c)
            updates, note = updates_of(storage, name)
            if note:
                print(note, flush=True)
            if updates:
                finals.append(float(updates[-1]["running_reward"]))
            reached = [int(u["episodes"]) for u in updates if float(u["running_reward"]) > 0]
            to_zero.append(reached[0] if reached else None)
            seconds.append(sum(float(u["seconds"]) for u in updates))
            ended.append(sweep.ended.get(name, "unfinished" if updates else "not started"))
        table.append({
            "batch_size": str(batch), "learning_rate": repr(lr), "decay_rate": repr(decay),
            "seeds": " ".join(str(c.seed) for c in trials),
            "final_running_mean": f"{statistics.fmean(finals):.2f}" if finals else "-",
            "spread": f"{statistics.pstdev(finals):.2f}" if finals else "-",
            "games_to_running_mean_0": " ".join("-" if n is None else str(n) for n in to_zero),
            "training_seconds": f"{sum(seconds):.0f}",
            "ended": " ".join(ended), "best": "",
            "_final": statistics.fmean(finals) if finals else -math.inf,
            "_zero": max(to_zero) if to_zero and None not in to_zero else math.inf,
        })  # fmt: skip
    _mark_best(table)
    return table


def _mark_best(table: list[dict]) -> None:
    """Mark the best settings: the highest final running mean (over seeds), and the fewest
    games (its slowest seed's) to a running mean above 0."""
    finals = [r for r in table if r["_final"] > -math.inf]
    if finals:
        max(finals, key=lambda r: r["_final"])["best"] = "final"
    zeros = [r for r in table if r["_zero"] < math.inf]
    if zeros:
        row = min(zeros, key=lambda r: r["_zero"])
        row["best"] = " ".join(filter(None, (row["best"], "fastest")))
    for r in table:
        del r["_final"], r["_zero"]
        r["best"] = r["best"] or "-"


def _csv(table: list[dict[str, str]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return out.getvalue().encode()


def markdown(table: list[dict[str, Any]]) -> str:
    header = list(table[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(row[k]) for k in header) + " |" for row in table]
    return "\n".join(lines)


def download(source: str | Path, dest: Path) -> int:
    """``--download``: each trial's latest run (or the one trial's) copied into ``dest``."""
    dest = Path(dest)
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_dir() or any(dest.iterdir())):
        return refuse(f"--download: {printable(dest)}: must be a new or empty directory")
    storage = Storage(source)
    if not storage.remote and dest.absolute().resolve().is_relative_to(
        Path(storage.root).resolve()
    ):
        return refuse(f"--download: {printable(dest)}: inside the sweep it copies")
    try:
        try:
            sweep = read_definition(storage)
            names = [trial_name(c) for c in sweep.configs]
        except UsageError:  # SWEEP/NAME: one trial of a sweep
            parent, name = storage.parent_and_name()
            storage = Storage(parent)
            try:
                sweep = read_definition(storage)
            except UsageError:
                return refuse(f"--download: {printable(str(source))}: not a sweep (no"
                              f" {DEFINITION}), nor a trial of one")  # fmt: skip
            names = [trial_name(c) for c in sweep.configs if trial_name(c) == name]
            if not names:
                return refuse(f"--download: {printable(str(source))}: no trial of that name")
        copied = 0
        for name in names:
            latest = storage.latest(name)
            if latest is not None:
                storage.copy_down(latest[0], dest / name)
                copied += 1
    except (UsageError, StorageError) as e:
        return refuse(f"--download: {e}")
    print(f"Copied {copied} of {len(names)} trial runs into {printable(dest)};"
          f" continue one with: {command('--resume', dest)}/NAME")  # fmt: skip
    return 0
