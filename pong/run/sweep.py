"""Seeds and settings swept on Ray Tune (``python -m pong sweep``): each trial a driver's run,
reported after every update as its checkpoint into the sweep's storage. ``DIR/sweep.json`` is the
only state read back (a resume builds a new Tuner from it): nothing in ``DIR`` is unpickled."""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import itertools
import json
import logging
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from os.path import isdir, isfile, islink, lexists
from pathlib import Path

from pong.run import errors
from pong.run.checkpoint import unique
from pong.run.config import Config, Options, add_flags, stored
from pong.run.config import path as nonempty_path
from pong.run.errors import UsageError, command, first_line, printable, say_error
from pong.run.metrics import UPDATES, MetricsFileError, Summary, summary
from pong.run.stops import STOPS, Stops, interrupted
from pong.run.storage import Storage, StorageError

__all__ = ["main", "runs_of", "trial_name"]

PROG = "python -m pong sweep"
DEFINITION = "sweep.json"  # what the sweep is and how its trials ended: plain, checked JSON
FORMAT = "pong-sweep/1"
SUMMARY = "summary.csv"
LOCK, OWNER = ".lock", "owner.json"  # a local directory's owner locks; a URI has no locks
MAX_TRIALS = 1000
MAX_DEFINITION = 4 * 2**20  # bytes of sweep.json: 1,000 trials take about 200 KB
MAX_METRICS = 256 * 2**20  # bytes of an updates.csv read for the summary
SWEPT = ("batch_size", "learning_rate", "decay_rate", "seed")  # flags that take several values
PASSED = ("updates", "until_mean", "workers", "watch_every")  # the driver's, kept in sweep.json
OLD_PASSED = {"iterations": "updates"}  # sweep.json before the glossary
RESUMABLE = ("address", "num_cpus")  # flags a resume takes: where, not what
HELP = {  # where a sweep's meaning or default is not the driver's
    "seed": "seeds the weights, env resets and action draws (default: 1)",
    "workers": "RolloutWorkers per trial, one CPU each (default: what fills the cluster)",
    "updates": "updates each trial runs in all, also over resumes (default: until Ctrl-C)",
    "until_mean": "also end a trial once its running mean is above SCORE",
}
ENDED = ("done", "failed", "stopped-early")  # how a trial ended (a resume runs failed ones again)
QUIET_TUNE = {  # no logs of Tune's own (they would copy the runs' metrics), no tables
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1", "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",  # each update is one
    "RAY_IGNORE_UNHANDLED_ERRORS": "1",  # a failed sync's traceback: the sweep says it in a line
}  # fmt: skip
_STOPS = Stops()  # the sweep's stop signals: ``main`` installs it, Tune's stopper reads it


def trial_name(config: Config) -> str:
    """A trial's directory name: its settings at full precision (``repr``), never shared."""
    lr, decay = config.learning_rate, config.decay_rate
    return f"batch{config.batch_size}-lr{lr!r}-decay{decay!r}-seed{config.seed}"


def _name(t) -> str:  # a Tune trial's name, from its settings
    return trial_name(Config.from_dict(t.config["settings"]["config"]))


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' * (n != 1)}"


def refuse(message: str) -> int:
    say_error(PROG, message)
    return 2


def _expect(ok: object, message: str) -> None:
    if not ok:
        raise ValueError(message)


