"""The task modules' own command lines, as their headers write them."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_arithmetic_writes_its_splits_from_the_documented_command_without_a_warning(tmp_path):
    """`python -m recipes.tasks.arithmetic FOLDER`: the package must not import the module before runpy runs it,
    or Python warns that it was found in sys.modules and runs the module's code twice."""
    result = subprocess.run(
        [sys.executable, "-m", "recipes.tasks.arithmetic", str(tmp_path / "arith")],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" not in result.stderr, result.stderr
    assert sorted(p.name for p in (tmp_path / "arith").iterdir()) == [
        "heldout.jsonl",
        "test.jsonl",
        "train.jsonl",
    ]
