"""The driver's pace against two emulators at once, and against an earlier commit's driver.

Run:  python benchmarks/pace.py [--against d150f31] [--rounds 4] [--batch-size 60]

Each round runs ``driver.py --batch-size=60 --updates=3 --seed=1`` twice, this
checkout's and the ``--against`` commit's (checked out into a temporary git worktree,
run with this checkout's Python and libraries), in alternating order, and takes the
steps/s of updates 2-3 (update 1 pays for the workers' start). Around every driver
run, two copies of the emulator alone step at once (``benchmarks.common``): the
most two games at a time could reach on this machine in that minute. The figures
are each run's steps/s against those two emulators, and the two commits' ratio in
the same round; and, over the same two updates, the cores (CPU seconds per second, read
from /proc) that the driver, its RolloutWorkers, the raylet, the GCS and Ray's other
processes used: on 2 cores, what is not the workers' is taken from the games.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import emulator_at_once, machine, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BATCH = re.compile(r"^Batch (\d+) computed \d+ rollouts \((\d+) steps\) in (\d+\.\d+) seconds")


KINDS = ("driver", "RolloutWorkers", "raylet", "gcs_server", "other Ray")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_by_kind(driver: int) -> dict[int, tuple[str, float]]:
    """CPU seconds so far of ``driver`` and every process it started, by pid: (kind, seconds)."""
    parent_of, found = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            fields = stat.rpartition(")")[2].split()
            parent_of[int(entry.name)] = int(fields[1])
            found[int(entry.name)] = (title, (int(fields[11]) + int(fields[12])) / TICK)
    ours, grew = {driver}, True
    while grew:
        more = {pid for pid, parent in parent_of.items() if parent in ours} - ours
        ours, grew = ours | more, bool(more)
    kinds = {}
    for pid in ours & found.keys():
        title, seconds = found[pid]
        kind = (
            "driver" if pid == driver
            else "RolloutWorkers" if title.startswith(b"ray::RolloutWorker")
            else "raylet" if title.endswith(b"/raylet")
            else "gcs_server" if title.endswith(b"/gcs_server")
            else "other Ray"
        )  # fmt: skip
        kinds[pid] = (kind, seconds)
    return kinds


def pace(checkout: Path, batch_size: int, run_dir: Path) -> tuple[float, dict[str, float]]:
    """Steps/s of updates 2 and 3 of a fresh run of ``checkout``'s driver, and the cores
    each kind of its processes used meanwhile (CPU seconds per second, from /proc)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.Popen(
        [sys.executable, "driver.py", f"--batch-size={batch_size}", "--updates=3",
         "--seed=1", f"--run-dir={run_dir}", "--watch-every=0"],
        cwd=checkout, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    later, marks = [], {}
    for line in proc.stdout:
        match = BATCH.match(line)
        if match and match[1] in ("1", "3"):  # the CPU times as update 2 starts and 3 ends
            marks[match[1]] = (time.monotonic(), cpu_by_kind(proc.pid))
        if match and int(match[1]) > 1:
            later.append(match)
    assert proc.wait() == 0, f"driver.py failed in {checkout}"
    (start, before), (end, after) = marks["1"], marks["3"]
    cores = dict.fromkeys(KINDS, 0.0)
    for pid, (kind, seconds) in after.items():
        cores[kind] += (seconds - before.get(pid, (kind, 0.0))[1]) / (end - start)
    return sum(int(m[2]) for m in later) / sum(float(m[3]) for m in later), cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="d150f31", help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=60)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pace-"))
    old = scratch / "old"
    subprocess.run(["git", "worktree", "add", "--detach", str(old), args.against], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    try:
        rows, ratios, fractions = [], [], {"this": [], args.against: []}
        for n in range(args.rounds):
            ways = [("this", ROOT), (args.against, old)]
            for name, checkout in ways if n % 2 == 0 else ways[::-1]:
                before = 2 * emulator_at_once("ALE/Pong-v5", 2, seconds=2.0, seed=n)
                steps, cores = pace(checkout, args.batch_size, scratch / f"{name}-{n}")
                after = 2 * emulator_at_once("ALE/Pong-v5", 2, seconds=2.0, seed=n + 100)
                fraction = steps / statistics.fmean([before, after])
                fractions[name].append(fraction)
                rows.append([n + 1, name, f"{steps:,.0f}", f"{(before + after) / 2:,.0f}",
                             f"{fraction:.2f}", *(f"{cores[k]:.2f}" for k in KINDS)])  # fmt: skip
            ratios.append(fractions["this"][-1] / fractions[args.against][-1])
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                       capture_output=True)  # fmt: skip
    print(f"Machine: {machine()}")
    print(f"driver.py --batch-size={args.batch_size} --updates=3 --seed=1, updates 2-3\n")
    cores = [f"{kind}' cores" if kind.endswith("s") else f"{kind}'s cores" for kind in KINDS]
    print(table(["round", "commit", "steps/s", "two emulators steps/s", "of the two", *cores],
                rows))  # fmt: skip
    for name, values in fractions.items():
        print(f"\n{name}: {min(values):.2f}-{max(values):.2f} of two emulators"
              f" (mean {statistics.fmean(values):.2f})", end="")  # fmt: skip
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"\nthis / {args.against}, round by round: {shown} (mean {statistics.fmean(ratios):.2f})")


if __name__ == "__main__":
    main()
