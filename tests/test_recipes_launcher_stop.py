"""Stopping `accelerate launch` stops the run it started: its one-process launcher passes no signal on."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest
from conftest import REPO, accelerate_launcher

from recipes.launcher import _is_accelerate


@pytest.mark.parametrize(
    ("cmdline", "accelerate"),
    [
        (["/venv/bin/python", "/venv/bin/accelerate", "launch", "-q", "recipes/run.py"], True),
        (["/usr/bin/python3", "-m", "accelerate.commands.launch", "--cpu", "recipes/run.py"], True),
        # accelerate's other console script for the same command (pip installs both)
        (["/venv/bin/python", "/venv/bin/accelerate-launch", "recipes/run.py", "gsm8k_tiny"], True),
        (["/bin/bash"], False),  # nohup python recipes/run.py from a shell: the run must outlive the shell
        (["/usr/bin/python3", "recipes/run.py", "accelerate"], False),
    ],
)
def test_only_accelerate_counts_as_the_launcher(cmdline, accelerate):
    assert _is_accelerate(cmdline) is accelerate


@pytest.mark.slow
def test_a_killed_launcher_takes_its_run_with_it(tmp_path):
    out = tmp_path / "out"
    launcher = subprocess.Popen(
        [*accelerate_launcher(1), "-q", "recipes/run.py", "gsm8k_tiny", f"trainer.output_dir={out}",
         "trainer.max_steps=100000", "heldout.enabled=false"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not any(out.rglob("run.lock")):  # the run holds its folder: what an orphan would keep
            assert launcher.poll() is None and time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        (run,) = psutil.Process(launcher.pid).children()
        os.kill(launcher.pid, signal.SIGTERM)  # what `kill`, a job manager or a process monitor sends
        run.wait(timeout=60)  # psutil.TimeoutExpired while the run trains on as an orphan
    finally:
        for process in (
            psutil.Process(launcher.pid).children(recursive=True) if launcher.poll() is None else []
        ):
            process.kill()
        launcher.kill()
        for process in psutil.process_iter(["cmdline"]):
            if f"trainer.output_dir={out}" in (process.info["cmdline"] or []):
                process.kill()  # the orphan, when the run outlives its launcher
