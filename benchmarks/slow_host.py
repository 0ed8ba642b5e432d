"""A slow host never holds the update back: driver.py on two network hosts, the worker host's
link limited to --rate-mbit each way, against one worker alone on this machine.

Run (as root):  python benchmarks/slow_host.py [--env ALE/Pong-v5] [--batch-size 4]
                [--updates 6] [--rate-mbit 10] [--rounds 2]

Three ways, alternated round by round, each a fresh ``driver.py`` run of the same seed: one
worker alone (a local Ray of 1 CPU); two hosts of 1 CPU each (network namespaces,
``tests/hosts.py``), one worker on each, their link as it is; and the same with the worker
host's link limited by tbf (at 10 Mbit/s the 10.2 MB model takes about 8 s to reach it).
Steps/s is that of the updates after the first (workers starting), from each run's
updates.csv; every way must end with the same checkpoint bytes.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import machine, table  # noqa: E402
from tests.helpers import stop_processes, token_env  # noqa: E402
from tests.hosts import SUBNET, Hosts, cannot_make_namespaces  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).parent / "ray")
ADDRESS = f"{SUBNET}.1:6379"


def run(prefix: list[str], args: argparse.Namespace, run_dir: Path, env, *more: str):
    """steps/s after the first update, and the checkpoint's bytes, of one driver.py run."""
    command = [*prefix, sys.executable, "driver.py", f"--env={args.env}", "--seed=1",
               f"--batch-size={args.batch_size}", f"--updates={args.updates}",
               "--watch-every=0", f"--run-dir={run_dir}", *more]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"slow_host.py: driver.py failed:\n{done.stdout}\n{done.stderr}")
    with open(run_dir / "updates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps = int(rows[-1]["steps"]) - int(rows[0]["steps"])  # the run's counts, summed so far
    speed = steps / sum(float(r["seconds"]) for r in rows[1:])
    nodes = " ".join(r["games_by_node"] for r in rows)
    return speed, (run_dir / "checkpoint.safetensors").read_bytes(), nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--rate-mbit", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    reason = cannot_make_namespaces()
    if reason:
        sys.exit(f"slow_host.py: {reason}")
    print(machine())
    tmp = Path(tempfile.mkdtemp(prefix="sh", dir="/tmp"))
    env = token_env(tmp)
    local = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    net = Hosts()
    ways = ["one worker alone", "two hosts", f"two hosts, {args.rate_mbit:g} Mbit/s"]
    speeds: dict[str, list[float]] = {w: [] for w in ways}
    checkpoints, played = set(), {}
    try:
        for name, host, flags in (
            ("head", 1, ["--head", "--port=6379", "--include-dashboard=false"]),
            ("worker", 2, [f"--address={ADDRESS}"]),
        ):
            subprocess.run(
                [*net.add(name, host), RAY, "start", "--num-cpus=1", "--disable-usage-stats",
                 f"--node-ip-address={SUBNET}.{host}",
                 f"--temp-dir={tempfile.mkdtemp(prefix='h', dir=tmp)}", *flags],
                env=env, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        for r in range(args.rounds):
            for way in ways if r % 2 == 0 else reversed(ways):
                directory = tmp / f"run-{r}-{ways.index(way)}"
                if way == ways[0]:
                    found = run([], args, directory, local, "--num-cpus=1")
                else:
                    net.shape("worker", 2, rate_mbit=args.rate_mbit if way == ways[2] else 0)
                    more = [f"--address={ADDRESS}", "--workers=2"]
                    found = run(net.run("head"), args, directory, env, *more)
                speeds[way].append(found[0])
                checkpoints.add(found[1])
                played[way] = found[2]
                print(f"round {r + 1}: {way}: {found[0]:,.0f} steps/s", flush=True)
        net.shape("worker", 2)
    finally:
        stop_processes(net.processes())
        net.remove()
        shutil.rmtree(tmp, ignore_errors=True)
    alone = statistics.mean(speeds[ways[0]])
    print(f"\nbatch {args.batch_size}, {args.env}, {args.updates} updates (the first not"
          f" timed), {args.rounds} rounds; every run's checkpoint the same bytes:"
          f" {len(checkpoints) == 1}\n")  # fmt: skip
    rows = [
        [w, " / ".join(f"{s:,.0f}" for s in speeds[w]), f"{statistics.mean(speeds[w]) / alone:.2f}"]
        for w in ways
    ]
    print(table(["way", "steps/s, each round", "of one worker alone"], rows))
    print(f"\ngames by node, the last {ways[2]} run: {played[ways[2]]}")


if __name__ == "__main__":
    main()
