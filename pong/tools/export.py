"""Export a run's policy as a small file to share: ``python -m pong export RUN OUT.safetensors``.

The float32 weights alone (5 MB, not a checkpoint's 20) with the run's counters and settings;
``driver.py --evaluate`` plays it and ``--start-from`` trains it further."""

import os
from collections.abc import Sequence

from pong.run.checkpoint import CheckpointError, load, save_policy
from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    about = "Export a run's policy as a small file to share."
    parser = OneLineParser(prog="python -m pong export", description=about)
    parser.add_argument("checkpoint", type=nonempty_path, help="a checkpoint or a run directory")
    parser.add_argument("output", type=nonempty_path, help="the .safetensors file to write")
    args = parser.parse_args(argv)
    output = args.output
    if output.suffix != ".safetensors":
        parser.error(f"argument output: must end in .safetensors, got {str(output)!r}")
    if not output.parent.is_dir():
        parser.refuse(f"argument output: no such directory {output.parent}")
    if os.path.lexists(output):  # said before the loading; save_policy makes sure
        parser.refuse(f"argument output: {output} exists; choose a new name")
    try:
        checkpoint = load(args.checkpoint, policy=True)
    except CheckpointError as e:
        parser.refuse(f"argument checkpoint: {e}")
    try:  # lands only if no file has the name, in one step: a second writer cannot win too
        size = save_policy(output, checkpoint, replace=False)
    except FileExistsError:
        parser.refuse(f"{output} exists; choose a new name", status=1)
    except OSError as e:
        parser.refuse(f"could not write {output}: {e.strerror or e}", status=1)
    running = "-" if checkpoint.running_mean is None else f"{checkpoint.running_mean:.2f}"
    print(
        f"Wrote {output} ({size / 1e6:.1f} MB): the float32 policy of update"
        f" {checkpoint.updates}, {checkpoint.games} games, running mean {running}"
    )
    return 0
