"""GRPOConfig's fields read from the cache are the ones TRL's import gives, and a recipe refused for a typo says so
without importing TRL: 0.3 s where the import took 10-15 s, in every process a launcher starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from accelerate.parallelism_config import ParallelismConfig
from conftest import REPO

from recipes import grpo_fields
from recipes.grpo_fields import Field
from recipes.grpo_fields import grpo_fields as read_fields
from recipes.schema import type_name, type_ok


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, and no fields remembered by this process."""
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path))
    grpo_fields._fields.cache_clear()
    yield tmp_path / "grpo-config-fields"
    grpo_fields._fields.cache_clear()


def names(fields: dict[str, Field]) -> dict:
    return {
        k: (None if f.types is None else [type_name((t,)) for t in f.types], f.default)
        for k, f in fields.items()
    }


def test_the_cached_fields_are_the_imported_ones_and_a_stand_in_type_checks_as_its_class(cache):
    imported = grpo_fields._imported()
    first = read_fields()
    assert [p.suffix for p in cache.iterdir()] == [".json"]
    grpo_fields._fields.cache_clear()
    cached = read_fields()
    assert names(cached) == names(imported) == names(first)
    assert cached["learning_rate"].default == imported["learning_rate"].default and "beta" in cached
    assert cached["max_steps"] == Field((int,), -1)
    stand_in = cached["parallelism_config"].types[0]
    assert stand_in is not ParallelismConfig  # read from the file: no accelerate import needed
    for value in (ParallelismConfig(), None, {"dp_shard_size": 2}, "tp"):
        assert type_ok(value, cached["parallelism_config"].types) == type_ok(
            value, imported["parallelism_config"].types
        ), value


def test_each_call_gets_its_own_default_lists(cache):
    listed = [name for name, f in read_fields().items() if isinstance(f.default, list)]
    assert listed, "GRPOConfig has list defaults (report_to, reward_weights...)"
    read_fields()[listed[0]].default.append("changed")
    assert "changed" not in read_fields()[listed[0]].default


def test_another_version_reads_another_file_and_a_damaged_one_is_written_again(cache, monkeypatch):
    read_fields()
    [written] = cache.iterdir()
    version = grpo_fields.metadata.version
    with monkeypatch.context() as patch:
        patch.setattr(grpo_fields.metadata, "version", lambda name: "9.9" if name == "trl" else version(name))
        assert grpo_fields._key() != written.stem
    written.write_text('{"max_steps": {"types": ["int"]')  # cut short
    grpo_fields._fields.cache_clear()
    assert read_fields()["max_steps"] == Field((int,), -1)
    assert json.loads(written.read_text())["max_steps"] == {"types": ["int"], "default": -1}


def test_a_cache_folder_that_cannot_be_written_costs_only_the_import(tmp_path, monkeypatch):
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path / "a file" / "cache"))
    grpo_fields._fields.cache_clear()
    try:
        assert read_fields()["max_steps"] == Field((int,), -1)
    finally:
        grpo_fields._fields.cache_clear()


def test_a_refused_recipe_is_said_without_importing_trl_once_the_fields_are_cached(cache):
    read_fields()  # written by this process, which has imported TRL already
    probe = (
        "import sys; from recipes import run; status = run.main(['arith_tiny', 'lora.rank=8', 'trainer.max_stepz=3']);"
        "print(status, sorted({m.split('.')[0] for m in sys.modules} & {'trl', 'transformers', 'torch', 'peft'}))"
    )
    env = {"GRPO_RECIPES_CACHE": str(cache.parent), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout == "2 []\n", result.stderr
    assert result.stderr.splitlines() == [
        "error: Unknown key lora.rank in override 'lora.rank=8'. Did you mean lora.r?",
        "Unknown key trainer.max_stepz in override 'trainer.max_stepz=3'. Did you mean trainer.max_steps?",
    ]