def where(text: str) -> str | Path:
    """A sweep directory: a URI as its text (a ``Path`` would fold its ``//``), else a path."""
    return text if "://" in text else nonempty_path(text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    about = "Sweep seeds and settings on Ray Tune; each trial is a driver.py run."
    parser = errors.OneLineParser(prog=PROG, description=about)
    grid = parser.add_argument_group("the grid: each of these takes one value or several")
    single = parser.add_argument_group("every trial's settings, as driver.py's")
    for f in dataclasses.fields(Config):
        meta = {k: v for k, v in f.metadata.items() if k != "flags"} | {"dest": f.name}
        flags = ["--" + f.name.replace("_", "-")] if f.name != "seed" else ["--seeds", "--seed"]
        meta |= {"help": HELP.get(f.name, meta["help"]), "nargs": "+" if f.name in SWEPT else None}
        (grid if f.name in SWEPT else single).add_argument(*flags, **meta)
    options = argparse.ArgumentParser(add_help=False)
    add_flags(options, Options)
    for action in options._actions:  # the driver's flags that make sense for a trial
        if action.dest == "until_mean":  # the driver's name; --stop-at, a sweep's, still reads
            action.option_strings = ["--until-mean", "--stop-at"]
        if action.dest in PASSED + RESUMABLE:
            action.help = HELP.get(action.dest, action.help)
            single._add_action(action)
    sweep = parser.add_argument_group("the sweep")
    sweep.add_argument("--sweep-dir", type=where, metavar="DIR", help="a new directory every node"
                       " sees, or s3://bucket/prefix (default: runs/sweep-TIME)")  # fmt: skip
    sweep.add_argument("--scheduler", choices=("fifo", "asha"), help="asha: end hopeless trials"
                       " early (Tune's ASHA; needs --updates; default: fifo)")  # fmt: skip
    sweep.add_argument("--resume", type=where, metavar="DIR", help="finish the sweep in DIR")
    sweep.add_argument("--download", nargs=2, type=where, metavar=("SWEEP", "DEST"), help="copy"
                       " each trial's run into the new directory DEST/NAME")  # fmt: skip
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    flags = {a.dest: a.option_strings for a in parser._actions}

    def flag(name: str) -> str:  # the flag as typed: --seeds or --seed
        said = [f for f in flags[name] if any(w.split("=")[0] == f for w in argv)]
        return (said or flags[name])[0]

    for name in SWEPT:  # a value given twice would be one trial: a slip, said
        values = getattr(args, name) or []
        if twice := [v for v, n in Counter(values).items() if n > 1]:  # seed 0 too
            parser.error(f"argument {flag(name)}: {twice[0]!r} given twice")
    mode = next((m for m in ("resume", "download") if getattr(args, m) is not None), None)
    names = (*SWEPT, "env", *PASSED, "sweep_dir", "scheduler", "download", *RESUMABLE)
    allowed = {"resume": ("resume", *RESUMABLE), "download": ("download",)}.get(mode, names)
    if given := [a for a in names if getattr(args, a) is not None and a not in allowed]:
        keeps = ", which keeps the sweep's own settings" if mode == "resume" else ""
        parser.error(f"argument {flag(given[0])}: not with --{mode}{keeps}")
    args.goal_flag = flag("until_mean")  # as typed, for check's line
    if args.scheduler == "asha" and args.updates is None:
        parser.error("argument --scheduler asha: needs --updates, the most a trial runs")
    return args


@dataclasses.dataclass
class Sweep:
    """What ``sweep.json`` holds: the grid, every trial's settings, and how trials ended."""

    configs: list[Config]
    settings: dict  # PASSED, and the scheduler
    ended: dict[str, str] = dataclasses.field(default_factory=dict)  # by trial name
    seconds: float = 0.0  # of the sweep's launches, summed over resumes

    def to_json(self) -> bytes:
        body = {"format": FORMAT, "trials": [dataclasses.asdict(c) for c in self.configs]}
        body |= {"settings": self.settings, "ended": self.ended, "seconds": self.seconds}
        return (json.dumps(body, indent=1) + "\n").encode()


def check(configs: list[Config], settings: dict, goal_flag: str = "--until-mean") -> None:
    """A ``ValueError`` for what no trial could run: an unknown env, a running mean to pass
    that no game reaches, too many workers."""
    from pong.envs.make import check_env, check_goal

    for env in {c.env for c in configs}:
        flag = "--env"
        try:
            check_env(env)
            flag = goal_flag
            check_goal(env, settings["until_mean"])
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
    workers = settings["workers"]
    smallest = min(c.batch_size for c in configs)
    _expect(workers is None or workers <= smallest, f"--workers {workers}: at most the smallest"
            f" --batch-size ({smallest}), since each worker plays one game at a time")  # fmt: skip


def read_definition(storage: Storage) -> Sweep:
    """``DIR/sweep.json``, read as hostile: each value checked as its flag is, else one line."""
    keys = ("format", "trials", "settings", "ended", "seconds")
    if not storage.remote and os.path.isfile(storage.root):
        raise UsageError(f"{printable(storage.root)}: a file, not a sweep's directory")
    try:
        body = json.loads(storage.read(DEFINITION, MAX_DEFINITION), object_pairs_hook=unique)
        _expect(isinstance(body, dict) and body.get("format") == FORMAT, "not a pong sweep")
        _expect(set(body) == set(keys), f"expected the keys {', '.join(keys)}")
        _, trials, settings, ended, seconds = (body[k] for k in keys)
        many = isinstance(trials, list) and 0 < len(trials) <= MAX_TRIALS
        _expect(many, f"trials: expected a list of 1 to {MAX_TRIALS:,} settings")
        configs = [Config.from_dict(t) for t in trials]
        names = [trial_name(c) for c in configs]
        once = len(set(names)) == len(names) and all(c.seed is not None for c in configs)
        _expect(once, "trials: each setting once, each with a seed")
        if isinstance(settings, dict):  # a name it was written with, read as today's
            settings = {OLD_PASSED.get(k, k): v for k, v in settings.items()}
        known = isinstance(settings, dict) and set(settings) == {*PASSED, "scheduler"}
        _expect(known, f"settings: expected {', '.join((*PASSED, 'scheduler'))}")
        for f in dataclasses.fields(Options):  # each parsed by its flag's own parser
            if f.name in PASSED and (settings[f.name] is not None or f.name == "watch_every"):
                try:
                    stored(f, settings[f.name])  # (None: not given)
                except ValueError as e:
                    raise ValueError(f"settings: {e}") from None
        asha = settings["scheduler"] == "asha" and settings["updates"] is not None
        _expect(asha or settings["scheduler"] == "fifo", "settings: scheduler: expected fifo, or"
                " asha with updates")  # fmt: skip
        ok = isinstance(ended, dict) and all(k in names and v in ENDED for k, v in ended.items())
        _expect(ok, f"ended: expected trial names, each one of {', '.join(ENDED)}")
        number = type(seconds) in (int, float) and 0 <= seconds < math.inf
        _expect(number, "seconds: expected a number of at least 0")
        seconds = float(seconds)  # an int past any float's range: OverflowError
        check(configs, settings)
    except FileNotFoundError:
        gone = not storage.remote and not os.path.lexists(storage.root)
        there = "no such directory" if gone else f"no sweep there (no {DEFINITION})"
        raise UsageError(f"{printable(storage.uri)}: {there}") from None
    except (ValueError, RecursionError, TypeError, OverflowError) as e:  # 10**400 seconds
        raise UsageError(f"{storage.name(DEFINITION)}: damaged ({first_line(e)})") from None
    return Sweep(configs, settings, ended, seconds)


def main(argv: list[str] | None = None) -> int:
    _STOPS.install()  # the first stop raises KeyboardInterrupt until Ray starts (see run_sweep)
    try:
        args = parse_args(argv)
        if args.download is not None:
            return download(*args.download)
        try:
            from ray import tune  # noqa: F401
        except ImportError:
            return refuse(f"Ray Tune is not installed: {errors.install('sweep')}")
        where = args.resume or args.sweep_dir or time.strftime("runs/sweep-%Y%m%d-%H%M%S")
        storage = Storage(where)
        with _STOPS.held():  # the env's check loads ale-py: a stop inside its C++ would abort
            sweep = read_definition(storage) if args.resume else new_sweep(args, storage)
        with owned(storage, creating=args.resume is None):
            return run_sweep(args, storage, sweep)
    except (UsageError, StorageError) as e:
        return refuse(str(e))
    except OSError as e:  # a file of ours the checks could not foresee (no permission, say)
        if e.filename is None:  # the output itself: quiet_when_piped says so
            raise
        return refuse(f"{printable(e.filename)}: {e.strerror or e}")
    except KeyboardInterrupt:
        return interrupted(_STOPS.received, "; no trial had started")


def new_sweep(args: argparse.Namespace, storage: Storage) -> Sweep:
    """The flags' sweep: every combination of the swept values (seed 1 unless told: it repeats)."""
    values = [getattr(args, n) or [1 if n == "seed" else getattr(Config, n)] for n in SWEPT]
    combos = itertools.product(*values)
    env = Config.env if args.env is None else args.env  # '' is refused, not the default
    configs = [Config(env=env, **dict(zip(SWEPT, combo, strict=True))) for combo in combos]
    if len(configs) > MAX_TRIALS:
        raise UsageError(f"the grid has {len(configs):,} trials, more than {MAX_TRIALS:,}")
    if not storage.remote:  # a link there is refused as ``owned`` opens it
        first = next(p for p in (Path(storage.root), *Path(storage.root).parents) if p.exists())
        if not first.is_dir():
            raise UsageError(f"--sweep-dir {printable(storage.root)}: {printable(first)} is not a"
                             " directory")  # fmt: skip
    _refuse_files(storage)
    settings = {n: getattr(args, n) for n in PASSED} | {"scheduler": args.scheduler or "fifo"}
    settings["watch_every"] = 100 if args.watch_every is None else args.watch_every
    try:
        check(configs, settings, args.goal_flag)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return Sweep(configs, settings)


def _refuse_files(storage: Storage) -> None:
    """Refuse a directory holding anything but an owner's lock: a sweep starts in a new one."""
    try:
        held = set(storage.listing()) - {LOCK, OWNER}
    except OSError as e:  # the store cannot be reached, say
        raise UsageError(f"--sweep-dir {storage.where}: {first_line(e)}") from None
    if held:
        what = f"to finish that sweep: --resume {_shown(storage)}" if DEFINITION in held else ""
        what = "it is a run's (driver.py --resume continues it)" if UPDATES in held else what
        raise UsageError(f"--sweep-dir {printable(storage.uri)}: holds files already; choose a new"
                         f" one{f'; {what}' if what else ''}")  # fmt: skip


@contextlib.contextmanager
def owned(storage: Storage, creating: bool):
    """The sweep directory owned while the block runs (a second owner gets one line)."""
    from pong.run.directory import lock
    from pong.run.files import Directory

    if storage.remote:
        import pyarrow.fs  # Storage has loaded it for the URI

        with contextlib.suppress(FileNotFoundError):
            holder = storage.read(OWNER, 4096).decode(errors="replace").strip()[:200]
            raise UsageError(f"{storage.uri} is in use by {holder}; one sweep per directory (if"
                             f" that sweep has ended, delete {storage.name(OWNER)})")  # fmt: skip
        if isinstance(storage.fs, pyarrow.fs.LocalFileSystem):  # file://, made as a path is
            storage.fs.create_dir(storage.root)
        storage.write(OWNER, f"{PROG} (pid {os.getpid()} on {os.uname().nodename})\n".encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                storage.fs.delete_file(f"{storage.root}/{OWNER}")
        return
    made = not os.path.lexists(storage.root)
    try:
        directory = Directory.open(Path(storage.root), create=True)
    except OSError as e:
        flag = "--sweep-dir" if creating else "--resume"
        raise UsageError(f"{flag} {printable(storage.root)}: {e.strerror or e}") from None
    with contextlib.closing(directory):
        with lock(directory, PROG, "one sweep per directory"):
            try:
                if creating:  # another sweep may have won the race
                    _refuse_files(storage)
                yield
            finally:
                if made and directory.names() == [LOCK]:  # no trial started: nothing to resume
                    directory.remove(LOCK)
                    with contextlib.suppress(OSError):  # someone put a file in it meanwhile
                        Path(storage.root).rmdir()


def run_sweep(args: argparse.Namespace, storage: Storage, sweep: Sweep) -> int:
    """Join Ray, run the trials not yet ended, then print and write the summary."""
    started, given, stops, error = time.monotonic(), args.address, _STOPS, ""
    stops.holding = True  # a stop now counted, not raised (in Ray's start it was a traceback)
    try:
        from pong.run.cluster import ClusterError, connect, resolve_address

        # QUIET_TUNE where the environment says nothing; never Tune's SIGINT handler (ours stop)
        os.environ |= {**QUIET_TUNE, **os.environ, "TUNE_DISABLE_SIGINT_HANDLER": "1"}
        # Ours say what these would. Tune's own experiment state is never read back (sweep.json
        # is): a sync of it that lost a race with Tune's rename of its file is no traceback
        for name in ("tune", "execution.tune_controller", "analysis.experiment_analysis",
                     "execution.experiment_state"):  # fmt: skip
            logging.getLogger(f"ray.tune.{name}").setLevel(logging.CRITICAL)
        try:  # a trial's own output stays in its log: the sweep prints what each reports
            args.address = resolve_address(args.address)  # RAY_ADDRESS too, as driver.py
            connect(args.address, args.num_cpus, log_to_driver=False)
        except ClusterError as e:
            say_error(PROG, e)
            return 1
        finally:
            stops.install()  # ours again, whatever Ray's start left in place
        check_cpus(args, sweep.settings["workers"])
        todo = [c for c in sweep.configs if sweep.ended.get(trial_name(c)) in (None, "failed")]
        for config in todo:  # failed ones again, as Tune's resume_errored: a file may be mended
            sweep.ended.pop(trial_name(config), None)
        check_storage(storage, [trial_name(c) for c in todo])
        storage.write(DEFINITION, sweep.to_json())  # from here on, it can be resumed
        if todo and not stops.received:
            from ray.tune import TuneError

            try:
                _tuner(args, storage, sweep, todo).fit()
            except (OSError, TuneError) as e:  # the storage failed under Tune, say
                error = f"{PROG}: error: Tune stopped: {raised(str(e)) or first_line(e)}"
                print(error, file=sys.stderr)
    except KeyboardInterrupt:  # from Ray's own SIGTERM handler, as it gave up starting
        pass  # a stop before Tune started its trials: the sweep ends as after one
    finally:
        stops.ending = True  # the sweep has ended: a stop now is only counted
        if "ray" in sys.modules:  # Ray's shutdown puts back the default handlers: stops wait
            import ray

            held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
            try:
                ray.shutdown()
            finally:
                stops.install()  # and counted once ours are in place again
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return report(storage, sweep, time.monotonic() - started, given, error)


def check_cpus(args: argparse.Namespace, workers: int | None) -> None:
    """Refuse more workers than a local Ray has CPUs: a trial starts its workers together,
    so it would wait for ever (a cluster's autoscaler may yet add the CPUs: no refusal)."""
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    if args.address is None and workers is not None and workers > cpus:
        flag, fix = "--workers", f"--workers {cpus:g} or fewer, or --num-cpus {workers}"
        if args.resume is not None:
            flag, fix = "the sweep's --workers", f"--resume with --num-cpus {workers}"
        raise UsageError(
            f"{flag} {workers}: more than this local Ray's {cpus:g} CPUs, and a trial's workers"
            f" start together; give {fix}"
        )


def check_storage(storage: Storage, names: list[str]) -> None:
    """Refuse a local DIR some node cannot see (each has its own disk), or links Tune would use."""
    if storage.remote:  # every node reaches a URI, and it has no links
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

    for name in names:
        check_trial_directory(storage, name)
    if len(alive := [n for n in ray.nodes() if n.get("Alive")]) < 2:
        return
    marker = Path(storage.root, f".visible-{os.getpid()}-{time.time_ns()}")
    marker.write_text("")
    sees = ray.remote(num_cpus=0)(os.path.exists)
    try:
        on = [sees.options(scheduling_strategy=On(n["NodeID"], soft=False)) for n in alive]
        seen = ray.get([node.remote(str(marker)) for node in on], timeout=120)
    finally:
        marker.unlink()
    if blind := [n["NodeManagerAddress"] for n, ok in zip(alive, seen, strict=True) if not ok]:
        raise UsageError(f"--sweep-dir {printable(storage.uri)}: not seen from the node"
                         f"{'s' * (len(blind) > 1)} at {', '.join(blind)} (each has its own disk);"
                         " give a directory every node mounts, or storage they all reach, such"
                         " as s3://bucket/prefix")  # fmt: skip


def check_trial_directory(storage: Storage, name: str) -> None:
    """Refuse a trial directory Tune would write through or fail on; remove planted links."""
    path = Path(storage.root, name)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        what = "a symbolic link" if path.is_symlink() else "not a directory"
        raise UsageError(f"{printable(path)}: {what}; refusing to write through it (move it away)")
    for planted in storage.prune(name, keep=storage.directories(name)):  # a link is no directory
        print(f"note: {printable(path / planted)} was a symbolic link; removed", flush=True)


def _tuner(args: argparse.Namespace, storage: Storage, sweep: Sweep, todo: list[Config]):
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from pong.core.worker import WORKER_MEMORY
    from pong.run.cluster import cluster_summary

    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    smallest = min(c.batch_size for c in todo)
    workers = sweep.settings["workers"] or max(1, min(smallest, cpus // min(len(todo), cpus)))
    at_once = max(1, cpus // workers)
    print(f"Sweeping {len(todo)} of {_count(len(sweep.configs), 'trial')} on"
          f" {cluster_summary(args.address)}: {_count(workers, 'RolloutWorker')} each,"
          f" {_count(at_once, 'trial')} at once; storage {printable(storage.uri)}",
          flush=True)  # fmt: skip
    settings = sweep.settings | {"workers": workers}
    spaces = [settings | {"config": dataclasses.asdict(c)} for c in todo]
    bundles = [{}] + [{"CPU": 1, "memory": WORKER_MEMORY}] * workers  # the trial's, each worker's
    most, asha = settings["updates"], settings["scheduler"] == "asha"
    asha = asha and ASHAScheduler(time_attr="update", metric="running_mean", mode="max",
                                  max_t=most, grace_period=max(1, most // 10))  # fmt: skip
    path, _, query = storage.uri.partition("?") if storage.remote else (storage.uri, "", "")
    parent, _, name = path.rstrip("/").rpartition("/")  # Tune's storage_path, with the query
    parent = (parent + (f"?{query}" if query else "")) or "/"
    return tune.Tuner(
        tune.with_resources(tune.with_parameters(trial, where=storage.uri),
                            tune.PlacementGroupFactory(bundles)),
        param_space={"settings": tune.grid_search(spaces)},
        tune_config=tune.TuneConfig(scheduler=asha or None, trial_name_creator=_name,
                                    trial_dirname_creator=_name),  # None: every trial to its end
        run_config=tune.RunConfig(name=name, storage_path=parent, verbose=0,
                                  stop=(hooks := _hooks(sweep, storage)),
                                  callbacks=[hooks], failure_config=tune.FailureConfig(0),
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
    )  # fmt: skip


def trial(space: dict, where: str) -> None:
    """One Tune trial: the driver's loop, each update's run reported (so a stop loses none)."""
    from ray import tune

    from pong.run.training import train

    settings = space["settings"]
    config = Config.from_dict(settings["config"])
    name, storage = trial_name(config), Storage(where)
    local = Path(tempfile.mkdtemp(prefix="pong-trial-")) / name
    try:
        run = _trial_run(config, storage, local)
        run.watch_every = settings["watch_every"]
        mean = run.saved.running_mean if run.saved else None
        if _done(settings, run.saved_at, mean):
            run.close()  # it ended before the sweep could write so: said again, for the sweep
            tune.report({"update": run.saved_at, "running_mean": mean})  # a mean: it has played
            return

        def report(update, trainer) -> None:
            mean = -math.inf if trainer.running_mean is None else trainer.running_mean
            result = {"update": trainer.updates, "running_mean": mean}  # ASHA's, and our line's
            result["steps_per_s"] = update.steps_per_second
            tune.report(result, checkpoint=tune.Checkpoint.from_directory(str(local)))
            if trainer.updates == first + 1:  # the checkpoints of earlier launches are older
                storage.prune(name, keep=[Path(tune.get_checkpoint().path).name])

        first, most = run.saved_at, settings["updates"]
        options = Options(updates=most and most - first, until_mean=settings["until_mean"],
                          workers=settings["workers"])  # fmt: skip
        # {}: Ray's default, which keeps the workers in the trial's Tune placement group
        train(run, options, Stops(), after=report, placement={})
    finally:
        shutil.rmtree(local.parent, ignore_errors=True)


def _done(settings: dict, update: int, mean: float | None) -> bool:
    """Whether a trial has run its updates or passed its running-mean goal."""
    from pong.run.report import reached

    return (settings["updates"] or math.inf) <= update or reached(mean, settings["until_mean"])


def _trial_run(config: Config, storage: Storage, local: Path):
    """The trial's latest checkpoint that can be resumed, copied into ``local``; else a new run."""
    from pong.run.directory import Run

    name, problem = trial_name(config), None
    for rel in storage.checkpoints(name):
        try:
            storage.copy_down(rel, local)
            run = Run.resume(local, {}, 1)
            if run.config != config:
                raise UsageError("the checkpoint of another setting")
            run.open()
            return run
        except (UsageError, StorageError, OSError) as e:
            said = f"{storage.name(rel)}: {str(e).replace(str(local), rel)}"
            problem = problem or said
            print(f"note: {said}; trying the checkpoint before it", flush=True)  # its log
            shutil.rmtree(local, ignore_errors=True)
    if problem is not None:  # none can be resumed: a UsageError naming the latest
        raise UsageError(problem)
    run = Run.start(local, config, 1)  # every update saved: each one is reported
    run.open()
    return run


def raised(traceback: str) -> str | None:
    """The message of the last exception a traceback's text names (``SomeError: message``)."""
    said = [n.rstrip() for n in traceback.splitlines() if n[:1].strip() and ": " in n]
    return said[-1].split(": ", 1)[1] if said else None


def _hooks(sweep: Sweep, storage: Storage):
    """Tune's stopper (ours: a stop ends all) and callback (our lines; ends into sweep.json)."""
    from ray import tune

    class Hooks(tune.Callback, tune.Stopper):
        def __call__(self, trial_id, result) -> bool:
            return False  # a trial ends by itself, by ASHA, or with every other

        def stop_all(self) -> bool:
            return bool(_STOPS.received)

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            mean = result.get("running_mean", -math.inf)
            print(f"{_name(trial)}: update {result.get('update')}, running mean"
                  f" {'-' if mean == -math.inf else f'{mean:.2f}'},"
                  f" {result.get('steps_per_s', 0):,.0f} steps/s", flush=True)  # fmt: skip

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            result = trial.last_result or {}
            if _done(trial.config["settings"], result.get("update", 0), result.get("running_mean")):
                self.ended(trial, "done")
            elif not _STOPS.received:  # a stop leaves it unfinished, to resume
                self.ended(trial, "stopped-early")

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            text = ""  # its traceback, in error.txt
            with contextlib.suppress(OSError, TypeError), open(trial.error_file, "rb") as f:
                text = f.read(2**20).decode(errors="replace")
            print(f"note: trial {_name(trial)} failed: {raised(text) or 'see its log'}", flush=True)
            self.ended(trial, "failed")

        def ended(self, trial, how: str) -> None:
            sweep.ended[_name(trial)] = how
            storage.write(DEFINITION, sweep.to_json())

    return Hooks()


def report(storage: Storage, sweep: Sweep, took: float, address=None, error="") -> int:
    """The summary, printed and in ``summary.csv``; done, or the command that finishes it.
    A write that fails (a full disk) is a failure, said once (unless ``error`` said it)."""
    sweep.seconds += took
    table, out, unwritten = summarize(storage, sweep), io.StringIO(), False
    csv.writer(out, lineterminator="\n").writerows([list(table[0]), *(r.values() for r in table)])
    try:
        storage.write(DEFINITION, sweep.to_json())
        storage.write(SUMMARY, out.getvalue().encode())
    except StorageError as e:
        unwritten = True
        if str(e) not in error:
            say_error(PROG, e)
    lines = [list(table[0]), ["---"] * len(table[0]), *(row.values() for row in table)]
    print("", *(f"| {' | '.join(cells)} |" for cells in lines), "", sep="\n")  # Markdown
    unfinished = sum(trial_name(c) not in sweep.ended for c in sweep.configs)
    ends = " ".join(row["ended"] for row in table).split()  # the table's, one word a trial
    tally = {how: ends.count(how) for how in ("failed", "stopped-early", "not-started")}
    said = ", ".join(f"{n} {how}" for how, n in tally.items() if n)
    said, trials = f" ({said})" if said else "", len(sweep.configs)
    again = f"{command('--resume', module='pong sweep')} {_shown(storage)}"
    again += f" --address={errors.shell_word(address)}" if address else ""  # the same cluster
    if unfinished:
        print(f"Stopped with {unfinished} of {trials} trials unfinished{said}; continue with:"
              f" {again}", flush=True)  # fmt: skip
        return 128 + _STOPS.received[0].value if _STOPS.received else 1
    retry = f"; to run the failed again: {again}" if tally["failed"] else ""
    print(f"Done: {_count(trials, 'trial')} in {sweep.seconds:.0f} s{said};"
          f" {printable(storage.name(SUMMARY))}{retry}")  # fmt: skip
    return 1 if tally["failed"] or unwritten else 0


def _shown(storage: Storage) -> str:
    """The sweep directory as a command names it: a URI as it is, a path pasteable."""
    return errors.shell_word(storage.uri) if storage.remote else errors.pasteable(storage.root)


def _summary(storage: Storage, name: str) -> Summary | None:
    """The trial's latest ``updates.csv`` in a few figures, read as hostile (else a note)."""
    if (latest := storage.latest(name)) is None:
        return None
    try:
        data = storage.read(f"{latest}/{UPDATES}", MAX_METRICS)
        return summary(storage.name(latest), (0,), lambda: io.BytesIO(data))
    except (MetricsFileError, StorageError, FileNotFoundError) as e:
        print(f"note: {name}: {first_line(e)}", flush=True)
        return None


def summarize(storage: Storage, sweep: Sweep) -> list[dict[str, str]]:
    """One row per setting over its seeds; ``best``: the top final mean, the fewest games to 0."""
    by_setting: dict[tuple, list[Config]] = {}
    for c in sorted(sweep.configs, key=lambda c: c.seed):
        by_setting.setdefault((c.batch_size, c.learning_rate, c.decay_rate), []).append(c)
    table, finals, zeros = [], [], []
    for (size, lr, decay), trials in sorted(by_setting.items()):
        runs = {trial_name(c): _summary(storage, trial_name(c)) for c in trials}
        final = [float(s.last["running_mean"]) for s in runs.values() if s]
        to_zero = [s.passed[0].games if s and 0 in s.passed else math.inf for s in runs.values()]
        ended = [sweep.ended.get(n, "unfinished" if s else "not-started") for n, s in runs.items()]
        table.append({
            "batch_size": str(size), "learning_rate": repr(lr), "decay_rate": repr(decay),
            "seeds": " ".join(str(c.seed) for c in trials),
            "final_running_mean": f"{statistics.fmean(final):.2f}" if final else "-",
            "spread": f"{statistics.pstdev(final):.2f}" if final else "-",
            "games_to_running_mean_0": " ".join("-" if n == math.inf else str(n) for n in to_zero),
            "training_seconds": f"{sum(s.seconds for s in runs.values() if s):.0f}",
            "ended": " ".join(ended), "best": "-",
        })  # fmt: skip
        finals.append(statistics.fmean(final) if final else -math.inf)
        zeros.append(max(to_zero))
    for column, pick, mark in ((finals, max, "final"), (zeros, min, "fastest")):
        if abs(value := pick(column)) != math.inf:
            row = table[column.index(value)]
            row["best"] = f"{row['best']} {mark}".removeprefix("- ")
    return table


def download(source: str | Path, dest: Path) -> int:
    """``--download``: each trial's latest run copied into ``dest``."""
    dest, storage = Path(dest), Storage(source)
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_dir() or any(dest.iterdir())):
        return refuse(f"--download: {printable(dest)}: must be a new or empty directory")
    if not storage.remote and dest.resolve().is_relative_to(Path(storage.root).resolve()):
        return refuse(f"--download: {printable(dest)}: inside the sweep it copies")
    names, copied, made = [], 0, not os.path.lexists(dest)
    try:
        names = [trial_name(c) for c in read_definition(storage).configs]
        for name in names:
            copied += _copy_whole(storage, name, dest / name)
    except (UsageError, OSError) as e:  # StorageError, and pyarrow's own
        for name in names:  # none half copied: the same command can be run again
            shutil.rmtree(dest / name, ignore_errors=True)
        if made:
            with contextlib.suppress(OSError):
                dest.rmdir()
        where = getattr(e, "filename", None) or dest  # a write's error may name no file
        said = f"{printable(where)}: {e.strerror}" if getattr(e, "strerror", None) else e
        say_error(PROG, f"--download: {said}")
        return 2 if isinstance(e, UsageError) else 1  # a bad sweep, or the disk or network
    print(f"Copied {copied} of {len(names)} trial runs into {printable(dest)};"
          f" continue one with: {command('--resume', dest)}/NAME")  # fmt: skip
    return 0


def _copy_whole(storage: Storage, name: str, into: Path) -> bool:
    """The trial's latest checkpoint that loads whole, copied into ``into`` with its run's
    files: one a running sweep is still writing is passed over for the one before."""
    from pong.run.checkpoint import FILENAME, CheckpointError, load

    for rel in storage.checkpoints(name):
        storage.copy_down(rel, into)
        try:
            load(into)
            return True
        except CheckpointError as e:
            why = str(e).removeprefix(f"{into / FILENAME}: ")
            print(f"note: {storage.name(rel)}/{FILENAME}: {why}; not copied (a sweep may still"
                  " be writing it)", flush=True)  # fmt: skip
            shutil.rmtree(into)
    return False


def runs_of(paths: Sequence[Path]) -> list[Path]:
    """The run directories ``paths`` name: a sweep's directory stands for each trial's latest
    run, a trial's directory for its own, and a folder of runs or sweeps (``results/``, also
    in folders of their own) for theirs; the sweep's other files (``DIR/*``) are left out.
    (``os.path``'s tests: an unreadable directory is no run, not a ``PermissionError``.)"""
    found: list[Path] = []
    for path in paths:
        if isfile(path / DEFINITION):
            storage = Storage(path)
            found += [
                path / rel for rel in filter(None, map(storage.latest, storage.directories()))
            ]
        elif isfile(path.parent / DEFINITION):
            if latest := Storage(path.parent).latest(path.name):
                found.append(path.parent / latest)
        elif held := _held(path):
            found += runs_of(held)
        else:
            found.append(path)
    return found


def _held(folder: Path, depth: int = 2) -> list[Path]:
    """The runs, sweeps and folders of them in ``folder`` when it is no run itself (else none);
    a folder counts if it holds one within ``depth`` levels (``results/lr-drop/1e-4``), never
    through a link."""
    if lexists(folder / UPDATES) or depth == 0:
        return []
    try:
        inside = sorted(folder.iterdir())
    except OSError:  # not a directory, or unreadable: the tools name it as a run
        return []
    return [
        p for p in inside if isfile(p / UPDATES) or isfile(p / DEFINITION)
        or (isdir(p) and not islink(p) and _held(p, depth - 1))
    ]  # fmt: skip
