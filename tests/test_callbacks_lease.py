"""One run per checkpoint prefix: a live lease refuses a second launch, an expired one is taken over, a lost
one stops the uploads, and the end of a run frees the prefix."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest
from _callbacks_helpers import make_checkpoint, trainer_objects
from conftest import REPO

from callbacks.checkpoint_sync import CheckpointSyncCallback, prepare_checkpointing
from callbacks.errors import CheckpointError
from callbacks.lease import LEASE_KEY, RemoteLease
from callbacks.lock import this_process
from callbacks.remote import scan_remote
from callbacks.stores import FolderStore


def prepare(output_dir, uri, endpoint_url, **settings):
    return prepare_checkpointing(
        output_dir=str(output_dir), recipe_name="tiny", recipe_yaml="r: 1\n", uri=uri, endpoint_url=endpoint_url,
        **settings,
    )  # fmt: skip


def test_a_second_launch_on_the_same_prefix_is_refused_until_the_first_releases_it(target, tmp_path):
    uri, endpoint, store = target
    first = prepare(tmp_path / "machine-a", uri, endpoint)
    lease = store.read_bytes(LEASE_KEY)
    with pytest.raises(CheckpointError) as raised:
        prepare(tmp_path / "machine-b", uri, endpoint)
    message = str(raised.value)
    assert f"{store.uri} is in use by another run of recipe 'tiny' (pid" in message
    # The ages depend on how busy the machine is; what they must show is the 120 s lease counted from its renewal.
    ago, left = map(
        int, re.search(r"lease renewed (\d+) s ago\).* expires (\d+) s from now", message).groups()
    )
    assert ago < 30 and 119 <= ago + left <= 121
    assert f"delete {store.child_uri(LEASE_KEY)}" in message
    assert store.read_bytes(LEASE_KEY) == lease  # the refused launch left the first one's lease alone
    first.release()
    assert store.read_bytes(LEASE_KEY) is None
    prepare(tmp_path / "machine-b", uri, endpoint).release()


def test_an_expired_lease_is_taken_over_with_a_warning(target, tmp_path, caplog):
    uri, endpoint, store = target
    stale = {
        "launch": "gone",
        "recipe": "tiny",
        "host": "lost-vm",
        "pid": 1,
        "renewed": time.time() - 301,
        "ttl": 300,
    }
    store.write_bytes(LEASE_KEY, json.dumps(stale).encode())
    plan = prepare(tmp_path / "out", uri, endpoint)
    assert "Taking over" in caplog.text and "lost-vm" in caplog.text
    assert json.loads(store.read_bytes(LEASE_KEY))["launch"] == plan.lease.me["launch"]
    plan.release()


def test_a_lost_lease_stops_the_uploads_before_anything_is_written(target, tmp_path):
    uri, endpoint, store = target
    plan = prepare(tmp_path / "out", uri, endpoint)
    other = {
        "launch": "other",
        "recipe": "tiny",
        "host": "vm-2",
        "pid": 7,
        "renewed": time.time(),
        "ttl": 300,
    }
    store.write_bytes(LEASE_KEY, json.dumps(other).encode())  # another launch took the prefix meanwhile
    sync = next(c for c in plan.callbacks if isinstance(c, CheckpointSyncCallback))
    make_checkpoint(tmp_path / "out", 2)
    sync.on_save(*trainer_objects(tmp_path / "out", 2))
    message = sync.finish()
    assert "this run lost its lease" in message and "'launch': 'other'" in message
    assert scan_remote(store) == []  # nothing of checkpoint-2 was written over the other run's prefix
    plan.release()
    assert json.loads(store.read_bytes(LEASE_KEY))["launch"] == "other"  # not ours to delete


def renewals(store: FolderStore, gate: threading.Event | None = None) -> threading.Semaphore:
    """Released as each renewal starts (the renewal thread reads the lease), so the n-th release means n - 1
    renewals are over; each then waits for ``gate`` before its read. A fixed sleep bounded nothing: a busy machine
    (CI) may not run the renewal thread in it at all."""
    started, real_read = threading.Semaphore(0), store.read_bytes

    def read_bytes(key):
        if threading.current_thread().name == "checkpoint-lease":
            started.release()
            assert gate is None or gate.wait(60)
        return real_read(key)

    store.read_bytes = read_bytes
    return started


def test_the_lease_is_renewed_while_the_run_lives(tmp_path):
    store = FolderStore(tmp_path / "drive")
    started = renewals(store)
    lease = RemoteLease(store, "tiny", renew_every=0.05)
    first = json.loads(store.read_bytes(LEASE_KEY))["renewed"]
    assert started.acquire(timeout=60) and started.acquire(timeout=60)  # a renewal came and went
    assert json.loads(store.read_bytes(LEASE_KEY))["renewed"] > first
    lease.release()
    assert store.read_bytes(LEASE_KEY) is None


def test_a_fresh_lease_of_a_dead_process_on_this_machine_is_taken_over_at_once(tmp_path, caplog):
    store = FolderStore(tmp_path / "drive")
    dead = {
        **this_process(),
        "launch": "crashed",
        "recipe": "tiny",
        "process_started": 1.0,
    }  # pid reused since
    store.write_bytes(LEASE_KEY, json.dumps({**dead, "renewed": time.time(), "ttl": 300}).encode())
    lease = RemoteLease(store, "tiny")
    assert "Taking over" in caplog.text and "'launch': 'crashed'" in caplog.text
    assert json.loads(store.read_bytes(LEASE_KEY))["launch"] == lease.me["launch"]
    lease.release()
    alive = {**this_process(), "launch": "running", "recipe": "tiny"}  # this very process: still running
    store.write_bytes(LEASE_KEY, json.dumps({**alive, "renewed": time.time(), "ttl": 300}).encode())
    with pytest.raises(CheckpointError, match="is in use by another run of recipe 'tiny'"):
        RemoteLease(store, "tiny")


def test_a_lost_lease_is_not_renewed_over_its_new_owner(tmp_path, caplog):
    store, gate = FolderStore(tmp_path / "drive"), threading.Event()
    started = renewals(store, gate)
    lease = RemoteLease(store, "tiny", renew_every=0.05)
    other = json.dumps({"launch": "other", "recipe": "tiny", "renewed": time.time(), "ttl": 300}).encode()
    # Written while a renewal is held before its read: one that had just read its own lease would write it back
    # over the new owner's (the folder store has no conditional overwrite), a race of the test, not of the run.
    assert started.acquire(timeout=60)
    store.write_bytes(LEASE_KEY, other)
    gate.set()
    # The next renewal started: the held one is over, and met the other lease.
    assert started.acquire(timeout=60)
    assert store.read_bytes(LEASE_KEY) == other
    assert "Could not renew the lease" in caplog.text and "this run lost its lease" in caplog.text
    lease.release()
    assert store.read_bytes(LEASE_KEY) == other  # not ours to delete
    store.delete([LEASE_KEY])
    with pytest.raises(CheckpointError, match=r"this run lost its lease on .* to nobody"):
        lease.check()


def test_a_launch_that_ends_without_releasing_its_lease_still_exits(tmp_path):
    """The renewal thread must not keep a crashed run alive, renewing its lease for ever."""
    code = (
        "import sys; from callbacks.lease import RemoteLease; from callbacks.stores import FolderStore; "
        "RemoteLease(FolderStore(sys.argv[1]), 'tiny', renew_every=0.05)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "drive")], check=True, cwd=REPO, timeout=60)
    assert json.loads((tmp_path / "drive" / LEASE_KEY).read_text())["recipe"] == "tiny"


def test_a_renewal_under_way_when_the_run_ends_does_not_bring_the_lease_back(tmp_path):
    store = FolderStore(tmp_path / "drive")
    renewing, real_write = threading.Event(), store.write_bytes

    def write_bytes(key, data, *, if_absent=False):
        if threading.current_thread().name == "checkpoint-lease":  # a renewal, slowed down by a busy store
            renewing.set()
            time.sleep(0.5)
        return real_write(key, data, if_absent=if_absent)

    store.write_bytes = write_bytes
    lease = RemoteLease(store, "tiny", renew_every=0.05)
    assert renewing.wait(10)
    start = time.monotonic()
    lease.release()
    assert (
        time.monotonic() - start < 10
    )  # the renewal stops at once; release waits only for the one under way
    time.sleep(1)
    assert store.read_bytes(LEASE_KEY) is None  # the prefix is free for the next launch


@pytest.mark.parametrize("damaged", [b'{"launch": "half', b'{"launch": "old", "recipe": "tiny"}'])
def test_a_damaged_lease_or_one_without_a_renewal_time_is_taken_over(tmp_path, caplog, damaged):
    store = FolderStore(tmp_path / "drive")
    store.write_bytes(LEASE_KEY, damaged)
    lease = RemoteLease(store, "tiny")
    assert "Taking over" in caplog.text
    assert json.loads(store.read_bytes(LEASE_KEY))["launch"] == lease.me["launch"]
    lease.release()
