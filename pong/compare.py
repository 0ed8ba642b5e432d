"""``python -m pong.compare``: the command of ``pong.tools.compare``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.tools.compare import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.compare")
