"""A launched process ends with its status, its exit handlers run and its output flushed, past the interpreter's
finalization (where gloo's surviving threads can abort a finished run: common/process_exit.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO

SCRIPT = textwrap.dedent(
    """
    import atexit, logging, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from common.process_exit import exit_launched_process

    def upload():  # a thread that is no daemon, as a checkpoint upload: the interpreter would wait for it
        time.sleep(0.5)
        open(sys.argv[1], "w").write("upload done")

    threading.Thread(target=upload).start()
    pool = ThreadPoolExecutor(2)  # kept, with an idle worker (as boto3's transfers): it must not hold the exit
    pool.submit(lambda: None).result()
    atexit.register(lambda: open(sys.argv[1], "a").write(", handlers ran"))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    logging.getLogger("run").info("Final adapter saved")
    sys.stdout.write("no newline, still buffered")
    class Finalized:
        def __del__(self):
            open(sys.argv[1], "a").write(", finalized")
    kept = Finalized()  # a module global: collected only by the interpreter's finalization
    exit_launched_process(3)
    """
)


def test_a_launched_process_exits_with_its_status_after_its_handlers_and_before_finalization(tmp_path):
    marker = tmp_path / "marker"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marker)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert result.stdout == "no newline, still buffered"
    assert result.stderr == "Final adapter saved\n"
    # In the interpreter's order (threads, then handlers), and no ", finalized": the finalization was skipped.
    assert marker.read_text() == "upload done, handlers ran"


def test_the_launched_process_count_is_the_launchers_world_size(monkeypatch):
    from common.process_exit import launched_processes

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert launched_processes() == 1
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert launched_processes() == 4
