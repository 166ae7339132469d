"""Atomic files: a reader, or a crash, sees the old file or the whole new one, never half of it."""

from __future__ import annotations

import os
from pathlib import Path

from common.files import usual_permissions


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` through a temporary file beside it and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
