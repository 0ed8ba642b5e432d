"""``python -m pong.convert``: the command of ``pong.tools.convert``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.tools.convert import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.convert")
