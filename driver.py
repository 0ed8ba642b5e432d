"""Train a Pong policy with policy gradients, playing the games on Ray actors.

Run (from the repository root, after the README's install):
    .venv/bin/python driver.py --batch-size=10             # local Ray, until Ctrl-C
    .venv/bin/python driver.py --iterations=2 --seed=0     # two updates, reproducible
    .venv/bin/python driver.py --redis-address=HOST:PORT   # an existing Ray cluster
    ray job submit --address http://HEAD:8265 --working-dir . --runtime-env runtime_env.yaml \\
        -- python driver.py                                # a Ray job on a cluster (README)
    .venv/bin/python driver.py --resume runs/20261122-031402
    .venv/bin/python driver.py --evaluate results/pong-v5/policy.npz --episodes 3

Each update, one RolloutWorker actor per batch slot plays a game with the
current weights and returns its gradient; the trainer adds the gradients up as
they arrive and applies one RMSProp step (pong/train.py). One line per update:

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
import json
import shlex
from collections.abc import Sequence

import ray

from pong.cluster import (
    ClusterError,
    check_memory,
    cluster_summary,
    connect,
    joined,
    resolve_address,
)
from pong.config import Config, Options, Watch, add_flags, fill, given
from pong.env import check_env
from pong.errors import PongError, UsageError, output_closed
from pong.evaluate import watch
from pong.run import JOB_CONFIG, Run, in_ray_job
from pong.stops import finishing, held_back, signals_stop, stopped_for
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
        run = Run.start(options.run_dir, fill(args, Config), options.checkpoint_every)
    try:
        check_env(run.config.env)
    except ValueError as e:  # a resumed run's env comes from its checkpoint, maybe hand-edited
        where = f"{run.checkpoint_path}: settings.env" if run.saved else "--env"
        raise UsageError(f"{where}: {e}") from None
    if run.saved and reached(run.saved.running_reward, options.until_mean):
        raise UsageError(
            f"--until-mean {options.until_mean:g}: the run's running mean is already"
            f" {run.saved.running_reward:.2f}"
        )
    return run


def reached(running_reward: float | None, until_mean: float | None) -> bool:
    """Whether ``--until-mean`` stops the run at this running mean."""
    return until_mean is not None and running_reward is not None and running_reward > until_mean


def announce(run: Run, options: Options, where: str) -> None:
    """The first lines: where the run trains, with what settings, where its files go."""
    config, iterations = run.config, options.iterations
    stops = [f"{iterations} update{'s' * (iterations != 1)}"] if iterations else []
    if options.until_mean is not None:
        stops.append(f"until the running mean is above {options.until_mean:g}")
    until = " or ".join(stops) or ("until `ray job stop`" if in_ray_job() else "until Ctrl-C")
    print(
        f"Running on {where}: batch size {config.batch_size}, env {config.env},"
        f" seed {config.seed}, learning rate {config.learning_rate:g}, {until}",
        flush=True,
    )
    resumed = f"; resuming after update {run.saved.iteration}" if run.saved else ""
    print(
        f"Run directory: {run.directory} (checkpoint every {run.checkpoint_every} updates,"
        f" metrics in updates.csv, episodes.csv and TensorBoard event files){resumed}",
        flush=True,
    )


def train(run: Run, options: Options, address: str | None = None) -> None:
    """Start the workers, then update until the options stop it (or forever), one line each."""
    trainer, first, iterations = None, run.saved_at, options.iterations
    try:
        trainer = Trainer(run.config, run.saved)
        counts = list(trainer.games.placement().values())
        print(
            f"Started {run.config.batch_size} RolloutWorker actors on {len(counts)}"
            f" node{'s' * (len(counts) != 1)} ({' + '.join(map(str, counts))})",
            flush=True,
        )
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
                print(
                    f"Batch {update.iteration} computed {update.rollouts} rollouts"
                    f" ({update.steps} steps) in {update.seconds:.2f} seconds"
                    f" ({update.steps_per_second:.0f} steps/s), running mean is"
                    f" {trainer.running_reward:.2f}",
                    flush=True,
                )
    finally:
        finishing()  # the last save: a stop from here on is only counted
        run.close(trainer)
        if trainer is not None:
            print(farewell(run, trainer, first, address, options.until_mean), flush=True)


def farewell(
    run: Run,
    trainer: Trainer,
    first: int,
    address: str | None = None,
    until_mean: float | None = None,
) -> str:
    """The last line: what the run did and, once it has saved, how to continue it."""
    n, best = trainer.iteration, trainer.best_running_reward
    line = (
        f"Done: {n} update{'s' * (n != 1)} ({n - first} in this run), {trainer.episodes}"
        f" episodes, best running mean {'-' if best is None else f'{best:.2f}'}"
    )
    checkpoint = printable(run.checkpoint_path)
    if reached(trainer.running_reward, until_mean):
        return f"{line}; the running mean is above {until_mean:g}; checkpoint: {checkpoint}"
    goal = "" if until_mean is None else f" --until-mean={until_mean:g}"  # the same goal again
    if not run.checkpoint_path.exists():
        return f"{line}; no update finished, so nothing was saved"
    cluster = joined(address) if ray.is_initialized() else address  # the same cluster again
    if in_ray_job():  # submitted as a job: continue it as one, with the same packages
        job = json.loads(os.environ[JOB_CONFIG]).get("runtime_env") or {}
        pip = " --runtime-env runtime_env.yaml" if "pip" in job else ""
        again = (
            f"ray job submit --address {cluster} --working-dir .{pip} -- python driver.py"
            f" --resume {shell_word(str(run.directory))}{goal}"  # absolute: no leading -
        )
    else:
        where = f" --address={shell_word(cluster)}" if cluster else ""
        again = (
            f"{pasteable(sys.executable)} {pasteable(__file__)}{where}"
            f" --resume {pasteable(run.directory)}{goal}"
        )
    return f"{line}; checkpoint: {checkpoint} (continue with: {again})"


def pasteable(path: str | os.PathLike) -> str:
    """``path`` for a command to paste here: relative inside the current directory (``./``
    first where it would start with ``-`` and be read as a flag), quoted for the shell."""
    relative = os.path.relpath(path)
    if relative.startswith("-"):
        relative = os.path.join(".", relative)
    return shell_word(os.path.abspath(path) if relative.startswith("..") else relative)


def shell_word(text: str) -> str:
    """``text`` as one word for bash or zsh, on one line: quoted as ``shlex.quote`` does, or,
    where it holds a newline or another character that does not print, as ``$'...'`` with
    that character's bytes escaped."""
    if text.isprintable():
        return shlex.quote(text)
    escaped = "".join(
        c.replace("\\", "\\\\").replace("'", "\\'")
        if c.isprintable()
        else "".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape"))
        for c in text
    )
    return f"$'{escaped}'"


