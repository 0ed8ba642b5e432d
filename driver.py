"""Train a Pong policy with policy gradients, playing the games on Ray actors.

Run:
    python driver.py --batch-size=10                 # local Ray, until Ctrl-C
    python driver.py --iterations=2 --seed=0         # two updates, reproducible
    python driver.py --redis-address=HOST:PORT       # an existing Ray cluster

Each update, one RolloutWorker actor per batch slot plays a game with the
current weights and returns its gradient; the driver adds the gradients up as
they arrive and applies one RMSProp step (pong/train.py). Expect one line per update:

  Batch 1 computed 10 rollouts (10423 steps) in 4.21 seconds (2476 steps/s), running mean is -20.97

A random policy loses 21-0 (running mean about -20.5 to -21); it takes
thousands of episodes before the running mean visibly climbs.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import numpy as np

from pong import model as model_defaults
from pong.env import DEFAULT_ENV

PROG = "driver.py"


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
        default=10,
        help="episodes per update; also the number of RolloutWorker actors",
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
        default=DEFAULT_ENV,
        help="Gymnasium env id (the 2016 program used Pong-v0)",
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
        default=model_defaults.learning_rate,
        help="RMSProp step size",
    )
    parser.add_argument(
        "--decay-rate",
        metavar="RATE",
        type=_positive_float,
        default=model_defaults.decay_rate,
        help="RMSProp decay of the running mean of squared gradients",
    )
    args = parser.parse_args(argv)
    if args.decay_rate >= 1:
        parser.error(f"argument --decay-rate: expected a number below 1, got {args.decay_rate}")
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


def train(args: argparse.Namespace, address: str | None) -> None:
    """Run updates until ``--iterations`` (or forever), one line each."""
    from pong.cluster import cluster_summary
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
    trainer = Trainer(args.batch_size, args.env, args.seed, args.learning_rate, args.decay_rate)
    counts = list(trainer.placement().values())
    print(
        f"Started {len(trainer.actors)} RolloutWorker actors on {len(counts)}"
        f" node{'s' * (len(counts) != 1)} ({' + '.join(map(str, counts))})",
        flush=True,
    )
    while args.iterations is None or trainer.iteration < args.iterations:
        stats = trainer.step()
        for message in stats.messages:
            print(message, flush=True)
        print(
            f"Batch {stats.iteration} computed {stats.rollouts} rollouts ({stats.steps} steps)"
            f" in {stats.seconds:.2f} seconds ({stats.steps_per_second:.0f} steps/s),"
            f" running mean is {trainer.running_reward:.2f}",
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().generate_state(1)[0])

    import ray

    from pong.cluster import ClusterError, connect, resolve_address
    from pong.env import check_env

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _handle_signals()
    try:
        try:
            check_env(args.env)
        except ValueError as e:
            print(f"{PROG}: error: --env: {e}", file=sys.stderr)
            return 2
        address = resolve_address(args.address)
        try:
            connect(address, args.num_cpus)
        except ClusterError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
        _handle_signals()  # again: ray.init installs a SIGTERM handler of its own
        train(args, address)
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
