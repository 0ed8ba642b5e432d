"""Where a sweep keeps its files: a local directory (one machine, or a filesystem every node
mounts) or a URI that pyarrow opens (``s3://bucket/prefix``, ``gs://...``), as Tune's
``storage_path`` takes. Every file is read as hostile: bounded, no link followed.

A sweep directory ``DIR`` holds ``sweep.json`` (what the sweep is, and how its trials ended),
``summary.csv``, Tune's own experiment state (written by Tune, never read here) and, for each
trial, ``DIR/<trial>/checkpoint_NNNNNN/``: the trial's run directory as it last reported it
(``checkpoint.safetensors``, ``updates.csv``, ``episodes.csv``, the TensorBoard events).
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from pathlib import Path

from pong.run.checkpoint import FILENAME, MAX_HEADER_BYTES, CheckpointError, _count, _metadata
from pong.run.errors import first_line
from pong.run.files import NotRegularError, atomic_write, open_file

__all__ = ["CHECKPOINT_PREFIX", "Storage", "StorageError", "is_uri"]

CHECKPOINT_PREFIX = "checkpoint_"  # Tune's name for a reported checkpoint's directory
MAX_COPY = 2**30  # bytes a trial's run copied down may hold: a Pong run has about 30 MB


class StorageError(OSError):
    """A file of the storage that cannot be read or written; the message names it."""


def is_uri(where: str | os.PathLike) -> bool:
    """Whether ``where`` is a URI (``s3://...``) rather than a local path."""
    return "://" in str(where)


class Storage:
    """A sweep's directory, local or remote: read, write and list files below it."""

    def __init__(self, where: str | os.PathLike) -> None:
        self.remote = is_uri(where)
        if self.remote:
            import pyarrow.fs

            try:
                self.fs, self.root = pyarrow.fs.FileSystem.from_uri(str(where))
            except Exception as e:  # pyarrow's own kinds: ArrowInvalid, ArrowNotImplementedError
                raise StorageError(f"{where}: not a storage URI pyarrow opens ({e})") from None
            self.uri, self.root = str(where), self.root.rstrip("/")
            parts = urllib.parse.urlsplit(self.uri)  # its query (?endpoint_override=...) apart
            self.where = f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
        else:
            self.uri = self.where = self.root = str(Path(where).absolute())

    def __str__(self) -> str:
        """The storage as given: a URI whole, with its query; an absolute path."""
        return self.uri

    def parent_and_name(self) -> tuple[str, str]:
        """Tune's ``storage_path`` and experiment name for this directory: its parent (with
        the URI's query) and its own name."""
        parts = urllib.parse.urlsplit(self.uri)
        parent, _, name = parts.path.rstrip("/").rpartition("/")
        if not self.remote:
            return parent or "/", name
        return urllib.parse.urlunsplit(parts._replace(path=parent)), name

    def name(self, *parts: str) -> str:
        """The path or URI of ``parts`` below the sweep directory."""
        return "/".join([self.where, *parts])

    def _path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def read(self, rel: str, max_bytes: int, *, head: bool = False) -> bytes:
        """The file ``rel``, at most ``max_bytes`` (with ``head``, its first ``max_bytes``);
        ``FileNotFoundError`` if absent, else one-line ``StorageError``s."""
        try:
            if not self.remote:
                with open_file(self._path(rel), None if head else max_bytes) as f:
                    return f.read(max_bytes)
            info = self.fs.get_file_info(self._path(rel))
            if info.type.name == "NotFound":
                raise FileNotFoundError(self.name(rel))
            if info.type.name != "File":
                raise StorageError(f"{self.name(rel)}: not a file")
            if not head and info.size > max_bytes:
                raise StorageError(
                    f"{self.name(rel)}: {info.size:,} bytes, more than {max_bytes:,}"
                )
            with self.fs.open_input_stream(self._path(rel)) as f:
                return f.read(max_bytes)
        except (FileNotFoundError, StorageError):
            raise
        except NotRegularError as e:
            raise StorageError(f"{self.name(rel)}: {e.strerror}") from None
        except OSError as e:
            raise StorageError(f"{self.name(rel)}: {e.strerror or e}") from None

    def write(self, rel: str, data: bytes) -> None:
        """``rel`` written whole (a link planted there is replaced, never written through);
        a one-line ``StorageError`` if it cannot be."""
        try:
            if self.remote:
                with self.fs.open_output_stream(self._path(rel)) as f:
                    f.write(data)
            else:
                with atomic_write(self._path(rel), "wb") as f:
                    f.write(data)
        except OSError as e:
            why = first_line(e).split(" (Request ID")[0]  # pyarrow's S3 errors run on
            raise StorageError(f"could not write {self.name(rel)}: {e.strerror or why}") from None

    def directories(self, rel: str = "") -> list[str]:
        """The names of the directories in ``rel`` (never a link to one, nor anything in
        ``rel`` if it is a link), sorted."""
        if not self.remote:
            if os.path.islink(self._path(rel) if rel else self.root):
                return []
            try:
                with os.scandir(self._path(rel) if rel else self.root) as entries:
                    return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
            except (FileNotFoundError, NotADirectoryError):
                return []
        import pyarrow.fs

        found = self.fs.get_file_info(
            pyarrow.fs.FileSelector(self._path(rel) if rel else self.root, allow_not_found=True)
        )
        return sorted(i.base_name for i in found if i.type == pyarrow.fs.FileType.Directory)

    def names(self) -> list[str]:
        """What the sweep directory holds (nothing where it does not exist); a
        ``StorageError`` where it is a file or a link."""
        if not self.remote:
            if os.path.islink(self.root) or (
                os.path.lexists(self.root) and not os.path.isdir(self.root)
            ):
                raise StorageError(f"{self.where}: not a directory")
            return sorted(os.listdir(self.root)) if os.path.isdir(self.root) else []
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(self.root, allow_not_found=True)
        try:
            return sorted(i.base_name for i in self.fs.get_file_info(selector))
        except OSError as e:
            raise StorageError(f"{self.where}: {first_line(e).split(' (Request ID')[0]}") from None

    def remove(self, rel: str) -> None:
        """Delete ``rel``: a directory and what it holds; a link itself, never its target."""
        path = self._path(rel)
        if self.remote:
            self.fs.delete_dir(path)
        elif os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
        else:
            shutil.rmtree(path)

    def prune(self, trial: str, keep: str | None = None) -> list[str]:
        """Delete what the trial holds under a checkpoint's name but ``keep``
        (``trial/checkpoint_N``): older checkpoints, and links planted there (Tune would
        write through them); nothing if the trial's directory is itself a link. The
        names deleted."""
        if self.remote:
            names = self.directories(trial)
        elif os.path.islink(self._path(trial)) or not os.path.isdir(self._path(trial)):
            return []
        else:
            names = sorted(os.listdir(self._path(trial)))
        gone = [n for n in names if n.startswith(CHECKPOINT_PREFIX) and f"{trial}/{n}" != keep]
        for name in gone:
            self.remove(f"{trial}/{name}")
        return gone

    def copy_down(self, rel: str, local: Path) -> None:
        """The files below ``rel`` copied into the new local directory ``local``: regular
        files and directories only, a link refused (``StorageError``), at most
        ``MAX_COPY`` bytes in all."""
        if self.remote:  # an object store has no links
            import pyarrow.fs

            local.mkdir(parents=True, exist_ok=True)
            pyarrow.fs.copy_files(self._path(rel), str(local.absolute()),
                                  source_filesystem=self.fs,
                                  destination_filesystem=pyarrow.fs.LocalFileSystem())  # fmt: skip
            return
        copied = 0
        for top, dirs, files in os.walk(self._path(rel)):
            into = local / os.path.relpath(top, self._path(rel))
            into.mkdir(parents=True, exist_ok=True)
            for name in [*dirs, *files]:
                if os.path.islink(os.path.join(top, name)):
                    raise StorageError(f"{os.path.join(top, name)}: a symbolic link; refusing to"
                                       " follow it")  # fmt: skip
            for name in files:
                with open_file(os.path.join(top, name)) as f, open(into / name, "xb") as out:
                    copied += os.fstat(f.fileno()).st_size
                    if copied > MAX_COPY:
                        raise StorageError(f"{self.name(rel)}: more than {MAX_COPY:,} bytes")
                    shutil.copyfileobj(f, out)

    def checkpoints(self, trial: str) -> list[tuple[int, str]]:
        """(update, ``trial/checkpoint_N``) of the trial's checkpoints whose header is
        readable, the latest update first."""
        found = []
        for name in self.directories(trial):
            if name.startswith(CHECKPOINT_PREFIX):
                if (update := self.saved_update(f"{trial}/{name}")) is not None:
                    found.append((update, f"{trial}/{name}"))
        return sorted(found, reverse=True)

    def saved_update(self, rel: str) -> int | None:
        """The update the checkpoint in the run directory ``rel`` holds, from its header
        alone; ``None`` where there is none or it is damaged."""
        try:
            data = self.read(f"{rel}/{FILENAME}", 8 + MAX_HEADER_BYTES, head=True)
            length = int.from_bytes(data[:8], "little")
            if len(data) < 8 or length > MAX_HEADER_BYTES or 8 + length > len(data):
                return None
            return _count(_metadata(rel, data[8 : 8 + length]), "iteration")
        except (OSError, CheckpointError, KeyError, ValueError):
            return None

    def latest(self, trial: str) -> tuple[str, int] | None:
        """The run directory ``trial/checkpoint_NNNNNN`` whose checkpoint holds the latest
        update, and that update; ``None`` where the trial has none. (A resumed trial's first
        checkpoint restarts Tune's numbering, so the update decides, not the number.)"""
        found = self.checkpoints(trial)
        return (found[0][1], found[0][0]) if found else None
