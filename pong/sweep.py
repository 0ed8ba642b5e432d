"""``python -m pong.sweep``: the command of ``pong.tools.sweep``, by its short name."""

from pong.run.stops import stop_while_loading

if __name__ == "__main__":
    stop_while_loading()

from pong.run.errors import quiet_when_piped  # noqa: E402 (after the handler: no traceback)
from pong.tools.sweep import main  # noqa: E402

if __name__ == "__main__":
    quiet_when_piped(main, "python -m pong.sweep")
