"""The errors a user can fix: each knows its one-line message and the driver's exit code."""

from __future__ import annotations

__all__ = ["PongError", "UsageError"]


class PongError(Exception):
    """A problem the user can fix; ``str(error)`` is one line and the driver exits with
    ``exit_code``."""

    exit_code = 1  # something outside the command line failed (a cluster, a worker)


class UsageError(PongError):
    """Bad input: a flag, a path or a file the user named."""

    exit_code = 2  # the shell's convention for a usage error, as argparse uses
