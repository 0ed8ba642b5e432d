"""What separate hosts cost: the Ray loop on two network hosts of 1 CPU each beside one node of 2.

Run (as root):  python benchmarks/hosts_cost.py [--batch-size 10] [--updates 3] [--rounds 3]
                [--delay-ms 20] [--rate-mbit 1000] [--probes 8]

The hosts are Linux network namespaces on this machine (tests/hosts.py), each Ray node with
an address of its own, talking over a veth pair and a bridge, as the nodes of a real cluster
talk over a network. Each round runs, in turn, from a fresh driver with the same seed: a
local Ray of 2 CPUs, the two hosts, the two hosts with ``--delay-ms`` added to every packet
each way (netem, where the kernel has it), and the two hosts with their link limited to
``--rate-mbit`` each way (tbf). Each: one warm-up update (actor start), then --updates timed ones;
all play the very same games. Then, on the hosts, what a game costs in transfers: the
worker on the head and the one on the other host each play the same game (same seed, a
model put fresh each time, as every update puts one), alternately, --probes times; the
difference of the medians is what the second host spends receiving the model and sending
its gradient back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.common import machine, start_local_ray, table  # noqa: E402
from pong.core.model import Model  # noqa: E402
from pong.core.train import Trainer  # noqa: E402
from pong.run.config import Config, hyperparameters  # noqa: E402
from tests.helpers import stop_processes, token_env  # noqa: E402
from tests.hosts import SUBNET, Hosts, cannot_make_namespaces  # noqa: E402

RAY = str(Path(sys.executable).parent / "ray")
ADDRESS = f"{SUBNET}.1:6379"


def timed(trainer: Trainer, updates: int) -> tuple[int, float]:
    """One warm-up update, then ``updates`` timed ones: (steps, seconds)."""
    trainer.update()
    timed = [trainer.update() for _ in range(updates)]
    return sum(u.steps for u in timed), sum(u.seconds for u in timed)


def probe(trainer: Trainer, probes: int) -> dict[str, float]:
    """Seconds of one game on the head's worker and on the other host's, the same game."""
    here = ray.get_runtime_context().get_node_id()
    dealer = trainer.dealer
    [(near, _)] = [(i, n) for i, n in dealer.up.items() if n == here]
    [(far, _)] = [(i, n) for i, n in dealer.up.items() if n != here]
    seconds: dict[int, list[float]] = {near: [], far: []}
    for k in range(probes):
        for i in (near, far) if k % 2 else (far, near):
            model = Model(seed=0)
            model.weights = {n: w.copy() for n, w in trainer.model.weights.items()}
            start = time.perf_counter()
            result = ray.get(dealer.workers[i].compute_gradient.remote(ray.put(model), 12345))
            seconds[i].append(time.perf_counter() - start)
    grad = sum(a.nbytes for a in result.grad)
    model_bytes = sum(w.nbytes for w in trainer.model.weights.values())
    return {
        "near": statistics.median(seconds[near]),
        "far": statistics.median(seconds[far]),
        "grad_bytes": grad,
        "model_bytes": model_bytes,
    }


def join(args: argparse.Namespace) -> None:
    """Inside the head's namespace: the timed updates and the probes, as one JSON line."""
    ray.init(address=ADDRESS, logging_level="ERROR")
    trainer = Trainer(**hyperparameters(Config(batch_size=args.batch_size, env=args.env, seed=0)))
    steps, seconds = timed(trainer, args.updates)
    print(json.dumps({"steps": steps, "seconds": seconds, **probe(trainer, args.probes)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=20, help="0: no row with a delay")
    parser.add_argument("--rate-mbit", type=float, default=1000, help="0: no row with a limit")
    parser.add_argument("--probes", type=int, default=8)
    parser.add_argument("--join", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.join:
        return join(args)
    reason = cannot_make_namespaces()
    if reason:
        sys.exit(f"hosts_cost.py: {reason}")
    print(machine())
    tmp = Path(tempfile.mkdtemp(prefix="hb", dir="/tmp"))
    env = token_env(tmp)
    net, temp_dirs, rows = Hosts(), [], []
    try:
        for name, host, flags in (
            ("head", 1, ["--head", "--port=6379", "--include-dashboard=false"]),
            ("worker", 2, [f"--address={ADDRESS}"]),
        ):
            temp_dirs.append(Path(tempfile.mkdtemp(prefix="h", dir=tmp)))
            subprocess.run(
                [*net.add(name, host), RAY, "start", "--num-cpus=1", "--disable-usage-stats",
                 f"--node-ip-address={SUBNET}.{host}", f"--temp-dir={temp_dirs[-1]}", *flags],
                env=env, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        joined = [*net.run("head"), sys.executable, __file__, "--join"]
        joined += [f"--batch-size={args.batch_size}", f"--env={args.env}"]
        joined += [f"--updates={args.updates}", f"--probes={args.probes}"]
        links = {"as is": {}}
        if args.delay_ms:
            try:
                net.shape("worker", 2, delay_ms=args.delay_ms)
                links[f"{args.delay_ms:g} ms delay"] = {"delay_ms": args.delay_ms}
            except subprocess.CalledProcessError as e:
                print(f"no delay row: tc cannot add netem here ({e.stderr.strip()})")
        if args.rate_mbit:
            links[f"{args.rate_mbit:g} Mbit/s"] = {"rate_mbit": args.rate_mbit}
        for round_ in range(1, args.rounds + 1):
            start_local_ray(2)
            trainer = Trainer(
                **hyperparameters(Config(batch_size=args.batch_size, env=args.env, seed=0))
            )
            steps, seconds = timed(trainer, args.updates)
            ray.shutdown()
            local = steps / seconds
            found = {}
            for link, shape in links.items():
                net.shape("worker", 2, **shape)
                out = subprocess.run(joined, env=env, check=True, capture_output=True, text=True)
                found[link] = json.loads(out.stdout.strip().splitlines()[-1])
            net.shape("worker", 2)
            for link, f in found.items():
                rows.append(
                    [
                        round_,
                        link,
                        f"{local:,.0f}",
                        f"{f['steps'] / f['seconds']:,.0f}",
                        f"{f['steps'] / f['seconds'] / local:.2f}",
                        f"{f['near']:.2f}",
                        f"{f['far']:.2f}",
                        f"{(f['far'] - f['near']) * 1000:,.0f}",
                    ]
                )
                print(" | ".join(map(str, rows[-1])), flush=True)
        print(
            f"\nbatch {args.batch_size}, {args.env}, {args.updates} timed updates a round: one"
            f" local Ray of 2 CPUs, and two hosts of 1 CPU each (network namespaces), their link"
            f" as is or shaped each way; the model is {f['model_bytes'] / 1e6:.1f} MB, the probe"
            f" game's gradient {f['grad_bytes'] / 1e6:.2f} MB\n"
        )
        print(
            table(
                [
                    "round",
                    "link",
                    "local Ray steps/s",
                    "hosts steps/s",
                    "hosts / local",
                    "game on the head s",
                    "game on the other host s",
                    "transfers ms",
                ],
                rows,
            )  # fmt: skip
        )
    finally:
        stop_processes(net.processes())  # all: the head's Ray Client server names no temp dir
        net.remove()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
