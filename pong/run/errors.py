"""The errors a user can fix, each said in one line, and the shell words a hint pastes."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NoReturn

__all__ = ["OneLineParser", "PongError", "RunFileError", "UsageError", "command", "first_line"]
__all__ += ["install", "quiet_when_piped", "require_install", "say_error", "writing"]


class PongError(Exception):
    """A problem the user can fix, said in one line; the driver exits with ``exit_code``."""

    exit_code = 1  # something outside the command line failed (a cluster, a worker)


class UsageError(PongError):
    """Bad input: a flag, a path or a file the user named."""

    exit_code = 2  # a usage error, as argparse's


class RunFileError(PongError):
    """A file the program writes could not be written (disk full, no permission, ...)."""


@contextmanager
def writing(path: Path, lost: str) -> Iterator[None]:
    """Turn an ``OSError`` while writing ``path`` into one line saying what was ``lost``."""
    try:
        yield
    except BrokenPipeError:  # stdout closed (`| head`), not the file: the caller stops quietly
        raise
    except OSError as e:
        raise RunFileError(f"could not write {path}: {e.strerror or e}; {lost}") from None


def quiet_when_piped(main: Callable[[], int], prog: str) -> NoReturn:
    """Exit with a command's code; ``... | head`` closing its output ends it quietly, as
    ``yes``, and output that cannot be written (``> /dev/full``) is one line."""
    try:
        try:
            code = main()
        except SystemExit as e:  # argparse's, after --help: that output is flushed here too
            code = e.code
        if sys.stdout is not None:  # None: closed before the start (>&-)
            sys.stdout.flush()  # here, not at exit, where a failure would be a traceback
    except BrokenPipeError:
        code = output_closed()
    except OSError as e:
        if e.filename is not None:  # a file of the command's own, not its output
            raise
        print(f"{prog}: error: could not write the output: {e.strerror or e}", file=sys.stderr)
        code = output_closed(1)
    sys.exit(code)


def output_closed(code: int = 128 + signal.SIGPIPE.value) -> int:
    """``code``, once stdout points at /dev/null: its buffer then fails nowhere at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def pasteable(path: str | os.PathLike) -> str:
    """``path`` quoted for the shell: relative below here (``./`` before a ``-``), else absolute."""
    relative = os.path.relpath(path)
    if relative.startswith("-"):
        relative = os.path.join(".", relative)
    return shell_word(os.path.abspath(path) if relative.startswith("..") else relative)


def shell_word(text: str) -> str:
    """``text`` as one word for bash or zsh, on one line: ``shlex.quote``, or ``$'...'``
    with each character that does not print as its bytes."""
    if text.isprintable():
        return shlex.quote(text)
    escaped = "".join(
        c.replace("\\", "\\\\").replace("'", "\\'")
        if c.isprintable()
        else "".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape"))
        for c in text
    )
    return f"$'{escaped}'"


def printable(path: str | os.PathLike) -> str:
    """``path`` to show in a line: as it is, or as a shell word if a character does not print."""
    return str(path) if str(path).isprintable() else shell_word(str(path))


def command(*words: str | os.PathLike, module: str | None = None) -> str:
    """A command to paste, for a hint: this Python, ``driver.py`` (or ``-m module``), ``words``;
    pasted anywhere (a path outside this directory is absolute).
    >>> command("--resume", "runs/a b").endswith("driver.py --resume 'runs/a b'")
    True
    """
    driver = Path(__file__).resolve().parents[2] / "driver.py"  # beside the package, if there
    program = f"-m {module}" if module else pasteable(driver) if driver.is_file() else "driver.py"
    args = " ".join(w if isinstance(w, str) and w.startswith("-") else pasteable(w) for w in words)
    return f"{pasteable(sys.executable)} {program} {args}"


def require_install(prog: str) -> None:
    """Exit with one line where a package the program needs is missing: it was started by a
    Python without the README's install (``python3``, not ``.venv/bin/python``)."""
    from importlib.util import find_spec

    needed = ("numpy", "ray", "gymnasium", "ale_py", "PIL", "tensorboardX", "safetensors")
    if missing := [m for m in needed if find_spec(m) is None]:  # pyproject.toml's dependencies
        said = f"{sys.executable} has no {missing[0]!r} module; run it with the Python of the"
        say_error(prog, f"{said} README's install (.venv/bin/python)")
        sys.exit(1)


def install(extra: str) -> str:
    """The command that installs the package's ``extra`` into this Python (run in the checkout)."""
    return f"{pasteable(sys.executable)} -m pip install -e '.[{extra}]'"


def say_error(prog: str, message: object) -> None:
    """``PROG: error: MESSAGE`` on stderr, on one line: a character that does not print (a
    newline in a path) shown as its escape."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(message))
    print(f"{prog}: error: {line}", file=sys.stderr, flush=True)


def first_line(error: BaseException) -> str:
    """The first line of what ``error`` says, or its type's name when it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, without argparse's usage line."""

    def error(self, message: str) -> NoReturn:
        self.refuse(f"{message} (see --help)")

    def print_help(self, file: IO[str] | None = None) -> None:  # argparse's drops write errors
        if (file := file or sys.stdout) is not None:  # None: stdout closed (>&-)
            file.write(self.format_help())

    def refuse(self, message: str, status: int = 2) -> NoReturn:
        """One line on what is wrong with a file the command line names (--help cannot help)."""
        say_error(self.prog, message)
        self.exit(status)
