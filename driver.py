"""Train a Pong policy with policy gradients, playing the games on Ray actors.

Run:
    python driver.py --batch-size=10                 # local Ray, until Ctrl-C
    python driver.py --iterations=2 --seed=0         # two updates, reproducible
    python driver.py --redis-address=HOST:PORT       # an existing Ray cluster
    python driver.py --resume runs/20261122-031402   # continue a saved run
    python driver.py --evaluate runs/20261122-031402 --episodes 3 --record game.gif
    python driver.py --evaluate results/pong-v5/policy.npz   # the trained agent we ship

Each update, one RolloutWorker actor per batch slot plays a game with the
current weights and returns its gradient; the driver adds the gradients up as
they arrive and applies one RMSProp step (pong/train.py). Expect one line per update:

  Batch 1 computed 10 rollouts (10169 steps) in 1.96 seconds (5181 steps/s), running mean is -20.97

A random policy loses 21-0 (running mean about -20.5 to -21); it takes
thousands of episodes before the running mean visibly climbs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pong import model as model_defaults
from pong.env import DEFAULT_ENV

if TYPE_CHECKING:
    from pong.checkpoint import Checkpoint

PROG = "driver.py"
# The settings a run keeps for life (a resumed run takes them from its checkpoint).
DEFAULTS = {
    "batch_size": 10,
    "env": DEFAULT_ENV,
    "learning_rate": model_defaults.learning_rate,
    "decay_rate": model_defaults.decay_rate,
}


class UsageError(Exception):
    """Bad input found after parsing; the message is one line for the user."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        # A None default is explained in the help text itself.
        return action.help if action.default is None else super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(
        prog=PROG,
        description="Train Karpathy's policy-gradient Pong agent with Ray actors.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--batch-size",
        metavar="N",
        type=_positive_int,
        default=None,
        help=f"episodes per update; also the number of RolloutWorker actors (default:"
        f" {DEFAULTS['batch_size']})",
    )
    parser.add_argument(
        "--iterations",
        metavar="N",
        type=_positive_int,
        default=None,
        help="number of updates to run (default: until interrupted with Ctrl-C or SIGTERM)",
    )
    parser.add_argument(
        "--redis-address",
        "--address",
        dest="address",
        metavar="HOST:PORT",
        default=None,
        help="join the existing Ray cluster whose head is at HOST:PORT (RAY_ADDRESS is"
        " honoured too); default: start a local Ray",
    )
    parser.add_argument(
        "--env",
        metavar="ID",
        default=None,
        help="Gymnasium env id; the 2016 program used Pong-v0, and PongToy/Catch-v0 is a toy"
        f" that is learned in seconds (default: {DEFAULTS['env']})",
    )
    parser.add_argument(
        "--seed",
        metavar="N",
        type=_seed,
        default=None,
        help="seeds the weights, every env reset and every action draw (default: random,"
        " printed at start)",
    )
    parser.add_argument(
        "--num-cpus",
        metavar="N",
        type=_positive_int,
        default=None,
        help="CPUs of the local Ray (default: all); not with a cluster address",
    )
    parser.add_argument(
        "--learning-rate",
        metavar="LR",
        type=_positive_float,
        default=None,
        help=f"RMSProp step size (default: {DEFAULTS['learning_rate']:g})",
    )
    parser.add_argument(
        "--decay-rate",
        metavar="RATE",
        type=_positive_float,
        default=None,
        help="RMSProp decay of the running mean of squared gradients (default:"
        f" {DEFAULTS['decay_rate']:g})",
    )
    parser.add_argument(
        "--run-dir",
        metavar="DIR",
        type=Path,
        default=None,
        help="where the checkpoint and metrics go (default: runs/ and the start time)",
    )
    parser.add_argument(
        "--checkpoint-every",
        metavar="N",
        type=_positive_int,
        default=10,
        help="save a checkpoint every N updates (and always at the end or on Ctrl-C/SIGTERM)",
    )
    parser.add_argument(
        "--resume",
        metavar="PATH",
        type=Path,
        default=None,
        help="continue the run saved in PATH (a checkpoint.npz, or its run directory), with"
        " its settings",
    )
    watch = parser.add_argument_group("watching a trained agent (no training, no Ray)")
    watch.add_argument(
        "--evaluate",
        metavar="CHECKPOINT",
        type=Path,
        default=None,
        help="play games with the policy saved in CHECKPOINT (a checkpoint.npz, its run"
        " directory, or a policy file from python -m pong.export such as"
        " results/pong-v5/policy.npz) and print each score",
    )
    watch.add_argument(
        "--episodes",
        metavar="N",
        type=_positive_int,
        default=None,
        help="games to play (default: 1)",
    )
    watch.add_argument(
        "--record",
        metavar="FILE.gif",
        type=Path,
        default=None,
        help="also write the games as an animated GIF",
    )
    args = parser.parse_args(argv)
    if args.evaluate is None and (args.episodes is not None or args.record is not None):
        parser.error("argument --episodes/--record: only with --evaluate CHECKPOINT")
    if args.evaluate is not None and args.resume is not None:
        parser.error("argument --resume: not with --evaluate")
    if args.record is not None and args.record.suffix.lower() != ".gif":
        parser.error(f"argument --record: only .gif files are written, got {str(args.record)!r}")
    if args.decay_rate is not None and args.decay_rate >= 1:
        parser.error(f"argument --decay-rate: expected a number below 1, got {args.decay_rate}")
    if args.resume is not None and args.run_dir is not None:
        parser.error("argument --run-dir: a resumed run stays in its own directory")
    return args


