"""What starting a RolloutWorker costs: ours, and the same actor given the thread variables
through a runtime_env (this package's way before; a runtime_env makes Ray start each worker
process through a setup process of its own).

Run:  python benchmarks/worker_start.py [--workers 2] [--rounds 3] [--env ALE/Pong-v5]

Each round starts --workers actors of each kind in turn on one local Ray and waits until
every one has made its env; then reads each process's CPU time, private memory and BLAS
thread pool (threadpoolctl, where installed), and ends them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.common import machine, start_local_ray, table  # noqa: E402
from pong.core.worker import RolloutWorker  # noqa: E402
from pong.envs.make import env_maker  # noqa: E402

THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
KINDS = {"ours": {}, "with a runtime_env": {"runtime_env": {"env_vars": THREADS}}}


@ray.remote(num_cpus=0)
def process_facts(pid: int) -> tuple[float, float]:
    """CPU-seconds and private MB of process ``pid`` (on this node)."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/smaps_rollup") as f:
        kb = sum(int(line.split()[1]) for line in f if line.startswith("Private_"))
    return (int(ticks[11]) + int(ticks[12])) / os.sysconf("SC_CLK_TCK"), kb / 1024


def blas_threads(worker) -> str:
    """The worker's BLAS thread counts, read inside it."""

    def read(self) -> str:
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            return "-"
        return " ".join(str(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas")

    return ray.get(worker.__ray_call__.remote(read))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env", default="ALE/Pong-v5")
    args = parser.parse_args()
    start_local_ray(args.workers)
    make = env_maker(args.env)
    rows = []
    for round_ in range(1, args.rounds + 1):
        for kind, options in KINDS.items():
            start = time.perf_counter()
            workers = [RolloutWorker.options(**options).remote(make) for _ in range(args.workers)]
            pids = [info["pid"] for info in ray.get([w.describe.remote() for w in workers])]
            seconds = time.perf_counter() - start
            facts = ray.get([process_facts.remote(pid) for pid in pids])
            threads = {blas_threads(w) for w in workers}
            cpu = sum(f[0] for f in facts) / len(facts)
            mb = sum(f[1] for f in facts) / len(facts)
            rows.append([round_, kind, f"{seconds:.2f}", f"{cpu:.2f}", f"{mb:.0f}", *threads])
            for w in workers:
                ray.kill(w)
            time.sleep(1)  # their processes gone before the next start
    ray.shutdown()
    print(f"Machine: {machine()}")
    print(f"{args.workers} RolloutWorkers of {args.env} at once, {args.rounds} rounds\n")
    header = ["round", "worker", "s until all made their env", "CPU-s each", "private MiB each"]
    print(table([*header, "BLAS threads"], rows))


if __name__ == "__main__":
    main()
