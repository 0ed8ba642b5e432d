"""Reading files others may have made, so that no file can cost more than its honest size.

Policy files are made to be shared and run directories are copied about, so a
file read here may claim anything. The rules are those of careful weight
loaders such as safetensors:

- ``open_file``: a file is opened without blocking (a FIFO never hangs the
  reader) and refused unless it is a regular file, of at most ``max_bytes``.
- ``open_npz``: an ``.npz`` archive of at most ``MAX_NPZ_BYTES``, whose zip
  directory is small and lists only ``.npy`` members, each once, stored or
  deflated, unencrypted. ``Archive.read`` reads a member's ``.npy`` header
  (bounded) and hands it to the caller, who refuses a dtype or shape it did not
  expect; the header must account for the member's declared size exactly, and
  only then is that many bytes read (zipfile checks the CRC at their end) and
  viewed as an array. Nothing is unpickled.

So reading an archive costs about the memory of the arrays the caller accepted,
whatever the file claims. Every problem is a ``ReadError``, one line long.
"""

from __future__ import annotations

import io
import math
import os
import stat
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

__all__ = [
    "MAX_NPZ_BYTES",
    "Archive",
    "Header",
    "NpyFileError",
    "ReadError",
    "open_npz",
    "open_file",
]

MAX_NPZ_BYTES = 64 * 2**20  # a checkpoint is about 20.5 MB, a policy file 5
MAX_DIRECTORY_BYTES = 2**16  # the zip's central directory: about 60 bytes a member
MAX_MEMBERS = 16
MAX_HEADER_BYTES = 4096  # an .npy header; NumPy writes 128 bytes for these arrays
CHUNK = 2**20  # array data is read this much at a time
ZIP_END = struct.Struct("<4s4H2LH")  # the end of the zip's central directory, with no comment
ZIP64_LOCATOR = b"PK\x06\x07"  # would point zipfile at a directory of another size
# What zipfile, zlib and NumPy's header parser raise for a damaged file.
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error)
DAMAGED += (NotImplementedError, RuntimeError, OverflowError, SyntaxError, TypeError)
DAMAGED += (tokenize.TokenError,)  # NumPy tokenizes an .npy header of format 1.0
KINDS = {
    stat.S_ISDIR: "a directory",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


class ReadError(ValueError):
    """A file that cannot be read as what it should be; the message is one line, without
    the path (the caller names the file)."""


class NpyFileError(ReadError):
    """A single ``.npy`` array where an ``.npz`` archive was expected."""


@dataclass(frozen=True)
class Header:
    """What an ``.npy`` member says it holds."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """The bytes of data this header describes (exact: Python's integers)."""
        return math.prod(self.shape) * self.dtype.itemsize


def open_file(path: str | os.PathLike, max_bytes: int | None = None) -> BinaryIO:
    """``path`` opened to read in binary, if it is a regular file of at most ``max_bytes``.

    Raises:
        FileNotFoundError: no such file.
        ReadError: a FIFO, device, directory or socket; a larger file; or any other
            ``OSError`` (its reason).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        _check_regular(os.stat(path), max_bytes)  # a device is refused before it is opened
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO put there since never blocks
    except FileNotFoundError:
        raise
    except OSError as e:
        raise ReadError(e.strerror or str(e)) from None
    try:
        _check_regular(os.fstat(fd), max_bytes)  # the file opened, whatever replaced it
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(info: os.stat_result, max_bytes: int | None) -> None:
    for test, kind in KINDS.items():
        if test(info.st_mode):
            raise ReadError(f"{kind}, not a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise ReadError("not a regular file")
    if max_bytes is not None and info.st_size > max_bytes:
        raise ReadError(
            f"{info.st_size:,} bytes, more than the {max_bytes:,} ({max_bytes / 2**20:g} MiB)"
            " such a file can have"
        )


@contextmanager
def open_npz(path: str | os.PathLike) -> Iterator[Archive]:
    """The ``.npz`` archive at ``path``, its size and directory checked, to read arrays from.

    Raises:
        FileNotFoundError: no such file.
        NpyFileError: the file is a single ``.npy`` array.
        ReadError: anything else that makes it no readable ``.npz`` file.
    """
    with open_file(path, MAX_NPZ_BYTES) as f:
        with _damaged():
            _check_directory(f)
            archive = zipfile.ZipFile(f)
        with archive:
            yield Archive(archive)


def _check_directory(f: BinaryIO) -> None:
    """Refuse a file whose zip directory, as zipfile would find it, is not small."""
    if f.read(6) == b"\x93NUMPY":
        raise NpyFileError("a single .npy array, not an .npz archive")
    size = f.seek(0, os.SEEK_END)
    if size < ZIP_END.size:
        raise ReadError("not a NumPy .npz file")
    f.seek(size - ZIP_END.size)
    end = ZIP_END.unpack(f.read(ZIP_END.size))
    if end[0] != b"PK\x05\x06" or end[-1] != 0:  # zipfile looks here first; .npz has no comment
        raise ReadError("not a NumPy .npz file (no zip directory at its end)")
    if end[4] > MAX_MEMBERS or end[5] > MAX_DIRECTORY_BYTES:
        raise ReadError(f"a zip directory of {end[4]:,} members in {end[5]:,} bytes")
    if size >= ZIP_END.size + 20:
        f.seek(size - ZIP_END.size - 20)
        if f.read(4) == ZIP64_LOCATOR:
            raise ReadError("a zip64 directory, which no file this small needs")


class Archive:
    """An open ``.npz`` archive; ``names`` are its arrays, ``read`` reads one."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self._zip = archive
        self._members = _members(archive)
        self.names = frozenset(self._members)

    def read(self, name: str, check: Callable[[Header], None]) -> np.ndarray:
        """The array ``name``, read only once ``check`` has accepted its header.

        ``check`` raises to refuse a header; its error goes through unchanged.

        Raises:
            ReadError: the member is damaged, or holds Python objects.
        """
        info = self._members[name]
        with _damaged(name):
            member = self._zip.open(info)
        with member:
            with _damaged(name):
                header, header_bytes = _header(member)
            check(header)
            if header_bytes + header.nbytes != info.file_size:
                raise ReadError(
                    f"{name}: its header says {header_bytes + header.nbytes:,} bytes,"
                    f" its zip entry {info.file_size:,}"
                )
            with _damaged(name):
                return _data(member, header)


def _members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by array name, each checked to be an ``.npy`` we may open."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ReadError(f"{len(infos):,} members in its zip directory")
    members = {}
    for info in infos:
        name = info.filename.removesuffix(".npy")
        if name == info.filename or name in members:
            what = "twice" if name in members else "not an .npy array"
            raise ReadError(f"member {info.filename!r} is {what}")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ReadError(f"{name}: compressed with method {info.compress_type}")
        if info.flag_bits & 0x61:  # encrypted, patched or strongly encrypted
            raise ReadError(f"{name}: encrypted")
        members[name] = info
    return members


def _header(member: BinaryIO) -> tuple[Header, int]:
    """An ``.npy`` member's header, and its length in bytes; at most ``MAX_HEADER_BYTES``."""
    version = np.lib.format.read_magic(member)
    if version not in ((1, 0), (2, 0)):
        raise ReadError(f".npy format version {version}")
    length_format = "<H" if version == (1, 0) else "<I"
    prefix = _exactly(member, struct.calcsize(length_format))
    (length,) = struct.unpack(length_format, prefix)
    if length > MAX_HEADER_BYTES:
        raise ReadError(f"an .npy header of {length:,} bytes")
    text = io.BytesIO(prefix + _exactly(member, length))
    read = np.lib.format.read_array_header_1_0
    if version == (2, 0):
        read = np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read(text, max_header_size=MAX_HEADER_BYTES)
    if any(n < 0 for n in shape):
        raise ReadError(f"a negative shape {shape}")
    if dtype.hasobject:
        raise ReadError("holds Python objects, which are never unpickled")
    return Header(shape, fortran_order, dtype), 8 + len(prefix) + length


def _exactly(member: BinaryIO, size: int) -> bytes:
    data = member.read(size)
    if len(data) != size:
        raise ReadError("ends inside its .npy header")
    return data


def _data(member: BinaryIO, header: Header) -> np.ndarray:
    """The data ``header`` describes, read in chunks into one buffer, then EOF (and CRC) checked."""
    data = bytearray(header.nbytes)
    view, filled = memoryview(data), 0
    while filled < len(data):
        chunk = member.read(min(CHUNK, len(data) - filled))
        if not chunk:
            raise ReadError("ends before its data does")
        view[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    if member.read(1):  # never: the sizes agreed; reading to the end checks the CRC
        raise ReadError("goes on after its data")
    array = np.frombuffer(data, dtype=header.dtype)
    if header.fortran_order:
        return array.reshape(header.shape[::-1]).transpose()
    return array.reshape(header.shape)


@contextmanager
def _damaged(name: str | None = None) -> Iterator[None]:
    """Turn what a damaged archive makes zipfile, zlib or NumPy raise into a ``ReadError``."""
    try:
        yield
    except ReadError as e:
        if name is None:
            raise
        raise ReadError(f"{name}: {e}") from None
    except DAMAGED as e:
        reason = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, tokenize.TokenError):  # its text is a tuple
            reason = f"an .npy header that does not parse ({e.args[0]})"
        if isinstance(e, zipfile.BadZipFile) and "not a zip file" in reason.lower():
            reason = "not a NumPy .npz file"
        raise ReadError(f"{name}: {reason}" if name else reason) from None
