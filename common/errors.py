"""The one base type for mistakes a user can fix: a bad recipe, data file, store, input file or argument.

Every command line catches ``UserError`` alone and prints ``error: <message>`` with exit status 2, never a
traceback. Subclasses (``RecipeError``, ``DataError``, ``CheckpointError``, ...) say which part complained;
their messages name the file, key or row, what was expected, and a fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


class UserError(ValueError):
    """A problem the user can fix; the message says where, what was expected, and how to fix it."""


# How long a process waits for its machine's local rank 0 to say the same error: every process of a launch meets a
# recipe error within about a second of the others (the same files; after the model loads, the same gathered data).
SIBLING_WAIT_S = 5.0


def say_error(message: str) -> None:
    """``error: <message>`` on stderr, once per machine when every process of a launch meets the same one.

    Local rank 0 says it. Under torchrun (``accelerate launch`` with several processes) each process also writes
    its error file, whose message torchrun's report of the failed launch quotes as the failure's cause instead of
    "To enable traceback see: <its docs>"; the other processes of the machine read local rank 0's there and stay
    silent when it is theirs. An error of their own, or one local rank 0 has not said, they say with their rank.
    """
    line = f"error: {message}"
    _close_progress_bars()
    error_file, local_rank = os.environ.get("TORCHELASTIC_ERROR_FILE"), os.environ.get("LOCAL_RANK", "0")
    if local_rank == "0":
        _write_error_file(error_file, line)  # first: the other processes are waiting for it
        print(line, file=sys.stderr)
        return
    # torchrun's layout, <attempt>/<local rank>/error.json: local rank 0's file is a sibling folder's.
    mine = Path(error_file) if error_file else None
    first = (
        _said(mine.parent.parent / "0" / "error.json") if mine and mine.parent.name == local_rank else None
    )
    if first and first["message"] == line:
        # A second after local rank 0's: torchrun's report takes the earliest failure, in whole seconds, as the root
        # cause, and a tie goes to the process that exited first, which may be this one.
        _write_error_file(error_file, "error: the same as local rank 0's", first["timestamp"] + 1)
        return
    _write_error_file(error_file, line)
    print(f"error (rank {os.environ.get('RANK', local_rank)}): {message}", file=sys.stderr)


def _close_progress_bars() -> bool:
    """End a training or evaluation bar an error cut short, so the error starts a line of its own rather than
    following "1/8 [00:00<00:02, 2.44it/s]" on the bar's (and the bar is not drawn again under it at exit);
    True when there was one."""
    tqdm = sys.modules.get(
        "tqdm"
    )  # only a process that drew a bar has it, and only such a process needs this
    bars = list(getattr(getattr(tqdm, "tqdm", None), "_instances", ()))
    for bar in bars:
        bar.close()
    return bool(bars)


def _said(error_file: Path) -> dict | None:
    """Another process's error file (``message``, ``timestamp``) once it is there in full; None after
    ``SIBLING_WAIT_S``."""
    deadline = time.monotonic() + SIBLING_WAIT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):  # not there yet, or half written
            report = json.loads(error_file.read_text())
            if isinstance(report, dict) and "message" in report and "timestamp" in report:
                return report
        time.sleep(0.05)
    return None


def _write_error_file(error_file: str | None, message: str, timestamp: int | None = None) -> None:
    # The message is on stderr all the same: a file that cannot be written must not replace it with a traceback.
    if error_file:
        report = {"message": message, "timestamp": int(time.time()) if timestamp is None else timestamp}
        with contextlib.suppress(OSError):
            Path(error_file).write_text(json.dumps(report))


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping a command as Ctrl-C does: ``kill``, ``timeout``, a batch scheduler, or the launcher's death
    (recipes/launcher.py ``end_with_launcher``)."""


def _raise_terminated(signum, frame) -> None:
    # One is enough: `timeout` signals the launcher and its group, and the launcher's death signals the run again;
    # a second Terminated would break off the cleanup of the first. SIGKILL still ends a process that hangs.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def exit_status(command: Callable[[], object], interrupted: str | None = None) -> int:
    """Run a command line's work: 0, or 2 with ``error: <message>`` on stderr for a UserError (no traceback).

    ``interrupted``: what Ctrl-C or SIGTERM left and how to go on, said with exit status 130 (143 for SIGTERM)
    instead of a traceback or, for SIGTERM, a silent end.
    """
    # Only the main thread may set a handler (a notebook's worker thread may call a main() too).
    handles_term = interrupted is not None and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if handles_term else None
    try:
        command()
    except UserError as e:
        say_error(str(e))
        return 2
    except KeyboardInterrupt as e:
        if interrupted is None:
            raise
        # A closed bar ends its line; otherwise the line may hold the terminal's "^C".
        start = "" if _close_progress_bars() else "\n"
        print(f"{start}interrupted: {interrupted}", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(e, Terminated) else 130
    except BrokenPipeError:
        # The reader of stdout is gone (``| head``): it has what it wanted. Python's documented recipe: stdout to
        # devnull, so the interpreter's last flush does not raise again; the status a shell gives SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if handles_term:
            signal.signal(signal.SIGTERM, previous)
    return 0
