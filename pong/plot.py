"""``python -m pong.plot``: the command of ``pong.tools.plot``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.tools.plot import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.plot")
