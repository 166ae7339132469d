"""Where checkpoints go: one small interface over an S3 bucket prefix or a (mounted) folder.

Keys are relative POSIX paths under the store's root, e.g. ``checkpoint-25/optimizer.pt``. Every write is
atomic for readers: S3 objects appear whole, and folder writes go to a temporary file and ``os.replace``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from callbacks.errors import CheckpointError
from callbacks.manifest import checkpoint_step, sha256_file
from common.secrets import credential_problem

logger = logging.getLogger(__name__)
Progress = Callable[[int], None] | None
_TMP_PREFIX = ".tmp-"
_TEMPORARY = re.compile(rf"^{re.escape(_TMP_PREFIX)}(.+-[0-9a-f]{{8}}|probe-[0-9a-f]{{32}})$")
_COPY_CHUNK = 8 << 20


class Store:
    """A place that holds checkpoint folders: ``<root>/checkpoint-N/<files>``."""

    uri: str

    def list(self, sub: str = "") -> dict[str, int]:
        """Every object under ``sub`` (a folder key, "" for all), as relative key -> size in bytes."""
        raise NotImplementedError

    def upload(self, local: Path, key: str, progress: Progress = None) -> None:
        """Store the file ``local`` under ``key``, replacing any previous object."""
        raise NotImplementedError

    def download(self, key: str, local: Path, progress: Progress = None) -> None:
        """Copy the object ``key`` to the local file ``local``."""
        raise NotImplementedError

    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        raise NotImplementedError

    def mismatches(self, name: str, entries: dict[str, dict], copies: dict[str, Path]) -> dict[str, str]:
        """The files of committed checkpoint ``name`` whose bytes here differ from their manifest ``entries``
        (relative path -> why), as far as the store can tell without a download; their sizes already match.

        ``copies``: local files known to hold the committed bytes (a checksum over an upload's parts is computed
        from them). By default nothing is found: sizes are all such a store is judged by.
        """
        return {}

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        """Write an object; with ``if_absent``, only create it (returns False when it already exists)."""
        raise NotImplementedError

    def delete(self, keys: list[str]) -> None:
        """Delete objects (missing ones are fine)."""
        raise NotImplementedError

    def move(self, key: str, new_key: str) -> None:
        """Move one object to another key in this store (replacing what is there)."""
        raise NotImplementedError

    def preflight(self) -> None:
        """Check that we can write, read and delete here; raise CheckpointError saying what is wrong."""
        raise NotImplementedError

    def clear_temporaries(self) -> list[str]:
        """Remove what killed writes of ours left here; returns the keys. Call only while nothing else writes
        here (the run's lease is held). Objects in S3 appear whole, so there is nothing to remove by default."""
        return []

    def explain(self, error: Exception, action: str) -> str:
        """A message saying what went wrong when trying to ``action`` here, and how to fix it."""
        return f"Cannot {action} in {self.uri}: {type(error).__name__}: {error}"

    def child_uri(self, key: str) -> str:
        return f"{self.uri.rstrip('/')}/{key}"


class FolderStore(Store):
    """Checkpoints copied into a folder: a mounted Google Drive, a network share, another disk."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser().absolute()
        self.uri = str(self.root)

    def list(self, sub: str = "") -> dict[str, int]:
        base = self.root / sub
        if not base.is_dir():
            return {}
        return {
            p.relative_to(self.root).as_posix(): p.stat().st_size
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(_TMP_PREFIX)
        }

    def upload(self, local: Path, key: str, progress: Progress = None) -> None:
        _copy_atomically(Path(local), self.root / key, progress)

    def download(self, key: str, local: Path, progress: Progress = None) -> None:
        if not (self.root / key).is_file():
            raise CheckpointError(f"{self.child_uri(key)} does not exist")
        _copy_atomically(self.root / key, Path(local), progress)

    def read_bytes(self, key: str) -> bytes | None:
        path = self.root / key
        return path.read_bytes() if path.is_file() else None

    def mismatches(self, name: str, entries: dict[str, dict], copies: dict[str, Path]) -> dict[str, str]:
        # A folder keeps no checksum: its files are read back and hashed (a LoRA checkpoint is hundreds of MB). Not
        # worth doing right after a copy, whose reads would come from the page cache, but at a later launch.
        return {
            rel: "does not match its SHA-256 in the manifest (altered or corrupt)"
            for rel, entry in entries.items()
            if not ((path := self.root / name / rel).is_file() and sha256_file(path) == entry["sha256"])
        }

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        # A folder has no conditional write; checking first is enough with one writer per run, which the run
        # id check in prepare_checkpointing enforces.
        path = self.root / key
        if if_absent and path.exists():
            return False
        tmp = _temp_beside(path)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return True

    def move(self, key: str, new_key: str) -> None:
        (self.root / new_key).parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.root / key, self.root / new_key)
        self.delete([key])  # gone already; this prunes the emptied folders

    def delete(self, keys: list[str]) -> None:
        folders = set()
        for key in keys:
            (self.root / key).unlink(missing_ok=True)
            folders.add((self.root / key).parent)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            while folder != self.root and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent

    def clear_temporaries(self) -> list[str]:
        # Only our own temporaries, by their exact names (_temp_beside's, the preflight probe's).
        found = [p for p in self.root.rglob(f"{_TMP_PREFIX}*") if p.is_file() and _TEMPORARY.match(p.name)]
        self.delete([p.relative_to(self.root).as_posix() for p in found])
        if found:
            logger.info(
                "Removed %d temporary files in %s, left by a copy that was killed", len(found), self.uri
            )
        return [p.relative_to(self.root).as_posix() for p in found]

    def unusable(self) -> str | None:
        """Why no checkpoint can be written here, seen without writing (``run.py --print`` asks it too), else None."""
        drive = Path("/content/drive")
        if self.root.is_relative_to(drive) and not (drive / "MyDrive").is_dir():
            return (
                f"checkpoint.uri {self.root} is on Google Drive, but Drive is not mounted. In Colab run "
                "`from google.colab import drive; drive.mount('/content/drive')` first."
            )
        if file := next((p for p in (self.root, *self.root.parents) if p.is_file()), None):
            return (
                f"checkpoint.uri: cannot write checkpoints to folder {self.root} ({file} is a file; "
                "checkpoint.uri names a folder)"
            )
        return None

    def preflight(self) -> None:
        if problem := self.unusable():
            raise CheckpointError(problem)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = f"{_TMP_PREFIX}probe-{uuid.uuid4().hex}"
            self.write_bytes(probe, b"probe")
            ok = self.read_bytes(probe) == b"probe"
            self.delete([probe])
        except OSError as e:
            raise CheckpointError(
                f"checkpoint.uri: cannot write checkpoints to folder {self.root}: {e}"
            ) from e
        if not ok:
            raise CheckpointError(f"Folder {self.root} did not return what was written to it")


def _temp_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f"{_TMP_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")


def _copy_atomically(src: Path, dest: Path, progress: Progress) -> None:
    tmp = _temp_beside(dest)
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while chunk := fin.read(_COPY_CHUNK):
                fout.write(chunk)
                if progress:
                    progress(len(chunk))
            fout.flush()
            os.fsync(fout.fileno())
        shutil.copystat(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def is_remote(location: str) -> bool:
    """Whether a resume/fetch location names a store (``s3://``, ``file://``) rather than a local path."""
    return urlparse(location).scheme in ("s3", "file")


def uri_problem(uri: str, endpoint_url: str | None = None) -> str | None:
    """Why ``open_store`` refuses ``uri``, read from the URI alone (no store opened, no network), else None."""
    for key, value in (("checkpoint URI", uri), ("checkpoint.endpoint_url", endpoint_url)):
        if problem := credential_problem(key, value):
            return problem
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return (
            None if parsed.netloc else f"checkpoint URI {uri!r} names no bucket; expected s3://bucket/prefix"
        )
    if endpoint_url:
        return f"checkpoint.endpoint_url is set ({endpoint_url}) but {uri!r} is not an s3:// URI"
    if parsed.scheme == "file":
        # urlparse reads file://tmp/runs as host "tmp" and path /runs: the run would write to /runs unannounced.
        # ~/runs from file://~/runs, file:///~/runs or file://localhost/~/runs; /~scratch/runs is a plain folder
        written = ("" if parsed.netloc == "localhost" else parsed.netloc) + parsed.path
        written = written.removeprefix("/")
        if written == "~" or written.startswith("~/"):  # a URI has no home folder: /~/runs is a folder "~"
            return (
                f"checkpoint URI {uri!r}: a file:// URI cannot name a home folder; write the plain path "
                f"{written}, which expands ~"
            )
        if parsed.netloc not in ("", "localhost"):
            return (
                f"checkpoint URI {uri!r} names a host ({parsed.netloc!r}), which a folder store cannot reach; "
                f"for the folder /{parsed.netloc}{parsed.path} write file:///{parsed.netloc}{parsed.path} "
                "(three slashes) or the plain path"
            )
    elif parsed.scheme and len(parsed.scheme) > 1:  # one letter: a Windows drive, a path
        return (
            f"Unsupported checkpoint URI {uri!r}: use s3://bucket/prefix, file:///folder or a folder path "
            "(for example a mounted Google Drive, /content/drive/MyDrive/runs/NAME)"
        )
    return None


def run_prefix_problem(uri: str) -> str | None:
    """Why ``checkpoint.uri`` cannot take a run's checkpoints: it names one of another run's checkpoint-N folders or
    its ``best`` pointer (where a resume or fetch URI may point), which would nest this run inside that one."""
    name = urlparse(uri).path.rstrip("/").rsplit("/", 1)[-1]
    # "best": callbacks.best.BEST_NAME, not imported (that module imports this one).
    if checkpoint_step(name) is None and name != "best":
        return None
    run = uri.rstrip("/")[: -len(name) - 1]
    return (
        f"checkpoint.uri {uri!r} names a checkpoint ({name}) of the run at {run}, not a folder for a run's "
        f"checkpoints. To train on from it, set checkpoint.resume={uri} and give checkpoint.uri a new folder "
        f"(e.g. {run}-2); to continue that run, checkpoint.uri={run}."
    )


def open_store(uri: str, endpoint_url: str | None = None) -> Store:
    """The store for ``checkpoint.uri``: ``s3://bucket/prefix``, ``file:///folder`` or a plain folder path.

    Raises:
        CheckpointError: For an unsupported scheme or a malformed S3 URI (``uri_problem``).
    """
    if problem := uri_problem(uri, endpoint_url):
        raise CheckpointError(problem)
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        from callbacks.s3_store import S3Store

        return S3Store(parsed.netloc, parsed.path.strip("/"), endpoint_url=endpoint_url)
    return FolderStore(parsed.path if parsed.scheme == "file" else uri)
