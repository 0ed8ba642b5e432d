"""Reading and writing files in directories others may share: no link followed, no hang.

Run directories live on shared disks and in ``/tmp``, and policy files are passed
around, so every file the package reads or writes goes through here. ``open_file``
reads a regular file of bounded size; ``atomic_write`` writes a whole file through
a temporary one it made, renamed into place; ``open_regular`` opens a file to add
to; ``create_new`` makes a file that must not exist; ``Directory`` does all of them
relative to a directory opened once. None follows a link or blocks on a FIFO: a
link planted at ``RUN/watch``, or swapped in for an open run directory, gets an
``OSError`` naming it. Each takes ``dir_fd``, as ``os.open`` does.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, BinaryIO

__all__ = ["Directory", "atomic_write", "create_new", "open_file", "open_regular"]

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = {
    stat.S_ISDIR: "a directory",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
    stat.S_ISLNK: "a symbolic link",
}
TEMPORARY = re.compile(r"\.(.+)\.[0-9a-f]{16}\.tmp", re.DOTALL)  # atomic_write's, of group 1
_REFUSED = {
    errno.ELOOP: "a symbolic link; refusing to write through it",  # O_NOFOLLOW's answer
    errno.ENXIO: "not a regular file; refusing to write to it",  # a FIFO no one reads
    errno.ENOTDIR: "not a directory; refusing to write below it",
}


class NotRegularError(OSError):
    """A file to read that is no regular file of a bounded size; ``strerror`` says what it is."""


def open_file(
    path: str | os.PathLike, max_bytes: int | None = None, *, dir_fd: int | None = None
) -> BinaryIO:
    """``path`` opened to read in binary, if it is a regular file of at most ``max_bytes``;
    else ``NotRegularError`` (a link, FIFO, device, directory, socket or larger file), or
    the ``OSError`` opening it gave (``FileNotFoundError``, say)."""
    _check_regular(os.lstat(path, dir_fd=dir_fd), path, max_bytes)  # a device: never opened
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW, dir_fd=dir_fd)
    try:
        _check_regular(os.fstat(fd), path, max_bytes)  # the file opened, whatever replaced it
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(info: os.stat_result, path: str | os.PathLike, max_bytes: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((f"{kind}, " for test, kind in KINDS.items() if test(info.st_mode)), "")
        raise NotRegularError(errno.EINVAL, f"{kind}not a regular file", str(path))
    if max_bytes is not None and info.st_size > max_bytes:
        raise NotRegularError(
            errno.EFBIG,
            f"{info.st_size:,} bytes, more than the {max_bytes:,} ({max_bytes / 2**20:g} MiB)"
            " such a file can have",
            str(path),
        )


@contextmanager
def atomic_write(
    path: str | os.PathLike,
    mode: str = "wb",
    *,
    replace: bool = True,
    dir_fd: int | None = None,
    **kwargs,
) -> Iterator[IO]:
    """Write ``path`` whole or not at all, through a temporary file only this call made.

    The temporary file, ``.NAME.<16 hex digits>.tmp`` beside ``path``, is created
    exclusively and renamed into place: a reader sees the old file or the new one.
    ``mode`` is ``"wb"`` or ``"w"`` (then ``kwargs`` go to ``open``). With
    ``replace=False`` the file lands only if nothing has its name, in one step (a
    hard link), else ``FileExistsError``: of two writers, one wins. With ``dir_fd``
    a link at ``path`` is refused (an ``OSError`` naming it); without, replaced.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> with atomic_write(out, "w") as f:
        ...     _ = f.write("hello")
        >>> out.read_text()
        'hello'
    """
    path = Path(path)
    if dir_fd is not None and replace and _is_link(path, dir_fd):
        raise OSError(errno.ELOOP, _REFUSED[errno.ELOOP], str(path))
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # unpredictable
    # O_EXCL: never an existing file, never through a link; 0o666 less the umask, as open's.
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | NOFOLLOW
    fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if replace:  # a link put at ``path`` meanwhile is replaced, not followed
            os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:  # fails with EEXIST if anything, a link included, has the name
            os.link(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def open_regular(
    path: str | os.PathLike, mode: str = "a", *, dir_fd: int | None = None, **kwargs
) -> IO:
    """Open ``path`` to append (``"a"``) or read and write (``"a+"``), creating it if need be;
    an ``OSError`` if it is a link, no regular file, or a hard link with other names."""
    flags = os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | NOFOLLOW
    flags |= os.O_RDWR if "+" in mode else os.O_WRONLY
    fd = _open(path, flags, dir_fd)
    try:
        info = os.fstat(fd)  # another name of the file, or no file, would write elsewhere
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, _REFUSED[errno.ENXIO], str(path))
        if info.st_nlink != 1:
            message = "a hard link to a file with other names; refusing to write"
            raise OSError(errno.EINVAL, message, str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def create_new(path: str | os.PathLike, mode: str = "xb", *, dir_fd: int | None = None) -> IO:
    """Create ``path``, which must not exist (not even as a dangling link)."""
    # O_EXCL never follows a link, dangling or not.
    fd = _open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | NOFOLLOW, dir_fd)
    return os.fdopen(fd, mode.replace("x", "w"))


def _open(path: str | os.PathLike, flags: int, dir_fd: int | None) -> int:
    """``os.open``, with a link or FIFO in the way named as what it is."""
    try:
        return os.open(path, flags, 0o666, dir_fd=dir_fd)
    except OSError as e:
        code = e.errno
        if code == errno.ENOTDIR and _is_link(path, dir_fd):  # O_DIRECTORY's answer to a link
            code = errno.ELOOP
        if code in _REFUSED:
            raise OSError(code, _REFUSED[code], str(path)) from None
        raise


def _is_link(path: str | os.PathLike, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


class Directory:
    """A directory opened once (``fd``, owned; ``path`` names it in messages): every name
    below it is made, opened and written relative to ``fd``, no link followed.

    Example:
        >>> import tempfile, pathlib
        >>> run = Directory.open(pathlib.Path(tempfile.mkdtemp()) / "run", create=True)
        >>> with run.write("a.txt", "w") as f:
        ...     _ = f.write("hello")
        >>> run.names(), run.subdirectory("watch").names()
        (['a.txt'], [])
        >>> run.close()
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def open(cls, path: Path, *, create: bool = False, dir_fd: int | None = None) -> Directory:
        """The directory ``path``, made first if ``create`` (its parents too, unless in
        ``dir_fd``). An ``OSError`` if there is none, or a link or a file is there."""
        where = path if dir_fd is None else path.name  # in ``dir_fd``: its name there
        with _naming(path):
            if create:
                if dir_fd is None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                with suppress(FileExistsError):
                    os.mkdir(where, dir_fd=dir_fd)
            return cls(path, _open(where, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW, dir_fd))

    def __repr__(self) -> str:
        return f"Directory({str(self.path)!r})"

    def subdirectory(self, name: str) -> Directory:
        """The directory ``name`` in this one, made if need be; a link there is refused."""
        return Directory.open(self.path / name, create=True, dir_fd=self.fd)

    @contextmanager
    def write(self, name: str, mode: str = "wb", **kwargs) -> Iterator[IO]:
        """``atomic_write`` of the file ``name`` in this directory (a link there is refused)."""
        with _naming(self.path / name), atomic_write(name, mode, dir_fd=self.fd, **kwargs) as f:
            yield f

    def append(self, name: str, mode: str = "a", **kwargs) -> IO:
        """``open_regular`` of the file ``name`` in this directory."""
        with _naming(self.path / name):
            return open_regular(name, mode, dir_fd=self.fd, **kwargs)

    def create(self, name: str) -> IO:
        """``create_new`` of the file ``name`` in this directory, to write in binary."""
        with _naming(self.path / name):
            return create_new(name, dir_fd=self.fd)

    def read(self, name: str, max_bytes: int | None = None) -> BinaryIO:
        """``open_file`` of the file ``name`` in this directory."""
        with _naming(self.path / name):
            return open_file(name, max_bytes, dir_fd=self.fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """What has ``name`` here, without following a link (``None``: nothing)."""
        try:
            return os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        """The names in this directory, sorted."""
        return sorted(os.listdir(self.fd))

    def remove(self, name: str) -> None:
        """Remove the file ``name`` from this directory, if it is there."""
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def remove_stale_temporaries(self, *names: str) -> list[str]:
        """Remove the temporary files ``atomic_write`` of ``names`` (any, if none given) left
        here when killed outright; the names removed.

        Only regular files named exactly as its temporaries go (a link is left, and
        nothing is followed), each as best it can be. Call it only while holding
        the lock that keeps every other writer out: their temporaries would go too.
        """
        removed = []
        for name in self.names():
            match = TEMPORARY.fullmatch(name)
            if match and (not names or match[1] in names):
                info = self.lstat(name)
                if info is not None and stat.S_ISREG(info.st_mode):
                    with suppress(OSError):
                        os.unlink(name, dir_fd=self.fd)
                        removed.append(name)
        return removed

    def close(self) -> None:
        """Close the descriptor; closing twice is harmless."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An ``OSError`` that names the file by its whole path, not its name in the directory."""
    try:
        yield
    except OSError as e:
        e.filename = str(path)
        raise
