"""A folder store's writes: on disk (fsync) before they take their name, a missing object named as such, and
moves that leave no empty folders behind."""

from __future__ import annotations

import logging
import os

import pytest

from callbacks import stores
from callbacks.errors import CheckpointError
from callbacks.stores import FolderStore


@pytest.fixture
def synced(monkeypatch):
    """Record, per os.replace, how many bytes of its source had been fsynced before it took the new name (small
    files: Python buffers their bytes until a flush)."""
    fsynced, renamed = {}, []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        fsynced[os.readlink(f"/proc/self/fd/{fd}")] = os.fstat(fd).st_size
        real_fsync(fd)

    def replace(src, dst):
        renamed.append((os.path.basename(dst), fsynced.get(str(src))))
        real_replace(src, dst)

    monkeypatch.setattr(stores.os, "fsync", fsync)
    monkeypatch.setattr(stores.os, "replace", replace)
    return renamed


def test_writes_and_copies_are_on_disk_before_they_take_their_name(tmp_path, synced):
    store = FolderStore(tmp_path / "drive")
    store.write_bytes("checkpoint-1/manifest.json", b"x" * 100)
    (tmp_path / "optimizer.pt").write_bytes(b"y" * 200)
    os.utime(tmp_path / "optimizer.pt", (1_000_000, 1_000_000))
    store.upload(tmp_path / "optimizer.pt", "checkpoint-1/optimizer.pt")
    store.download("checkpoint-1/optimizer.pt", tmp_path / "back.pt")
    assert synced == [("manifest.json", 100), ("optimizer.pt", 200), ("back.pt", 200)]
    assert (tmp_path / "back.pt").stat().st_mtime == (tmp_path / "optimizer.pt").stat().st_mtime  # copystat


def test_downloading_a_missing_object_names_it_and_writes_nothing(tmp_path):
    store = FolderStore(tmp_path / "drive")
    with pytest.raises(CheckpointError, match=r"drive/checkpoint-1/optimizer.pt does not exist$"):
        store.download("checkpoint-1/optimizer.pt", tmp_path / "local" / "optimizer.pt")
    assert not (tmp_path / "local").exists()


def test_a_move_prunes_the_folders_it_empties_and_only_those(tmp_path):
    store = FolderStore(tmp_path / "drive")
    for key in ("checkpoint-1/a/x.bin", "checkpoint-1/b.bin", "checkpoint-2/c.bin"):
        store.write_bytes(key, b"1")
    store.move("checkpoint-1/a/x.bin", "quarantine/q/a/x.bin")
    assert not (tmp_path / "drive" / "checkpoint-1" / "a").exists()
    store.move("checkpoint-1/b.bin", "quarantine/q/b.bin")
    assert sorted(os.listdir(tmp_path / "drive")) == ["checkpoint-2", "quarantine"]
    assert store.list() == {"checkpoint-2/c.bin": 1, "quarantine/q/a/x.bin": 1, "quarantine/q/b.bin": 1}
    store.delete(["checkpoint-2/c.bin", "quarantine/q/a/x.bin", "quarantine/q/b.bin"])
    assert (tmp_path / "drive").is_dir() and os.listdir(tmp_path / "drive") == []  # the store's root stays


def test_clearing_temporaries_returns_what_it_removed_and_reports_only_then(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    store = FolderStore(tmp_path / "drive")
    store.write_bytes("checkpoint-1/optimizer.pt", b"1")
    assert store.clear_temporaries() == [] and "Removed" not in caplog.text
    killed = ["checkpoint-1/.tmp-optimizer.pt-1a2b3c4d", f".tmp-probe-{'0' * 32}"]
    for key in killed:
        (store.root / key).write_bytes(b"half")
    assert sorted(store.clear_temporaries()) == sorted(killed)
    assert f"Removed 2 temporary files in {store.uri}" in caplog.text
    assert store.list() == {"checkpoint-1/optimizer.pt": 1} and not (store.root / killed[1]).exists()


def test_a_copy_that_fails_leaves_no_temporary_and_its_own_error(tmp_path):
    store = FolderStore(tmp_path / "drive")
    (tmp_path / "optimizer.pt").write_bytes(b"y" * 200)

    def killed(n):
        raise KeyboardInterrupt  # the run stopped halfway through the copy

    with pytest.raises(KeyboardInterrupt):
        store.upload(tmp_path / "optimizer.pt", "checkpoint-1/optimizer.pt", progress=killed)
    assert os.listdir(store.root / "checkpoint-1") == []
    with pytest.raises(FileNotFoundError) as raised:
        store.upload(tmp_path / "gone.pt", "checkpoint-1/gone.pt")
    assert raised.value.filename == str(tmp_path / "gone.pt")
    assert os.listdir(store.root / "checkpoint-1") == []
