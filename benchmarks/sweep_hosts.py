"""What a sweep costs on two hosts that share no disk, with S3 storage, against the same grid
on one host with a local directory.

Run (as root):  python benchmarks/sweep_hosts.py [--env ALE/Pong-v5] [--trials 4]
                [--batch-size 2] [--updates 3] [--rounds 2]

Two ways, alternated round by round, each a fresh ``python -m pong sweep`` of the same grid
(seeds 1..--trials, one RolloutWorker per trial, so two trials at once on 2 CPUs): on this
machine with a local Ray of 2 CPUs and a local --sweep-dir, and on the hosts of
``tests.hosts.sweep_hosts`` (network namespaces of 1 CPU each; the worker host has its own
disk) with an S3 bucket on the head (moto's server) as the storage. Every update of every
trial is a checkpoint that reaches the storage, so the S3 way copies each trial's run
directory (a Pong checkpoint is 20.5 MB) over the hosts' network after every update. Both
ways play the very same games; the table gives the sweep's wall time, from the command's
start to its end, Ray's start included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import machine, table  # noqa: E402
from tests.helpers import token_env  # noqa: E402
from tests.hosts import S3_KEYS, S3_SERVER, cannot_make_namespaces, sweep_hosts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sweep(prefix: list[str], args: argparse.Namespace, where: str, env, *more: str) -> float:
    """Seconds of one ``python -m pong sweep`` of the grid into ``where``."""
    command = [*prefix, sys.executable, "-m", "pong", "sweep", f"--env={args.env}",
               f"--batch-size={args.batch_size}", f"--updates={args.updates}",
               "--watch-every=0", "--workers=1", "--seeds", *map(str, range(1, args.trials + 1)),
               f"--sweep-dir={where}", *more]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or f"Done: {args.trials} trials" not in done.stdout:
        sys.exit(f"sweep_hosts.py: the sweep failed:\n{done.stdout}\n{done.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    reason = cannot_make_namespaces()
    if reason:
        sys.exit(f"sweep_hosts.py: {reason}")
    print(machine())
    tmp = Path(tempfile.mkdtemp(prefix="sb", dir="/tmp"))
    env = {**token_env(tmp), **S3_KEYS}
    local_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    seconds: dict[str, list[float]] = {"one host, local directory": [], "two hosts, S3": []}
    try:
        with sweep_hosts(tmp, env) as (net, head, _):
            for r in range(args.rounds):
                for way in seconds if r % 2 == 0 else reversed(seconds):
                    if way.startswith("one"):
                        took = sweep([], args, str(tmp / f"local-{r}"), local_env, "--num-cpus=2")
                    else:
                        uri = f"s3://sweeps/round-{r}?{S3_SERVER}"
                        took = sweep(net.run("head"), args, uri, env, f"--address={head}")
                    seconds[way].append(took)
                    print(f"round {r + 1}: {way}: {took:.1f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{args.trials} trials of {args.updates} updates of {args.batch_size} games"
          f" ({args.env}), 1 worker each, 2 at once; {args.rounds} rounds\n")  # fmt: skip
    rows = [[way, " / ".join(f"{s:.1f}" for s in runs), f"{statistics.median(runs):.1f}"]
            for way, runs in seconds.items()]  # fmt: skip
    print(table(["way", "seconds, each round", "median"], rows))


if __name__ == "__main__":
    main()
