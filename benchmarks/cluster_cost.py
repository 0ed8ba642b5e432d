"""What a cluster costs: the Ray loop on a two-node loopback cluster beside a local Ray.

Run:  python benchmarks/cluster_cost.py [--batch-size 10] [--updates 3] [--rounds 3]

Both use the same machine and the same CPUs: a local Ray with all of them,
and a cluster of two nodes started with `ray start` on loopback, half of the
CPUs each, with token authentication, as README's cluster section sets it up
(its processes live in a temporary directory of their own and are stopped by
it; no other Ray is touched). Each round runs both, in turn, from a fresh
start with the same seed: one warm-up update (actor start), then --updates
timed ones. Both play the very same games; only their timing differs. What the
cluster adds: a second raylet and object store, the model sent to the second
node every update and its gradients sent back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.common import machine, start_local_ray, table  # noqa: E402
from pong.core.train import Trainer  # noqa: E402
from pong.run.config import Config, hyperparameters  # noqa: E402
from tests.helpers import client_server, free_port, stop_processes_of  # noqa: E402

LOCAL_ONLY = ("RAY_prestart_worker_first_driver", "RAY_enable_metrics_collection")
RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def timed_updates(batch_size: int, env_id: str, updates: int) -> tuple[int, float]:
    """One warm-up update, then ``updates`` timed ones on the Ray this process joined."""
    trainer = Trainer(**hyperparameters(Config(batch_size=batch_size, env=env_id, seed=0)))
    trainer.update()
    timed = [trainer.update() for _ in range(updates)]
    return sum(u.steps for u in timed), sum(u.seconds for u in timed)


def loopback_cluster(cpus: int, temp_dir: Path) -> str:
    """Two nodes of ``cpus // 2`` CPUs on 127.0.0.1, token auth on, files in ``temp_dir``.

    Call it after a local Ray has run in this process: that made sure of a token.
    """
    # The token the local Ray before it used (~/.ray/auth_token): Ray loads one per process.
    os.environ["RAY_AUTH_MODE"] = "token"
    address = f"127.0.0.1:{free_port()}"
    common = ["--node-ip-address=127.0.0.1", f"--num-cpus={cpus // 2}", f"--temp-dir={temp_dir}"]
    # Ray's own defaults, as a user's cluster has them, not those driver.py gives a local Ray
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_ONLY}
    for args in (
        ["--head", f"--port={address.rpartition(':')[2]}", "--include-dashboard=false"],
        [f"--address={address}"],
    ):
        subprocess.run([RAY, "start", *args, *common], check=True, capture_output=True, env=env)
    while sum(n["Alive"] for n in _nodes(address)) < 2:
        time.sleep(1)
    return address


def _nodes(address: str) -> list[dict]:
    ray.init(address=address, logging_level="ERROR")
    try:
        return ray.nodes()
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpus = os.cpu_count() or 2
    print(machine())
    rows = []
    for round_ in range(1, args.rounds + 1):
        start_local_ray(cpus)
        steps, seconds = timed_updates(args.batch_size, args.env, args.updates)
        ray.shutdown()
        local = steps / seconds
        temp_dir, address = Path(tempfile.mkdtemp(prefix="rb", dir="/tmp")), ""
        try:
            address = loopback_cluster(cpus, temp_dir)
            ray.init(address=address, logging_level="ERROR")
            steps, seconds = timed_updates(args.batch_size, args.env, args.updates)
            ray.shutdown()
        finally:
            stop_processes_of(temp_dir, client_server(address) if address else temp_dir)
            shutil.rmtree(temp_dir, ignore_errors=True)
        cluster = steps / seconds
        rows.append([round_, f"{local:,.0f}", f"{cluster:,.0f}", f"{cluster / local:.2f}"])
        print(f"round {round_}: local {local:,.0f} steps/s, cluster {cluster:,.0f}", flush=True)
    print(
        f"\nbatch {args.batch_size}, {args.env}, {args.updates} timed updates a round,"
        f" {cpus} CPUs: a local Ray, and two loopback nodes of {cpus // 2} CPUs each\n"
    )
    print(
        table(["round", "local Ray steps/s", "loopback cluster steps/s", "cluster / local"], rows)
    )


if __name__ == "__main__":
    main()
