"""``python -m pong.export``: the command of ``pong.tools.export``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.tools.export import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.export")
