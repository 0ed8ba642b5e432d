"""``python -m pong.metrics``: the command of ``pong.run.metrics``, by its short name."""

from pong.run.errors import quiet_when_piped
from pong.run.metrics import main

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.metrics")