def printable(path: str | os.PathLike) -> str:
    """``path`` to show in a line: as it is, unless it holds a character that does not print."""
    return str(path) if str(path).isprintable() else shell_word(str(path))


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
                check_memory(run.config.batch_size)
                announce(run, options, cluster_summary(address))
                train(run, options, address)
            finally:
                run.close()  # gives the directory up, also when Ray could not start
        except PongError as e:
            finishing()  # from here on a stop (the watchdog's, say) is only counted
            died = watchdog.check() if watchdog is not None else None
            if died is not None:  # the local Ray died; Ray's own error may have come first
                watchdog.hold(e)  # its frames may hold the dead Ray's objects
            if died is not None and isinstance(e, ClusterError):  # lost contact, say: that is why
                print(f"{PROG}: error: {died}; {kept(run)}", file=sys.stderr, flush=True)
                return died.exit_code
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return e.exit_code
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
            finishing()
            if watchdog is not None:  # the frames it stopped may hold the dead Ray's objects
                watchdog.hold(stopped)
            cause = stopped_for()  # the local Ray died (pong.watchdog)
            if isinstance(cause, PongError):
                print(f"{PROG}: error: {cause}; {kept(run)}", file=sys.stderr, flush=True)
                return cause.exit_code
            stop = received[0] if received else signal.SIGINT
            dead = watchdog is not None and watchdog.died is not None
            ending = "; shutting down Ray" if ray.is_initialized() and not dead else ""
            print(f"Interrupted by {stop.name}{ending}.", file=sys.stderr, flush=True)
            return 128 + stop.value  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
        finally:
            finishing()  # a stop from here on is only counted
            if watchdog is not None:
                watchdog.shut_down()  # ray.shutdown, or kill what is left of a Ray that died
            else:
                ray.shutdown()  # a no-op when Ray was never started
    return 0


def kept(run: Run | None) -> str:
    """What a run that stopped on an error kept: its last checkpoint, or nothing."""
    if run is not None and run.checkpoint_path.exists():
        where = printable(run.checkpoint_path)
        return f"the last finished update ({run.saved_at}) is saved in {where}"
    return "no update had finished, so nothing was saved"


if __name__ == "__main__":
    code = main()
    if Watchdog.fired:  # Ray's exit hooks would talk to the dead Ray, for up to a minute
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
        os._exit(code)
    sys.exit(code)
