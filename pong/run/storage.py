"""A sweep's files: a local directory every node mounts, or a URI pyarrow opens as Tune's
``storage_path`` (``s3://bucket/prefix``). Every file is hostile: read bounded, no link followed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pong.run.checkpoint import FILENAME, MAX_HEADER_BYTES, CheckpointError, header_update
from pong.run.errors import first_line
from pong.run.files import atomic_write, open_file

__all__ = ["CHECKPOINT_PREFIX", "Storage", "StorageError"]

CHECKPOINT_PREFIX = "checkpoint_"  # Tune's name for a reported checkpoint's directory
MAX_COPY = 2**30  # bytes a trial's run copied down may hold: a Pong run has about 30 MB


class StorageError(OSError):
    """A file of the storage that cannot be read or written; the message names it."""


class Storage:
    """A sweep's directory, local or remote: read, write and list files below it."""

    def __init__(self, where: str | os.PathLike) -> None:
        self.uri = str(where)  # as given: a URI with its query, or an absolute path
        self.remote = "://" in self.uri
        if not self.remote:
            self.uri = self.where = self.root = str(Path(where).absolute())
            return
        import pyarrow.fs

        try:
            self.fs, root = pyarrow.fs.FileSystem.from_uri(self.uri)
        except Exception as e:  # pyarrow's own kinds: ArrowInvalid, ArrowNotImplementedError
            raise StorageError(f"{where}: pyarrow cannot open it ({first_line(e)})") from None
        self.root, self.where = root.rstrip("/"), self.uri.split("?")[0].rstrip("/")  # no query
        if not self.root:  # the store's top: Tune would list (or write into) every bucket
            raise StorageError(f"{where}: names no bucket; give one: s3://bucket/prefix")

    def name(self, rel: str) -> str:
        """The path or URI of ``rel`` as a message names it (a URI without its query)."""
        return f"{self.where}/{rel}"

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def read(self, rel: str, max_bytes: int, *, head: bool = False) -> bytes:
        """``rel`` (``head``: its first ``max_bytes``); ``FileNotFoundError``, else StorageError."""
        try:
            if self.remote:
                with self.fs.open_input_stream(self._path(rel)) as f:
                    data = f.read(max_bytes + 1)
            else:  # refused unread if larger than ``max_bytes`` (unless ``head``)
                with open_file(self._path(rel), None if head else max_bytes) as f:
                    data = f.read(max_bytes)
        except FileNotFoundError:
            raise
        except OSError as e:  # NotRegularError's says what the file is: a link, a FIFO
            raise StorageError(f"{self.name(rel)}: {_said(e)}") from None
        if len(data) > max_bytes and not head:
            raise StorageError(f"{self.name(rel)}: more than {max_bytes:,} bytes")
        return data[:max_bytes]

    def write(self, rel: str, data: bytes) -> None:
        """``rel`` written whole (a link planted there is replaced, never written through)."""
        try:
            opened = self.fs.open_output_stream if self.remote else atomic_write
            with opened(self._path(rel)) as f:
                f.write(data)
        except OSError as e:
            raise StorageError(f"could not write {self.name(rel)}: {_said(e)}") from None

    def listing(self, rel: str = "") -> dict[str, bool]:
        """The names in directory ``rel``: whether each is a directory (a link is not followed)."""
        path = self._path(rel)
        if not self.remote:
            if os.path.islink(path) or not os.path.isdir(path):
                return {}
            with os.scandir(path) as entries:
                return {e.name: e.is_dir(follow_symlinks=False) for e in entries}
        from pyarrow.fs import FileSelector, FileType

        found = self.fs.get_file_info(FileSelector(path, allow_not_found=True))
        return {i.base_name: i.type == FileType.Directory for i in found}

    def directories(self, rel: str = "") -> list[str]:
        return sorted(name for name, is_dir in self.listing(rel).items() if is_dir)

    def prune(self, trial: str, keep: list[str]) -> list[str]:
        """Delete checkpoints of the trial but ``keep``, and planted links (Tune writes through)."""
        gone = []
        for name, is_dir in sorted(self.listing(trial).items()):
            if name.startswith(CHECKPOINT_PREFIX) and name not in keep:
                path = self._path(f"{trial}/{name}")
                if self.remote:
                    (self.fs.delete_dir if is_dir else self.fs.delete_file)(path)
                else:  # a link itself, never its target
                    (shutil.rmtree if is_dir else os.unlink)(path)
                gone.append(name)
        return gone

    def copy_down(self, rel: str, local: Path) -> None:
        """The files below ``rel`` copied into ``local``: a link refused, ``MAX_COPY`` at most."""
        if self.remote:  # an object store has no links
            from pyarrow.fs import LocalFileSystem, copy_files

            local.mkdir(parents=True, exist_ok=True)
            copy_files(self._path(rel), str(local.absolute()), self.fs, LocalFileSystem())
            return
        copied = 0
        for top, dirs, files in os.walk(self._path(rel)):
            into = local / os.path.relpath(top, self._path(rel))
            into.mkdir(parents=True, exist_ok=True)
            if links := [n for n in dirs + files if os.path.islink(os.path.join(top, n))]:
                raise StorageError(f"{top}/{links[0]}: a symbolic link; refusing to follow it")
            for name in files:
                with open_file(os.path.join(top, name)) as f, open(into / name, "xb") as out:
                    copied += os.fstat(f.fileno()).st_size
                    if copied > MAX_COPY:
                        raise StorageError(f"{self.name(rel)}: more than {MAX_COPY:,} bytes")
                    shutil.copyfileobj(f, out)

    def checkpoints(self, trial: str) -> list[str]:
        """The trial's readable checkpoints, latest update first (a resume renumbers from 0)."""
        found = []
        for name in filter(lambda n: n.startswith(CHECKPOINT_PREFIX), self.directories(trial)):
            rel = f"{trial}/{name}"
            try:  # the update, from the header alone
                data = self.read(f"{rel}/{FILENAME}", 8 + MAX_HEADER_BYTES, head=True)
                size = int.from_bytes(data[:8], "little")
                found.append((header_update(rel, data[8 : 8 + size]), rel))
            except (OSError, CheckpointError, KeyError, ValueError):
                pass  # none there, or damaged
        return [rel for _, rel in sorted(found, reverse=True)]

    def latest(self, trial: str) -> str | None:
        """The trial's ``trial/checkpoint_N`` of the latest update."""
        return next(iter(self.checkpoints(trial)), None)


def _said(error: OSError) -> str:
    """What an ``OSError`` says in a line (pyarrow's S3 errors run on past a request ID)."""
    return error.strerror or first_line(error).split(" (Request ID")[0]
