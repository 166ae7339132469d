"""How a process of a multi-process launch ends: past the interpreter's finalization, where gloo can abort it.

``destroy_process_group`` does not stop gloo's worker threads while DDP's internals still hold the group (measured:
``gloo_tcp_loop`` and two ``pt_gloo_runloop`` threads outlive it, with the trainer and the model deleted), so they
are still running when the interpreter finalizes. A thread that then asks for the GIL is ended by Python with
``pthread_exit``, whose unwinding through gloo's C++ aborts the process ("terminate called without an active
exception", SIGABRT): the launcher fails a run that had finished and saved everything.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import NoReturn


def launched_processes() -> int:
    """How many processes the launcher (torchrun, ``accelerate launch``) started: 1 without one."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def exit_launched_process(status: int) -> NoReturn:
    """End this process with ``status`` as the interpreter would, up to its finalization: the threads that are not
    daemons are waited for (a checkpoint upload still going), the exit handlers run (the grader process stopped,
    trackers finished), logs and output are flushed; then the process ends, skipping the finalization."""
    # The interpreter's own first step of an exit: stop the executors' workers, then join every thread that is no
    # daemon. Joining them by hand hung on idle ThreadPoolExecutor workers (boto3's), which only this tells to end.
    threading._shutdown()
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