_received: list[signal.Signals] = []  # the signals that stopped the run


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT and SIGTERM both stop the run the way Ctrl-C does."""
    _received.append(signal.Signals(signum))
    # KeyboardInterrupt, not an exception of our own: Ray's blocking calls turn
    # anything else raised by a signal handler into a SystemError.
    raise KeyboardInterrupt


def _handle_signals() -> None:
    # Installed explicitly: a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def resolve_run(args: argparse.Namespace) -> Checkpoint | None:
    """Fill in the run's settings and directory: from the checkpoint when resuming."""
    from pong.checkpoint import FILENAME, CheckpointError, load

    if args.resume is None:
        for name, value in DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
        if args.seed is None:
            args.seed = int(np.random.SeedSequence().generate_state(1)[0])
        if args.run_dir is None:
            args.run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        if (args.run_dir / FILENAME).exists():
            raise UsageError(
                f"{args.run_dir} already holds a run; continue it with --resume {args.run_dir}"
                " or choose another --run-dir"
            )
        return None
    try:
        checkpoint = load(args.resume)
    except CheckpointError as e:
        raise UsageError(f"--resume: {e}") from None
    saved = {**checkpoint.settings, "seed": checkpoint.seed}
    for name, value in saved.items():
        given = getattr(args, name, None)
        if given is not None and given != value:
            flag = "--" + name.replace("_", "-")
            raise UsageError(
                f"{flag}={given} differs from the resumed run's {value}; a resumed run keeps"
                " its settings"
            )
        setattr(args, name, value)
    args.run_dir = args.resume if args.resume.is_dir() else args.resume.parent
    return checkpoint


def evaluate(args: argparse.Namespace) -> int:
    """``--evaluate``: play games with a saved policy, print the scores, maybe record them."""
    from pong.checkpoint import CheckpointError, load
    from pong.env import check_env
    from pong.evaluate import play_games, write_gif
    from pong.model import Model

    try:
        checkpoint = load(args.evaluate, policy=True)
    except CheckpointError as e:
        raise UsageError(f"--evaluate: {e}") from None
    env_id = args.env or str(checkpoint.settings.get("env", DEFAULTS["env"]))
    try:
        check_env(env_id)
    except ValueError as e:
        raise UsageError(f"--env: {e}") from None
    if args.record is not None and not args.record.parent.is_dir():
        raise UsageError(f"--record: no such directory {args.record.parent}")
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**32)
    episodes = args.episodes or 1
    print(
        f"Playing {episodes} game{'s' * (episodes != 1)} of {env_id} with the policy of"
        f" {args.evaluate} (update {checkpoint.iteration}), seed {seed}",
        flush=True,
    )
    model = Model.from_weights(checkpoint.weights)
    scores, frames = play_games(model, env_id, episodes, seed, record=args.record is not None)
    for game, (won, lost, steps) in enumerate(scores, start=1):
        outcome = "won" if won > lost else "lost"
        print(f"Game {game}: {outcome} {won}-{lost} in {steps} steps", flush=True)
    mean = sum(won - lost for won, lost, _ in scores) / len(scores)
    wins = sum(won > lost for won, lost, _ in scores)
    print(f"Mean score {mean:+.2f} over {len(scores)} games; won {wins}", flush=True)
    if args.record is not None:
        write_gif(args.record, frames)
        print(f"Recorded {len(frames)} frames to {args.record}", flush=True)
    return 0


