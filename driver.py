"""Train a Pong policy with policy gradients, playing the games on Ray actors.

Run (from the repository root, after the README's install):
    .venv/bin/python driver.py --batch-size=10             # local Ray, until Ctrl-C
    .venv/bin/python driver.py --updates=2 --seed=0        # two updates, reproducible
    .venv/bin/python driver.py --redis-address=HOST:PORT   # an existing Ray cluster
    ray job submit --address http://HEAD:8265 --working-dir . --runtime-env runtime_env.yaml \\
        -- python driver.py                                # a Ray job on a cluster (README)
    .venv/bin/python driver.py --resume runs/20261122-031402
    .venv/bin/python driver.py --evaluate results/pong-v5/policy.safetensors --games 3

Each update, the workers (RolloutWorker actors, one per CPU, at most the batch size) play
its games, each taking the next as it finishes one; the trainer adds the games' gradients
in game order and applies them with RMSProp (pong/core/train.py; the loop is
pong/run/training.py, which a sweep's trials run too). One line per update:

  Batch 1 computed 10 rollouts (10169 steps) in 1.96 seconds (5181 steps/s), running mean is -20.97
"""

from __future__ import annotations

import sys

from pong.run.errors import require_install
from pong.run.stops import stop_while_loading

if __name__ == "__main__":
    stop_while_loading()
    require_install("driver.py")

import argparse
import errno
import signal
from collections.abc import Sequence

import ray

from pong.core.schedule import WorkerError
from pong.core.train import NonFiniteError
from pong.envs.make import check_env, check_goal
from pong.run.cluster import cluster_summary, connect, resolve_address
from pong.run.config import Config, Evaluation, Options, add_flags, fill, given
from pong.run.directory import Run
from pong.run.errors import (
    OneLineParser,
    PongError,
    UsageError,
    output_closed,
    quiet_when_piped,
    say_error,
)
from pong.run.report import announce, failed, farewell, reached
from pong.run.stops import Stops, interrupted
from pong.run.training import train
from pong.tools.evaluate import evaluate

PROG = "driver.py"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags: one for each field of ``Config``, ``Options`` and ``Evaluation``."""
    parser = OneLineParser(
        prog=PROG, description="Train Karpathy's policy-gradient Pong with Ray actors."
    )
    add_flags(parser.add_argument_group("the run's settings (a resumed run keeps its own)"), Config)
    add_flags(parser.add_argument_group("this invocation"), Options)
    add_flags(
        parser.add_argument_group("watching a trained agent (no training, no Ray)"), Evaluation
    )
    args = parser.parse_args(argv)
    if args.evaluate is None and (args.games is not None or args.record is not None):
        flag = "--games" if args.games is not None else "--record"
        parser.error(f"argument {flag}: only with --evaluate CHECKPOINT")
    if args.evaluate is not None:
        played = ("env", "seed")  # the only run settings a game uses
        training = [*given(args, Options), *(n for n in given(args, Config) if n not in played)]
        if training:
            parser.error(f"argument --{training[0].replace('_', '-')}: not with --evaluate")
    if args.record is not None and args.record.suffix.lower() != ".gif":
        parser.error(f"argument --record: only .gif files are written, got {str(args.record)!r}")
    if args.resume is not None and args.run_dir is not None:
        parser.error("argument --run-dir: a resumed run stays in its own directory")
    if args.resume is not None and args.start_from is not None:
        parser.error("argument --start-from: not with --resume, which continues a run as it was")
    return args


def check_text(argv: Sequence[str]) -> None:
    """Refuse arguments that are not UTF-8 text: Ray cannot carry them (it records the command)."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape")
            raise UsageError(f"{shown!r} is not UTF-8 text, which Ray cannot carry") from None


