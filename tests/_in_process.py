"""``python recipes/run.py ...`` run inside the test process: the same exit code and output, without the 15 s a new
Python spends importing torch, transformers, TRL and peft (most of a tiny run's time on a 2-core machine).

For what a run does and says. A test of the process itself (a kill, a signal, the launcher, an environment read at
import, what importing prints) starts a real one.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess

from conftest import REPO

from common.logs import OWN_HANDLERS
from recipes import run


def run_recipe(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``recipes/run.py ARGS``' exit code, stdout and stderr, as ``subprocess.run(..., capture_output=True,
    text=True)`` gives them. ``env``: variables set for the run (ones read as it runs, not at import). What a run
    changes in this process (the environment, the working folder, signal handlers, the root logger) is undone."""
    cwd, environ = os.getcwd(), dict(os.environ)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    root = logging.getLogger()
    root_handlers, root_level = root.handlers[:], root.level
    propagates = {name: logging.getLogger(name).propagate for name in OWN_HANDLERS}
    root.handlers = []  # so the run's log_to_stderr writes to the captured stderr, as a new process's would
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(REPO)
        os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = run.main(list(args))
            except SystemExit as exit:  # argparse's refusals
                status = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        root.handlers, root.level = root_handlers, root_level
        for name, propagate in propagates.items():
            logging.getLogger(name).propagate = propagate
    return subprocess.CompletedProcess(["recipes/run.py", *args], status, out.getvalue(), err.getvalue())
