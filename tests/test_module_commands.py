"""The command lines of task and built-in model modules, run as their headers write them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_arithmetic_writes_its_splits_from_the_documented_command_without_a_warning(tmp_path):
    """`python -m recipes.tasks.arithmetic FOLDER`: the package must not import the module before runpy runs it,
    or Python warns that it was found in sys.modules and runs the module's code twice."""
    result = _run("recipes.tasks.arithmetic", str(tmp_path / "arith"))
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" not in result.stderr, result.stderr
    assert sorted(p.name for p in (tmp_path / "arith").iterdir()) == [
        "heldout.jsonl",
        "test.jsonl",
        "train.jsonl",
    ]


@pytest.mark.parametrize("module", ["recipes.builtin.tiny_llama", "recipes.builtin.tiny_arith"])
def test_a_builtin_model_command_refuses_an_existing_folder_or_none_in_one_line(module, tmp_path):
    """Both used to end in a traceback: IndexError without a folder, OSError (Directory not empty) after the whole
    build for an existing one."""
    (tmp_path / "mine.txt").write_text("not the model's")
    for args, message in (((), "the following arguments are required: folder"), ((str(tmp_path),), "exists")):
        result = _run(module, *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "RuntimeWarning" not in result.stderr, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
