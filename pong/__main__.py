"""``python -m pong TOOL [ARGS]``: the tools that sweep, plot, compare and share runs."""

from pong.run.errors import require_install
from pong.run.stops import Stops, interrupted, stop_while_loading

if __name__ == "__main__":
    stop_while_loading()  # a Ctrl-C while the tool (the sweep: Ray) loads is one line
    require_install("python -m pong")

import importlib  # noqa: E402 (after the handler: no traceback)
import sys  # noqa: E402

from pong.run.errors import quiet_when_piped  # noqa: E402

TOOLS = {  # each tool's module, whose ``main(argv)`` is the command
    "sweep": ("pong.run.sweep", "train runs with different settings as Ray Tune trials"),
    "plot": ("pong.tools.plot", "draw runs' learning curves, or a policy's weights"),
    "compare": ("pong.tools.compare", "a table of runs side by side"),
    "metrics": ("pong.run.metrics", "summarize a run's metrics"),
    "export": ("pong.tools.export", "write a run's policy as a small file to share"),
}
USAGE = "usage: python -m pong TOOL [-h] [ARGS...]\n\ntools:\n" + "".join(
    f"  {name:<9}{about}\n" for name, (_, about) in TOOLS.items()
)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in TOOLS:
        known = ", ".join(TOOLS)
        print(f"python -m pong: error: no tool {argv[0]!r}; one of {known}", file=sys.stderr)
        return 2
    module = importlib.import_module(TOOLS[argv[0]][0])
    stops = Stops()  # loaded: a stop now unwinds, so no half-written file is left behind
    stops.install()
    try:
        return module.main(argv[1:])
    except KeyboardInterrupt:
        return interrupted(stops.received)


if __name__ == "__main__":
    tool = sys.argv[1] if sys.argv[1:2] and sys.argv[1] in TOOLS else ""  # the line names it
    quiet_when_piped(lambda: main(sys.argv[1:]), f"python -m pong {tool}".rstrip())
