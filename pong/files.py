"""Writing files in directories others may share, so that no planted link redirects a write.

Run directories live on shared disks and in ``/tmp``, and policy files are made
to be passed around, so every file the package writes goes through here:

- ``atomic_write``: a whole file (checkpoint, policy, GIF, plot, a rewritten
  CSV). The temporary file is created exclusively, under an unpredictable name,
  in the target's directory, and renamed into place: a reader sees the old file
  or the new one, and a link planted at either name is replaced, never followed.
  With ``replace=False`` the file lands only if nothing has that name, in one
  step (a hard link), so two writers of one output cannot both win.
- ``open_regular``: a file kept open and added to (the metrics CSVs, the lock).
  It is opened without following a link, refused unless it is a regular file
  with no other name, and never blocks on a FIFO.
- ``create_new``: a file that must not exist yet (TensorBoard's event file).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

__all__ = ["atomic_write", "create_new", "open_regular"]


@contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", *, replace: bool = True, **kwargs
) -> Iterator[IO]:
    """Write ``path`` whole or not at all, through a temporary file only this call made.

    Args:
        path: the file to write.
        mode: ``"wb"`` or ``"w"`` (then ``kwargs`` go to ``open``, e.g. ``newline``).
        replace: whether an existing ``path`` is replaced; if not, ``FileExistsError``
            is raised and ``path`` is untouched, whoever made it, however recently.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> with atomic_write(out, "w") as f:
        ...     _ = f.write("hello")
        >>> out.read_text()
        'hello'
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # unpredictable
    # O_EXCL: never an existing file, never through a link; 0o666 less the umask, as open's.
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)  # a link at ``path`` is replaced, not followed
        else:
            os.link(tmp, path)  # fails with EEXIST if anything, a link included, has the name
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)


def open_regular(path: str | os.PathLike, mode: str = "a", **kwargs) -> IO:
    """Open ``path`` to append (``"a"``) or read and write (``"a+"``), creating it if need be.

    Raises:
        OSError: ``path`` is a symbolic link, not a regular file (a FIFO, a device,
            a directory), or a hard link to a file that has other names.
    """
    flags = os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    flags |= os.O_RDWR if "+" in mode else os.O_WRONLY
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno in _REFUSED:
            raise OSError(e.errno, _REFUSED[e.errno], path) from None
        raise
    try:
        _check_own(fd, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


_REFUSED = {
    errno.ELOOP: "a symbolic link; refusing to write through it",  # O_NOFOLLOW's answer
    errno.ENXIO: "not a regular file; refusing to write to it",  # a FIFO no one reads
}


def create_new(path: str | os.PathLike, mode: str = "xb") -> IO:
    """Create ``path``, which must not exist (not even as a dangling link)."""
    return open(path, mode)  # "x": O_CREAT | O_EXCL, which never follows a link


def _check_own(fd: int, path: str | os.PathLike) -> None:
    """Refuse a file that is not a regular file of one name (it would write elsewhere)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file; refusing to write to it", path)
    if info.st_nlink != 1:
        raise OSError(
            errno.EINVAL, "a hard link to a file with other names; refusing to write", path
        )
