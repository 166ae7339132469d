"""Files written through a private temporary name get the permissions a plain ``open`` would have given them.

``tempfile.mkstemp``/``mkdtemp`` create 0600 files and 0700 folders; renamed into place, a shared result (a
plot, a merged model) would be readable by its owner only.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_LOCK = threading.Lock()


def _umask() -> int:
    with _LOCK:  # reading the umask means setting it: keep other threads of this process out meanwhile
        mask = os.umask(0)
        os.umask(mask)
    return mask


def usual_permissions(path: str | Path) -> None:
    """Set ``path`` (a file, or a folder and everything in it) to 0666/0777 less the process umask."""
    mask = _umask()
    path = Path(path)
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)
