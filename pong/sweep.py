"""``python -m pong.sweep``: the command of ``pong.tools.sweep``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.tools.sweep import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.sweep")
