"""Train a Pong policy with policy gradients, playing the games on Ray actors.

Run (from the repository root, after the README's install):
    .venv/bin/python driver.py --batch-size=10             # local Ray, until Ctrl-C
    .venv/bin/python driver.py --iterations=2 --seed=0     # two updates, reproducible
    .venv/bin/python driver.py --redis-address=HOST:PORT   # an existing Ray cluster
    ray job submit --address http://HEAD:8265 --working-dir . --runtime-env runtime_env.yaml \\
        -- python driver.py                                # a Ray job on a cluster (README)
    .venv/bin/python driver.py --resume runs/20261122-031402
    .venv/bin/python driver.py --evaluate results/pong-v5/policy.safetensors --episodes 3

Each update, the RolloutWorker actors (one per CPU, at most the batch size) play
the batch's games with the current weights, each taking the next game as it
finishes one, and return their gradients; the trainer adds them up as they
arrive and applies one RMSProp step (pong/train.py). One line per update:

  Batch 1 computed 10 rollouts (10169 steps) in 1.96 seconds (5181 steps/s), running mean is -20.97

A fresh policy loses about 21-0; it takes thousands of games before the
running mean visibly climbs.
"""

from __future__ import annotations

import os
import signal
import sys


def _stopped_while_loading(signum: int, frame: object) -> None:
    """A signal before ``main`` takes over (Ray takes ~0.5 s to import): nothing started yet."""
    print(f"Interrupted by {signal.Signals(signum).name}.", file=sys.stderr, flush=True)
    os._exit(128 + signum)  # at once: no traceback from whichever import was running


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _stopped_while_loading)
    signal.signal(signal.SIGTERM, _stopped_while_loading)

import argparse
import contextlib
from collections.abc import Sequence

import ray

from pong.cluster import (
    ClusterError,
    cluster_summary,
    connect,
    resolve_address,
)
from pong.config import Config, Options, Watch, add_flags, fill, given
from pong.env import check_env
from pong.errors import PongError, UsageError, output_closed
from pong.evaluate import watch
from pong.report import announce, batch_line, failed, farewell, interrupted, reached, started
from pong.run import Run
from pong.stops import finishing, held_back, signals_stop
from pong.train import Trainer
from pong.watchdog import Watchdog

PROG = "driver.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags: one for each field of ``Config``, ``Options`` and ``Watch``."""
    parser = _Parser(
        prog=PROG, description="Train Karpathy's policy-gradient Pong with Ray actors."
    )
    add_flags(parser.add_argument_group("the run's settings (a resumed run keeps its own)"), Config)
    add_flags(parser.add_argument_group("this invocation"), Options)
    add_flags(parser.add_argument_group("watching a trained agent (no training, no Ray)"), Watch)
    args = parser.parse_args(argv)
    if args.evaluate is None and (args.episodes is not None or args.record is not None):
        parser.error("argument --episodes/--record: only with --evaluate CHECKPOINT")
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
    run.watch_every = options.watch_every
    try:
        check_env(run.config.env)
    except ValueError as e:  # a resumed run's env comes from its checkpoint, maybe hand-edited
        where = f"--resume: {run.checkpoint_path}: env" if run.saved else "--env"
        if run.start_from is not None and args.env is None:  # the env came from the file
            where = f"--start-from: {run.start_from[0]}: env"
        raise UsageError(f"{where}: {e}") from None
    if run.saved and reached(run.saved.running_reward, options.until_mean):
        raise UsageError(
            f"--until-mean {options.until_mean:g}: the run's running mean is already"
            f" {run.saved.running_reward:.2f}"
        )
    return run


def train(run: Run, options: Options, address: str | None = None) -> None:
    """Start the workers, then update until the options stop it (or forever), one line each."""
    trainer, first, iterations = None, run.saved_at, options.iterations
    try:
        trainer = Trainer(run.config, run.initial)
        print(started(trainer), flush=True)
        while (iterations is None or trainer.iteration - first < iterations) and not reached(
            trainer.running_reward, options.until_mean
        ):
            try:
                update = trainer.play()  # a stop while the games run loses only them
            except OSError as e:  # Ray's own link broke (its raylet, or a node, is gone)
                raise ClusterError(
                    f"lost contact with Ray ({e.strerror or e}); a node may have gone down"
                ) from None
            with held_back():  # applied, counted, recorded and printed, or none of these
                trainer.apply(update)
                run.record(update, trainer)
                for message in update.messages:
                    print(message, flush=True)
                print(batch_line(update, trainer), flush=True)
    finally:
        finishing()  # the last save: a stop from here on is only counted
        run.close(trainer)
        if trainer is not None:
            print(farewell(run, trainer, first, address, options.until_mean, __file__), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run: Run | None = None
    watchdog: Watchdog | None = None  # on the local Ray's own processes
    with signals_stop() as received:  # the first SIGINT/SIGTERM stops; later ones wait
        try:
            if args.evaluate is not None:
                watch(fill(args, Watch), args.env, args.seed)
                return 0
            check_text(sys.argv if argv is None else argv)
            address = resolve_address(args.address)
            options = fill(args, Options)
            run = prepare(args, options)
            run.open()  # the run directory is ours before Ray starts
            try:
                connect(address, args.num_cpus)
                if address is None:
                    watchdog = Watchdog.of_local_ray()  # set before it starts, for finally
                    if watchdog is not None:
                        watchdog.start(run.checkpoint_path)
                announce(run, options, cluster_summary(address))
                train(run, options, address)
            finally:
                run.close()  # gives the directory up, also when Ray could not start
        except PongError as e:
            return failed(PROG, e, run, watchdog)
        except BrokenPipeError:  # `driver.py | head`: nobody reads any more, so stop as `yes` does
            finishing()
            print(f"{PROG}: stopped: its output was closed", file=sys.stderr, flush=True)
            return output_closed()
        except OSError as e:  # a file or socket the checks before could not foresee
            finishing()
            where = f"{e.filename}: " if e.filename else ""
            print(f"{PROG}: error: {where}{e.strerror or e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as stopped:
            return interrupted(PROG, stopped, received, run, watchdog)
        finally:
            finishing()  # a stop from here on is only counted
            if watchdog is not None:
                watchdog.shut_down()  # ray.shutdown, or kill what is left of a Ray that died
            else:
                ray.shutdown()  # a no-op when Ray was never started
    return 0


if __name__ == "__main__":
    code = main()
    if Watchdog.fired:  # Ray's exit hooks would talk to the dead Ray, for up to a minute
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
        os._exit(code)
    sys.exit(code)
