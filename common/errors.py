"""The one base type for mistakes a user can fix: a bad recipe, data file, store, input file or argument.

Every command line catches ``UserError`` alone and prints ``error: <message>`` with exit status 2, never a
traceback. Subclasses (``RecipeError``, ``DataError``, ``CheckpointError``, ...) say which part complained;
their messages name the file, key or row, what was expected, and a fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


class UserError(ValueError):
    """A problem the user can fix; the message says where, what was expected, and how to fix it."""


def say_error(message: str) -> None:
    """``error: <message>`` on stderr, and in the process's error file when torchrun started it.

    torchrun (``accelerate launch`` with several processes) ends a failed launch with its own report, whose
    root cause otherwise reads "To enable traceback see: <its docs>"; it quotes this file there instead.
    """
    print(f"error: {message}", file=sys.stderr)
    if error_file := os.environ.get("TORCHELASTIC_ERROR_FILE"):
        # The message is already on stderr: a file that cannot be written must not replace it with a traceback.
        with contextlib.suppress(OSError):
            report = {"message": f"error: {message}", "timestamp": int(time.time())}
            Path(error_file).write_text(json.dumps(report))


def exit_status(command: Callable[[], object], interrupted: str | None = None) -> int:
    """Run a command line's work: 0, or 2 with ``error: <message>`` on stderr for a UserError (no traceback).

    ``interrupted``: what Ctrl-C left and how to go on, said with exit status 130 instead of a traceback.
    """
    try:
        command()
    except UserError as e:
        say_error(str(e))
        return 2
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(f"\ninterrupted: {interrupted}", file=sys.stderr)
        return 130
    return 0
