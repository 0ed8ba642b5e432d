"""One line: the seconds a checkout takes to save and to load a checkpoint, to compare commits.

Run from the root of the checkout to time (a ``git worktree`` of another commit,
say), with this repository's environment:

    cd ../old && /path/to/pong/.venv/bin/python /path/to/pong/benchmarks/checkpoint_io.py

It saves and loads a full checkpoint (W1, W2 and their RMSProp caches, float64)
``--repeats`` times in a temporary directory, through the checkout's own
``pong.run.checkpoint.save`` and ``load`` (whatever file format that commit writes),
and prints the median of each and the file's size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.getcwd()  # the checkout to time, not necessarily this file's
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from pong.core.model import Model  # noqa: E402
from pong.run import checkpoint  # noqa: E402
from pong.run.config import Config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    model = Model(seed=0)
    cache = {k: np.abs(v) for k, v in model.weights.items()}
    state = checkpoint.Checkpoint(
        model.weights, cache, 1234, 12340, 12_345_678, -12.5, -11.0, Config(seed=0)
    )
    saves, loads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / checkpoint.FILENAME
        for _ in range(args.repeats):
            start = time.perf_counter()
            checkpoint.save(path, state)
            saves.append(time.perf_counter() - start)
            start = time.perf_counter()
            loaded = checkpoint.load(path)
            loads.append(time.perf_counter() - start)
        assert np.array_equal(loaded.weights["W1"], model.weights["W1"])
        size = path.stat().st_size
    print(
        f"{ROOT} {checkpoint.FILENAME}: save {statistics.median(saves) * 1e3:.1f} ms,"
        f" load {statistics.median(loads) * 1e3:.1f} ms (median of {args.repeats}),"
        f" {size / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
