"""Reading and writing files in directories others may share: no link followed, no hang.

Run directories live on shared disks and in ``/tmp``, and policy files are passed around, so
every file the package reads or writes goes through here (``Directory``: relative to a
directory opened once). A link planted at ``RUN/watch`` gets an ``OSError`` naming it.
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

PathLike = str | os.PathLike
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = {"d": "a directory", "p": "a FIFO", "c": "a character device", "b": "a block device"}
KINDS |= {"s": "a socket", "l": "a symbolic link"}  # by the letter stat.filemode gives each
TEMPORARY = re.compile(r"\.(.+)\.[0-9a-f]{16}\.tmp", re.DOTALL)  # atomic_write's, of group 1
_REFUSED = {
    errno.ELOOP: "a symbolic link; refusing to write through it",  # O_NOFOLLOW's answer
    errno.ENXIO: "not a regular file; refusing to write to it",  # a FIFO no one reads
    errno.ENOTDIR: "not a directory; refusing to write below it",
}


class NotRegularError(OSError):
    """A file to read that is no regular file of a bounded size; ``strerror`` says what it is."""


def open_file(path: PathLike, max_bytes: int | None = None, *, dir_fd=None) -> BinaryIO:
    """``path`` opened to read in binary if a regular file of at most ``max_bytes``, else
    ``NotRegularError`` (a device is never opened), or the ``OSError`` opening it gave."""
    _check_regular(os.lstat(path, dir_fd=dir_fd), path, max_bytes)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW, dir_fd=dir_fd)
    try:
        _check_regular(os.fstat(fd), path, max_bytes)  # the file opened, whatever replaced it
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(info: os.stat_result, path: PathLike, max_bytes: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = KINDS.get(stat.filemode(info.st_mode)[0])
        message = f"{kind}, not a regular file" if kind else "not a regular file"
        raise NotRegularError(errno.EINVAL, message, str(path))
    if max_bytes is not None and info.st_size > max_bytes:
        size = f"{info.st_size:,} bytes, more than the {max_bytes:,} ({max_bytes / 2**20:g} MiB)"
        raise NotRegularError(errno.EFBIG, f"{size} such a file can have", str(path))


@contextmanager
def atomic_write(path: PathLike, mode="wb", *, replace=True, dir_fd=None, **kwargs) -> Iterator[IO]:
    """Write ``path`` whole or not at all, through a new temporary ``.NAME.<16 hex>.tmp``
    renamed into place (``kwargs`` go to ``open``). ``replace=False``: only if nothing has the
    name, else ``FileExistsError``. With ``dir_fd`` a link at ``path`` is refused, else replaced."""
    path = Path(path)
    if dir_fd is not None and replace and _is_link(path, dir_fd):
        raise OSError(errno.ELOOP, _REFUSED[errno.ELOOP], str(path))
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # unpredictable
    try:  # O_EXCL: never an existing file, never through a link
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | NOFOLLOW, 0o666, dir_fd=dir_fd)
    except OSError as e:  # named as the file asked for, not as our temporary one
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            if replace:  # a link put at ``path`` meanwhile is replaced, not followed
                os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:  # a hard link: EEXIST if anything has the name, all at once
                os.link(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as e:  # a directory at ``path``, say: named as asked for, as above
            raise OSError(e.errno, e.strerror, str(path)) from None
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def open_regular(path: PathLike, mode: str = "a", *, dir_fd=None, **kwargs) -> IO:
    """Open ``path`` to append (``"a"`` or ``"a+"``), made if need be; an ``OSError`` if it is a
    link, no regular file, or a hard link with other names."""
    flags = os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | NOFOLLOW
    fd = _open(path, flags | (os.O_RDWR if "+" in mode else os.O_WRONLY), dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, _REFUSED[errno.ENXIO], str(path))
        if info.st_nlink != 1:  # its other name would see what is written
            message = "a hard link to a file with other names; refusing to write"
            raise OSError(errno.EINVAL, message, str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def create_new(path: PathLike, mode: str = "xb", *, dir_fd: int | None = None) -> IO:
    """Create ``path``, which must not exist (not even as a dangling link: O_EXCL follows none)."""
    fd = _open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | NOFOLLOW, dir_fd)
    return os.fdopen(fd, mode.replace("x", "w"))


def _open(path: PathLike, flags: int, dir_fd: int | None) -> int:
    """``os.open``, with a link or FIFO in the way named as what it is."""
    try:
        return os.open(path, flags, 0o666, dir_fd=dir_fd)
    except OSError as e:  # ENOTDIR: O_DIRECTORY's answer to a link
        code = errno.ELOOP if e.errno == errno.ENOTDIR and _is_link(path, dir_fd) else e.errno
        if code in _REFUSED:
            raise OSError(code, _REFUSED[code], str(path)) from None
        raise


def _is_link(path: PathLike, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


class Directory:
    """A directory opened once (``fd``, owned; ``path`` names it in messages): every name
    below it is made, opened and written relative to ``fd``, no link followed, and an
    ``OSError`` names the file by its whole path."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def open(cls, path: Path, *, create: bool = False, dir_fd: int | None = None) -> Directory:
        """The directory ``path``, made first if ``create`` (its parents too, unless in
        ``dir_fd``). An ``OSError`` if there is none, or a link or a file is there."""
        where = path if dir_fd is None else path.name
        with _naming(path):
            if create:
                if dir_fd is None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                with suppress(FileExistsError):
                    os.mkdir(where, dir_fd=dir_fd)
            return cls(path, _open(where, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW, dir_fd))

    def subdirectory(self, name: str) -> Directory:
        return Directory.open(self.path / name, create=True, dir_fd=self.fd)

    @contextmanager
    def write(self, name: str, mode: str = "wb", **kwargs) -> Iterator[IO]:
        with _naming(self.path / name), atomic_write(name, mode, dir_fd=self.fd, **kwargs) as f:
            yield f

    def append(self, name: str, mode: str = "a", **kwargs) -> IO:
        with _naming(self.path / name):
            return open_regular(name, mode, dir_fd=self.fd, **kwargs)

    def create(self, name: str) -> IO:
        with _naming(self.path / name):
            return create_new(name, dir_fd=self.fd)

    def read(self, name: str, max_bytes: int | None = None) -> BinaryIO:
        with _naming(self.path / name):
            return open_file(name, max_bytes, dir_fd=self.fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """What has ``name`` here, without following a link (``None``: nothing)."""
        with suppress(FileNotFoundError):
            return os.lstat(name, dir_fd=self.fd)
        return None

    def rename(self, old: str, new: str) -> None:
        with _naming(self.path / old):
            os.rename(old, new, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def remove(self, name: str) -> None:
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def remove_stale_temporaries(self, *names: str) -> list[str]:
        """Remove the temporaries of ``names`` that a killed ``atomic_write`` left, regular
        files only, and say which. Only holding the lock that keeps out every other writer of
        ``names``: their temporaries would go too."""
        removed = []
        for name in self.names():
            match = TEMPORARY.fullmatch(name)
            info = self.lstat(name) if match and match[1] in names else None
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
    try:
        yield
    except OSError as e:
        e.filename = str(path)
        raise