def train(args: argparse.Namespace, address: str | None, resume: Checkpoint | None) -> None:
    """Run updates until ``--iterations`` (or forever), one line each; checkpoint and log."""
    from pong.checkpoint import FILENAME, save
    from pong.cluster import cluster_summary
    from pong.metrics import MetricsLog
    from pong.train import Trainer

    until = (
        f"{args.iterations} update{'s' * (args.iterations != 1)}"
        if args.iterations
        else "until interrupted (Ctrl-C)"
    )
    print(
        f"Running on {cluster_summary(address)}: batch size {args.batch_size}, env {args.env},"
        f" seed {args.seed}, learning rate {args.learning_rate:g}, {until}",
        flush=True,
    )
    args.run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_path = args.run_dir / FILENAME
    resumed = f"; resuming after update {resume.iteration}" if resume else ""
    print(
        f"Run directory: {args.run_dir} (checkpoint every {args.checkpoint_every} updates,"
        f" metrics in updates.csv and episodes.csv){resumed}",
        flush=True,
    )
    trainer = Trainer(
        args.batch_size, args.env, args.seed, args.learning_rate, args.decay_rate, resume
    )
    counts = list(trainer.placement().values())
    print(
        f"Started {len(trainer.actors)} RolloutWorker actors on {len(counts)}"
        f" node{'s' * (len(counts) != 1)} ({' + '.join(map(str, counts))})",
        flush=True,
    )
    metrics = MetricsLog(args.run_dir, after=resume.iteration if resume else None)
    first, saved = trainer.iteration, trainer.iteration
    try:
        while args.iterations is None or trainer.iteration - first < args.iterations:
            stats = trainer.step()
            for message in stats.messages:
                print(message, flush=True)
            metrics.record(stats, trainer)
            print(
                f"Batch {stats.iteration} computed {stats.rollouts} rollouts ({stats.steps} steps)"
                f" in {stats.seconds:.2f} seconds ({stats.steps_per_second:.0f} steps/s),"
                f" running mean is {trainer.running_reward:.2f}",
                flush=True,
            )
            if trainer.iteration % args.checkpoint_every == 0:
                save(checkpoint_path, trainer.checkpoint())
                saved = trainer.iteration
    finally:
        metrics.close()
        if trainer.iteration > saved:
            save(checkpoint_path, trainer.checkpoint())
        best = trainer.best_running_reward
        print(
            f"Done: {trainer.iteration} updates ({trainer.iteration - first} in this run),"
            f" {trainer.episodes} episodes, best running mean"
            f" {'-' if best is None else f'{best:.2f}'}; checkpoint: {checkpoint_path}"
            f" (python driver.py --resume {args.run_dir})",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    import ray

    from pong.cluster import ClusterError, connect, resolve_address
    from pong.env import check_env

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _handle_signals()
    try:
        if args.evaluate is not None:
            try:
                return evaluate(args)
            except UsageError as e:
                print(f"{PROG}: error: {e}", file=sys.stderr)
                return 2
        try:
            resume = resolve_run(args)
            try:
                check_env(args.env)
            except ValueError as e:
                raise UsageError(f"--env: {e}") from None
        except UsageError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        address = resolve_address(args.address)
        try:
            connect(address, args.num_cpus)
        except ClusterError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
        _handle_signals()  # again: ray.init installs a SIGTERM handler of its own
        from pong.train import WorkerError

        try:
            train(args, address, resume)
        except WorkerError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        received = _received[0] if _received else signal.SIGINT
        print(f"Interrupted by {received.name}; shutting down Ray.", file=sys.stderr, flush=True)
        return 128 + received.value  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
    finally:
        ray.shutdown()  # a no-op when Ray was never started
        for sig, handler in previous.items():  # main() may be called from other code
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
