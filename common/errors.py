"""The one base type for mistakes a user can fix: a bad recipe, data file, store, input file or argument.

Every command line catches ``UserError`` alone and prints ``error: <message>`` with exit status 2, never a
traceback. Subclasses (``RecipeError``, ``DataError``, ``CheckpointError``, ...) say which part complained;
their messages name the file, key or row, what was expected, and a fix.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class UserError(ValueError):
    """A problem the user can fix; the message says where, what was expected, and how to fix it."""


def exit_status(command: Callable[[], object], interrupted: str | None = None) -> int:
    """Run a command line's work: 0, or 2 with ``error: <message>`` on stderr for a UserError (no traceback).

    ``interrupted``: what Ctrl-C left and how to go on, said with exit status 130 instead of a traceback.
    """
    try:
        command()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(f"\ninterrupted: {interrupted}", file=sys.stderr)
        return 130
    return 0
