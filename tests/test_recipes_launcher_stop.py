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
    with (tmp_path / "stderr").open("w") as stderr:  # the launcher's and the run's: the run inherits it
        launcher = subprocess.Popen(
            [*accelerate_launcher(1), "-q", "recipes/run.py", "gsm8k_tiny", f"trainer.output_dir={out}",
             "trainer.max_steps=100000", "heldout.enabled=false"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not any(out.rglob("run.lock")):  # the run holds its folder: what an orphan would keep
            assert launcher.poll() is None and time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        (run,) = psutil.Process(launcher.pid).children()
        os.kill(launcher.pid, signal.SIGTERM)  # what `kill`, a job manager or a process monitor sends
        run.wait(timeout=60)  # psutil.TimeoutExpired while the run trains on as an orphan
        # It says so, as after Ctrl-C: it ended without a word.
        said = (tmp_path / "stderr").read_text()
        assert "\ninterrupted: every checkpoint saved before it is kept; rerun the same command" in said, (
            said[-2000:]
        )
    finally:
        for process in (
            psutil.Process(launcher.pid).children(recursive=True) if launcher.poll() is None else []
        ):
            process.kill()
        launcher.kill()
        for process in psutil.process_iter(["cmdline"]):
            if f"trainer.output_dir={out}" in (process.info["cmdline"] or []):
                process.kill()  # the orphan, when the run outlives its launcher


class _Launcher:
    """A stand-in for the parent process: its pid and command line (or the psutil error reading it raises)."""

    def __init__(self, cmdline, pid=4242):
        self.pid, self._cmdline = pid, cmdline

    def cmdline(self):
        if isinstance(self._cmdline, Exception):
            raise self._cmdline
        return self._cmdline


ACCELERATE = ["/venv/bin/python", "/venv/bin/accelerate", "launch", "recipes/run.py"]


@pytest.fixture
def launched(monkeypatch):
    """end_with_launcher's view of the world, faked: returns a function (parent cmdline, getppid, prctl's result)
    -> the prctl calls made and the signals this process sent itself."""
    import ctypes

    from recipes import launcher

    def run(cmdline, *, ppid=4242, prctl_result=0, platform="linux"):
        prctl_calls, kills = [], []

        class Libc:
            def prctl(self, option, value):
                prctl_calls.append((option, value))
                return prctl_result

        monkeypatch.setattr(psutil, "Process", lambda: type("Me", (), {"parent": lambda self: parent})())
        parent = None if cmdline is None else _Launcher(cmdline)
        errno = []  # ctypes keeps a failed call's errno only for a library loaded with use_errno=True

        def cdll(name, use_errno=False):
            errno[:] = [1 if use_errno else 0]
            return Libc()

        monkeypatch.setattr(ctypes, "CDLL", cdll)
        monkeypatch.setattr(ctypes, "get_errno", lambda: errno[0])
        monkeypatch.setattr(os, "getppid", lambda: ppid)
        monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
        monkeypatch.setattr(launcher.sys, "platform", platform)
        launcher.end_with_launcher()
        return prctl_calls, kills

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return run


def test_under_accelerate_the_run_asks_for_sigterm_when_its_launcher_dies(launched):
    assert launched(ACCELERATE) == ([(1, signal.SIGTERM)], [])  # PR_SET_PDEATHSIG


def test_a_launcher_that_died_before_the_request_took_effect_stops_the_run_at_once(launched):
    assert launched(ACCELERATE, ppid=1) == ([(1, signal.SIGTERM)], [(os.getpid(), signal.SIGTERM)])


def test_a_failed_prctl_is_logged_and_the_run_goes_on(launched, caplog):
    with caplog.at_level("DEBUG", logger="recipes.launcher"):
        assert launched(ACCELERATE, ppid=1, prctl_result=-1) == ([(1, signal.SIGTERM)], [])
    assert "prctl(PR_SET_PDEATHSIG) failed: errno 1" in caplog.text


@pytest.mark.parametrize(
    "cmdline", [["/bin/bash"], psutil.AccessDenied(4242), None], ids=["a shell", "unreadable", "no parent"]
)
def test_a_run_not_started_by_accelerate_outlives_its_parent(launched, cmdline):
    assert launched(cmdline) == ([], [])


def test_torchrun_and_other_platforms_are_left_alone(launched, monkeypatch):
    assert launched(ACCELERATE, platform="darwin") == ([], [])
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun passes SIGTERM on itself
    assert launched(ACCELERATE) == ([], [])
