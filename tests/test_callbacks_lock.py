"""One run per output folder: a live owner is named and refused, a dead one's lock is taken over."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import psutil
import pytest

from callbacks.checkpoint_sync import prepare_checkpointing
from callbacks.errors import CheckpointError
from callbacks.lock import LOCK_NAME, OutputLock
from callbacks.resume import SYNC_DIR


@pytest.fixture
def other_process():
    """A live process that is not this one, to own a lock."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def write_lock(output_dir, pid, host=None, started=None):
    path = output_dir / SYNC_DIR / LOCK_NAME
    path.parent.mkdir(parents=True)
    owner = {"recipe": "first", "host": host or socket.gethostname(), "pid": pid, "locked_at": "noon"}
    owner["process_started"] = started if started is not None else psutil.Process(pid).create_time()
    path.write_text(json.dumps(owner))
    return path


def prepare(output_dir, **settings):
    return prepare_checkpointing(
        output_dir=str(output_dir), recipe_name="second", recipe_yaml="x: 1\n", **settings
    )


def test_a_second_launch_is_refused_naming_the_run_that_holds_the_folder(tmp_path, other_process):
    lock = write_lock(tmp_path, other_process.pid)
    before = lock.read_bytes()
    staging = tmp_path / SYNC_DIR / "staging" / "checkpoint-2-abcd"
    staging.mkdir(parents=True)  # the first run's upload in flight
    with pytest.raises(CheckpointError) as raised:
        prepare(tmp_path)
    message = str(raised.value)
    assert (
        f"{tmp_path} is in use by another run of recipe 'first' (pid {other_process.pid} on this machine"
        in message
    )
    assert "set trainer.output_dir to another folder" in message and f"delete {lock}" in message
    assert lock.read_bytes() == before and staging.is_dir()  # the first run's files untouched


def test_a_lock_on_another_host_is_refused_too(tmp_path):
    write_lock(tmp_path, 1, host="colab-vm-7", started=1.0)
    with pytest.raises(CheckpointError, match="pid 1 on host colab-vm-7"):
        OutputLock(tmp_path, SYNC_DIR, "second")


@pytest.mark.parametrize("owner", ["dead", "reused pid", "corrupt"])
def test_a_stale_lock_is_taken_over_with_a_warning(tmp_path, other_process, caplog, owner):
    if owner == "corrupt":
        (tmp_path / SYNC_DIR).mkdir()
        (tmp_path / SYNC_DIR / LOCK_NAME).write_text('{"recipe": "fir')
    else:
        other_process.kill()
        other_process.wait()
        pid = other_process.pid if owner == "dead" else psutil.Process().ppid()
        write_lock(tmp_path, pid, started=123.0)  # a start time no live process with that pid has
    plan = prepare(tmp_path)
    assert "Taking over" in caplog.text
    held = json.loads((tmp_path / SYNC_DIR / LOCK_NAME).read_text())
    assert held["recipe"] == "second" and held["pid"] == psutil.Process().pid
    plan.release()
    assert not (tmp_path / SYNC_DIR / LOCK_NAME).exists()


def test_the_lock_is_released_when_preparation_fails_and_retaken_by_its_own_process(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(CheckpointError, match="resume"):
        prepare(out, resume="/no/such/checkpoint")
    assert not out.exists()  # a refused run leaves no trace
    first = prepare(out)
    second = prepare(out)  # a notebook training again in the same kernel
    second.release()
    first.release()
    assert not (out / SYNC_DIR / LOCK_NAME).exists()


def test_an_output_dir_that_is_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "out").write_text("mine")
    with pytest.raises(
        CheckpointError, match=r"trainer.output_dir .*out cannot be written .*writable folder"
    ):
        prepare(tmp_path / "out")
    assert (tmp_path / "out").read_text() == "mine"
