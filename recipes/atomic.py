"""Atomic files: a reader, or a crash, sees the old file or the whole new one, never half of it."""

from __future__ import annotations

import os
from pathlib import Path

from common.files import usual_permissions


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` through a temporary file beside it and ``os.replace``. The temporary file's
    name is its own, so processes writing the same file at once (a launcher's ranks) never write into each other's."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            tmp.write(text)
        usual_permissions(name)  # mkstemp made it 0600
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def copy_file_atomically(source: str | Path, target: str | Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file beside it and ``os.replace``."""
    import shutil

    target = Path(target)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copy2(source, tmp)
    os.replace(tmp, target)


def write_folder_atomically(folder: str | Path, save) -> Path:
    """Call ``save(tmp)`` on a private folder beside ``folder``, then rename it into place.

    A crash or an error leaves no half-written ``folder``; the private folder is removed.
    """
    import shutil
    import tempfile

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save(tmp)
        usual_permissions(tmp)  # mkdtemp made it 0700
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder
