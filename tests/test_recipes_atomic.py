"""Atomic files and folders: the old version or the whole new one, never half of either, and nothing left behind."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest

from recipes.atomic import copy_file_atomically, write_folder_atomically, write_text_atomically


def test_a_text_file_is_replaced_whole_in_a_folder_made_for_it(tmp_path):
    path = tmp_path / "new" / "run" / "records.jsonl"
    write_text_atomically(path, "first\n")
    write_text_atomically(path, "second ünïcode\n")
    assert path.read_text(encoding="utf-8") == "second ünïcode\n"
    assert os.listdir(path.parent) == ["records.jsonl"]  # no temporary left beside it


def test_writers_of_one_file_at_once_each_replace_it_whole_with_the_usual_permissions(tmp_path):
    """The temporary was `.NAME.tmp` for every writer: two processes writing at once wrote into the same one."""
    path, texts = tmp_path / "fields.json", [f"{i}" * 200_000 for i in range(8)]
    umask = os.umask(0o022)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda text: write_text_atomically(path, text), texts))
    finally:
        os.umask(umask)
    assert path.read_text() in texts
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600
    assert os.listdir(tmp_path) == ["fields.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(path, "half \ud800")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["records.jsonl"]


def test_a_copy_keeps_the_bytes_and_times_and_leaves_no_temporary(tmp_path):
    source, target = tmp_path / "recipe.yaml", tmp_path / "out" / "recipe.yaml"
    source.write_bytes(b"model: {}\n")
    os.utime(source, (1_000_000, 1_000_000))
    target.parent.mkdir()
    target.write_bytes(b"old")
    copy_file_atomically(source, target)
    assert target.read_bytes() == b"model: {}\n" and target.stat().st_mtime == 1_000_000
    assert os.listdir(target.parent) == ["recipe.yaml"]


def test_a_folder_appears_whole_with_the_usual_permissions(tmp_path):
    seen = []

    def save(tmp):
        seen.append(tmp)
        assert tmp.parent == tmp_path / "runs" / "a" and tmp.name.startswith(".merged-")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "model.safetensors").write_bytes(b"weights")

    umask = os.umask(0o022)
    try:
        folder = write_folder_atomically(tmp_path / "runs" / "a" / "merged", save)
    finally:
        os.umask(umask)
    assert folder == tmp_path / "runs" / "a" / "merged" and not seen[0].exists()
    assert (folder / "sub" / "model.safetensors").read_bytes() == b"weights"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # not mkdtemp's 0700
    assert stat.S_IMODE((folder / "sub" / "model.safetensors").stat().st_mode) == 0o644
    assert os.listdir(tmp_path / "runs" / "a") == ["merged"]


def test_a_failed_save_leaves_neither_the_folder_nor_its_temporary(tmp_path):
    def save(tmp):
        (tmp / "half.bin").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_folder_atomically(tmp_path / "merged", save)
    assert os.listdir(tmp_path) == []


def test_a_save_that_removed_its_folder_before_failing_raises_its_own_error(tmp_path):
    def save(tmp):
        tmp.rmdir()
        raise RuntimeError("gave up")

    with pytest.raises(RuntimeError, match="gave up"):
        write_folder_atomically(tmp_path / "merged", save)
    assert os.listdir(tmp_path) == []
