"""A grader process: math-verify work with a hard time bound, whichever thread asks. The grader starts it.

math-verify bounds its work with ``signal.alarm``, which only works on a main thread and cannot interrupt a
C-level big-integer power (``\\boxed{9^{9^{9^9}}}``). A LaTeX answer that is not provably cheap is therefore
parsed and compared in this child process, on its main thread (so math-verify's own timeouts apply), while
the asking thread waits at most ``REQUEST_TIMEOUT_S``. A request that takes longer gets the child killed
(the next request starts a fresh one) and is graded as no match, marked unsettled: a model's output can slow
grading down, never hang it or crash it. Evaluation asks patiently (``PATIENT_REQUEST_TIMEOUT_S``).

The child is a plain ``python -c`` subprocess rather than a multiprocessing one: spawning through
multiprocessing would re-import the launching script (``recipes/run.py`` with torch and TRL) in the child.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

# What one request may take, startup aside: math-verify's own per-step bound is 3 s (see _symbolic).
REQUEST_TIMEOUT_S = 10
# What a patient request may take: evaluation asks so (a busy moment must not leave its grades unsettled), and can
# wait where a reward cannot (math-verify's bound in the child is then _symbolic.PATIENCE times longer too).
PATIENT_REQUEST_TIMEOUT_S = 60
# Starting the child imports sympy and math-verify: a few seconds, more on a busy machine.
STARTUP_TIMEOUT_S = 120
logger = logging.getLogger(__name__)


class GraderTimeout(Exception):
    """The grader process did not answer in time (or died): the comparison is unsettled (no match for a reward)."""


class GraderError(GraderTimeout):
    """The grader process answered with an error (math-verify's own timeout, say): it is kept running."""


class _Client:
    """The parent's end: one child per process, started on first use, restarted after a timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._pid = None

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        root = str(Path(__file__).resolve().parent.parent)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(to_child_r), str(to_parent_w)],
            pass_fds=(to_child_r, to_parent_w),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(to_parent_w)
        self._conn = _Pair(Connection(to_parent_r, writable=False), Connection(to_child_w, readable=False))
        self._pid = os.getpid()
        self._conn.receive(STARTUP_TIMEOUT_S)  # "ready": imports done

    def stop(self) -> None:
        if self._process is not None and self._pid == os.getpid():
            self._process.kill()
            self._process.wait()
            self._conn.close()
        self._process = self._conn = None

    def request(self, *message, patient: bool = False):
        """The child's answer to ``message``; GraderTimeout when it takes too long or the child fails.

        ``patient``: wait up to PATIENT_REQUEST_TIMEOUT_S, and the child gives math-verify longer bounds.
        """
        with self._lock:
            try:
                if self._process is None or self._pid != os.getpid() or self._process.poll() is not None:
                    self.stop()  # after a fork the child belongs to the parent process: start our own
                    self._start()
                self._conn.send((patient, message))
                return self._conn.receive(PATIENT_REQUEST_TIMEOUT_S if patient else REQUEST_TIMEOUT_S)
            except GraderError:
                raise
            except (OSError, EOFError, GraderTimeout) as e:
                self.stop()
                raise GraderTimeout(f"grader process: {message[0]} took too long or failed ({e!r})") from None


class _Pair:
    """Two one-way pipe ends as one connection, with a receive that gives up after a timeout."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message) -> None:
        self.writer.send(message)

    def receive(self, seconds: float):
        if not self.reader.poll(seconds):
            raise GraderTimeout(f"no answer in {seconds} s")
        status, value = self.reader.recv()
        if status == "error":
            raise GraderError(value)
        return value

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


_CHILD = "import sys; from rewards._verifier import serve; serve(int(sys.argv[1]), int(sys.argv[2]))"
CLIENT = _Client()
atexit.register(CLIENT.stop)


def serve(read_fd: int, write_fd: int) -> None:
    """The child's loop: answer each request until the parent closes its end."""
    from math_verify.errors import TimeoutException

    from rewards import _symbolic

    logging.basicConfig(level=logging.WARNING)
    _symbolic.become_grader_process()
    _symbolic.warm_up()
    reader, writer = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    handlers = {"fingerprint": _symbolic.fingerprint_here, "compare": _symbolic.compare_here}
    writer.send(("ok", "ready"))
    while True:
        try:
            patient, (operation, *args) = reader.recv()
        except EOFError:
            return
        try:
            with _symbolic.patience(patient):
                writer.send(("ok", handlers[operation](*args)))
        except (Exception, TimeoutException) as e:  # noqa: BLE001 - a bad answer grades as no match, the child goes on
            writer.send(("error", f"{type(e).__name__}: {e}"[:300]))