def prepare(args: argparse.Namespace, options: Options) -> Run:
    """The run to train: a new one from the flags, or a resumed one; its env checked."""
    if options.resume is not None:
        run = Run.resume(options.resume, given(args, Config), options.checkpoint_every)
    else:
        config, env_given = fill(args, Config), args.env is not None
        run = Run.start(
            options.run_dir, config, options.checkpoint_every, options.start_from, env_given
        )
    run.watch_every, run.checkpoint_seconds = options.watch_every, options.checkpoint_seconds
    try:
        check_env(run.config.env)
    except ValueError as e:  # a resumed run's env comes from its checkpoint, maybe hand-edited
        where = f"--resume: {run.checkpoint_path}: env" if run.saved else "--env"
        if run.start_from is not None and args.env is None:  # the env came from the file
            where = f"--start-from: {run.start_from[0]}: env"
        raise UsageError(f"{where}: {e}") from None
    if options.workers is not None and options.workers > run.config.batch_size:
        raise UsageError(
            f"--workers {options.workers}: at most the batch size ({run.config.batch_size}),"
            " since each worker plays one game at a time"
        )
    try:
        check_goal(run.config.env, options.until_mean)
    except ValueError as e:
        raise UsageError(f"--until-mean: {e}") from None
    if run.saved and reached(run.saved.running_mean, options.until_mean):
        raise UsageError(
            f"--until-mean {options.until_mean:g}: the run's running mean is already"
            f" {run.saved.running_mean:.2f}"
        )
    return run


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run: Run | None = None
    stops = Stops()
    stops.install()  # the first SIGINT/SIGTERM stops; later ones wait for the save
    try:
        if args.evaluate is not None:
            evaluate(fill(args, Evaluation), args.env, args.seed)
            return 0
        check_text(sys.argv if argv is None else argv)
        address = resolve_address(args.address)
        options = fill(args, Options)
        with stops.held():  # the env's check runs ale-py: a stop inside its C++ would abort
            run = prepare(args, options)
        if run.directory.exists():  # ours before Ray starts (a new one is made once it has)
            run.open()
        try:
            connect(address, args.num_cpus)
            if run.opened is None:  # so a Ray that ends this process as it starts leaves none
                run.open()
            announce(run, options, cluster_summary(address))
            train(run, options, stops, address, __file__)
        finally:
            run.close()  # gives the directory up, also when Ray could not start
    except (PongError, ray.exceptions.RayError, WorkerError, NonFiniteError) as e:
        stops.ending = True
        return failed(PROG, e, run)
    except BrokenPipeError:  # `driver.py | head`: nobody reads any more, so stop as `yes` does
        stops.ending = True
        print(f"{PROG}: stopped: its output was closed", file=sys.stderr, flush=True)
        if stops.last_line is not None:  # where the run was kept, and how to continue it
            print(stops.last_line, file=sys.stderr, flush=True)
        ray.shutdown()  # before stdout is pointed elsewhere: nothing redirected under Ray
        return output_closed()
    except OSError as e:  # a file or socket the checks before could not foresee
        stops.ending = True
        where = f"{e.filename}: " if e.filename else ""
        if e.errno == errno.ENOSPC and not e.filename:  # our files' say so: the output (/dev/full)
            where = "could not write the output: "
        say_error(PROG, f"{where}{e.strerror or e}")
        return 1
    except KeyboardInterrupt:
        stops.ending = True
        code = interrupted(stops.received, "; shutting down Ray" if ray.is_initialized() else "")
        if stops.last_line is None and run is not None and run.saved is not None:  # Ray starting
            goal = options.until_mean
            stops.last_line = farewell(
                run, None, run.saved_at, address, goal, __file__, options.updates
            )
        # Its workers' last lines, if any, come before the resume hint; but a SIGTERM has a
        # deadline (`ray job stop` kills 3 s later, a slow shutdown included): the hint first
        if stops.received[:1] != [signal.SIGTERM]:
            ray.shutdown()
        if stops.last_line is not None:
            print(stops.last_line, flush=True)
        return code
    finally:
        stops.ending = True  # a stop from here on is only counted
        ray.shutdown()  # ends a local Ray's processes; a no-op when Ray never started
    return 0


if __name__ == "__main__":
    quiet_when_piped(main, PROG)
