"""benchmarks/gpu_tables.py runs its parts inside a time budget, on the CPU here with stand-in rows: what ran is
kept per part, a row past the budget is stopped with its children, later rows wait, and the summary names the
command that runs what was left out. The real rows need a GPU (docs/PERFORMANCE.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import REPO

from benchmarks import gpu_tables
from benchmarks.gpu_parts import PARTS, Row, command, gpu_test_files
from benchmarks.gpu_tables import Session
from recipes.recipe import load_recipe


def python_row(label: str, code: str, shape: str | None = None) -> Row:
    return Row(label, ("-c", code), estimate_s=1, shape=shape)


def test_rows_run_in_order_keep_their_output_and_a_failure_is_said(tmp_path):
    session = Session(tmp_path, None, tmp_path, ["GPU: none (a test)"], min_row_s=0)
    session.run_part("first", [python_row("says hello", "print('hello from the row')")])
    session.run_part("second", [python_row("fails", "import sys; print('bad'); sys.exit(3)")])
    assert "== says hello\n" in (tmp_path / "first.txt").read_text()
    assert "hello from the row\n" in (tmp_path / "first.txt").read_text()
    assert "bad\n" in (tmp_path / "second.txt").read_text()
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.startswith("GPU: none (a test)\n")
    assert [line.split()[0] for line in summary.splitlines()[3:]] == ["first", "second"]
    assert "done" in summary.splitlines()[3] and "failed (exit 3)" in summary.splitlines()[4]
    assert session.failed and "left out by the budget" not in summary


def test_the_budget_stops_a_row_with_its_children_and_later_rows_wait(tmp_path):
    pid_file = tmp_path / "child.pid"
    # The row starts a child in its process group (as accelerate's launcher does) and outlives the budget.
    slow = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); print('started', flush=True); time.sleep(60)"
    )
    session = Session(tmp_path, 3.0, tmp_path, ["GPU: none (a test)"], min_row_s=1)
    start = time.monotonic()
    session.run_part("slow", [python_row("sleeps past the budget", slow)])
    session.run_part("later", [python_row("never starts", "print('ran')")])
    assert time.monotonic() - start < 30
    assert "started\n" in (tmp_path / "slow.txt").read_text()  # its output up to the stop is kept
    assert "ran" not in (tmp_path / "later.txt").read_text()
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the row's child outlived the budget"
    summary = (tmp_path / "summary.txt").read_text()
    assert "stopped at the budget" in summary and "not started: the budget is spent" in summary
    assert summary.rstrip().endswith(
        "left out by the budget: python benchmarks/gpu_tables.py OUT_DIR slow later"
    )
    assert not session.failed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A stopped child the test process did not start stays a zombie until its parent (the row, gone) is reaped.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[1].split()[0] != "Z"


def test_a_shape_is_built_once_and_shared_by_the_rows_that_need_it(tmp_path, monkeypatch):
    builds = tmp_path / "builds.txt"

    def fake_build(shape, folder):
        code = f"import pathlib; pathlib.Path({str(folder)!r}).mkdir(); open({str(builds)!r}, 'a').write('x')"
        return [sys.executable, "-c", code]

    monkeypatch.setattr(gpu_tables, "build_command", fake_build)
    session = Session(tmp_path, None, tmp_path, [], min_row_s=0)
    reads = "import sys, pathlib; print('model at', sys.argv[1], pathlib.Path(sys.argv[1]).is_dir())"
    rows = [Row(f"row {i}", ("-c", reads, "{model}"), 1, shape="org/Shape-1B") for i in (1, 2)]
    session.run_part("shared", rows)
    assert builds.read_text() == "x"
    assert (tmp_path / "shared.txt").read_text().count(f"model at {tmp_path / 'org--Shape-1B'} True") == 2


def test_the_tests_part_runs_every_file_holding_gpu_tests():
    files = gpu_test_files()
    assert {"tests/test_distributed_gpu.py", "tests/test_compiled_generation.py"} <= set(files)
    argv = command(PARTS["tests"][0].argv, None)
    assert argv[:2] == [sys.executable, "-m"] and argv[-len(files) :] == files
    assert PARTS["tests"][0].env == {"GRPO_RECIPES_GPU_TESTS": "1"}


def test_the_gpu_tests_import_without_the_s3_test_server():
    """The lent GPU machine has no moto: the GPU test files and the reward their runs load must not need it."""
    code = (
        "import sys, builtins; real = builtins.__import__\n"
        "def refuse(name, *a, **k):\n"
        "    if name.split('.')[0] == 'moto': raise ImportError('no moto here')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = refuse\n"
        "import test_distributed_gpu, test_compiled_generation, test_merged_lora, _plugins\n"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["OUT", "lama"], "unknown part 'lama'. Did you mean llama?"),
        (["OUT", "--budget", "20"], "--budget 20: expected at least 45 seconds"),
        ([], "name an OUT_DIR (or --list)"),
    ],
)
def test_bad_arguments_are_refused_naming_the_fix(args, message, tmp_path):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = _run(*args)
    assert result.returncode == 2 and message in result.stderr


def test_a_folder_with_files_is_refused_and_a_cpu_machine_is_told_it_needs_a_gpu(tmp_path):
    (tmp_path / "mine.txt").write_text("kept")
    refused = _run(str(tmp_path), "llama")
    assert refused.returncode == 2 and "is not a new or empty folder" in refused.stderr
    assert (tmp_path / "mine.txt").read_text() == "kept"
    # The documented order, OUT_DIR --budget S PARTS, parses (argparse refused "tests llama" after the option)
    no_gpu = _run(
        str(tmp_path / "new"), "--budget", "480", "tests", "llama"
    )  # the suite hides GPUs from itself
    assert no_gpu.returncode == 2 and "no CUDA GPU visible" in no_gpu.stderr
    assert not (tmp_path / "new").exists()


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "benchmarks/gpu_tables.py", *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


GPU_ROWS = [
    (part, row) for part, rows in PARTS.items() for row in rows if row.argv[0].startswith("benchmarks/")
]


@pytest.mark.parametrize(("part", "row"), GPU_ROWS, ids=[f"{p}: {r.label}" for p, r in GPU_ROWS])
def test_every_row_loads_its_recipe_and_passes_options_its_script_has(part, row):
    """A misspelt override or option found here costs nothing; found on the lent machine, a session's GPU time."""
    from test_documented_commands import _help

    script, recipe, *rest = row.argv
    overrides = [
        a.replace("{model}", "/nonexistent/model") for a in rest if "=" in a and not a.startswith("--")
    ]
    load_recipe(recipe, overrides)  # raises, naming the key, on a bad override
    options = [a for a in rest if a.startswith("--")]
    assert options and all(option in _help(script) for option in options), (options, script)
