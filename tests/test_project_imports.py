"""The generic top-level names (recipes, rewards, callbacks, stats) must resolve to this repository."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


@pytest.mark.parametrize("name", ["common", "recipes", "rewards", "callbacks", "stats", "recipes.run"])
def test_packages_come_from_this_repository(name):
    module = importlib.import_module(name)
    assert REPO in Path(module.__file__).resolve().parents


@pytest.mark.parametrize(
    "command",
    [
        ["recipes/run.py", "--help"],
        ["recipes/run.py", "--list"],
        ["recipes/run.py", "arith_tiny", "--print"],
        ["recipes/run.py", "gsm8k_llama", "--plan"],
        ["recipes/evaluate.py", "--help"],
        ["benchmarks/grpo_step.py", "--help"],
        ["-m", "rewards", "--help"],
        ["-m", "stats.compare", "--help"],
    ],
)
def test_help_list_and_print_answer_without_importing_torch_or_transformers(command):
    """What makes them answer at once (speed itself is for benchmarks, not tests): no heavy import. `--print`
    checks the whole recipe, its callbacks too, without building the TrainerCallbacks."""
    probe = (
        "import runpy, sys\n"
        f"argv = {command!r}\n"
        "sys.argv = argv[1:] if argv[0] == '-m' else argv\n"
        "try:\n"
        "    if argv[0] == '-m':\n"
        "        runpy.run_module(argv[1], run_name='__main__', alter_sys=True)\n"
        "    else:\n"
        "        runpy.run_path(argv[0], run_name='__main__')\n"
        "    code = 0\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft', 'datasets') if m in sys.modules)\n"
        "print('HEAVY', heavy, 'CODE', code, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                            check=False)  # fmt: skip
    assert "HEAVY [] CODE 0" in result.stderr, result.stderr[-2000:]
    shown = {
        "--list": "arith_tiny",
        "--print": "name_or_path: builtin:tiny-arith",
        "--plan": "Memory plan for",
    }
    assert shown.get(command[-1], "usage:") in result.stdout
