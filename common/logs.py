"""The command lines' log format, with each record printed once.

huggingface_hub and datasets give their loggers a handler of their own and still pass records up to the root
logger, so under ``logging.basicConfig`` each of their lines (a Hub retry, a download notice) printed twice.
They keep their own handler; the copy through the root is dropped.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
OWN_HANDLERS = ("huggingface_hub", "datasets")


def log_to_stderr(level: int | None = logging.INFO) -> None:
    """Root logging in the project's format at ``level`` (None: leave the root's level as it is)."""
    if level is None:
        logging.basicConfig(format=FORMAT)
    else:
        logging.basicConfig(level=level, format=FORMAT)
    for name in OWN_HANDLERS:
        logging.getLogger(name).propagate = False
