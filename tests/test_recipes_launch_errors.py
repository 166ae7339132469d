"""What a refused run shows under `accelerate launch`: run.py's one `error:` line, not buried under the launcher's
own traceback (one process) or left unnamed in torchrun's report (several)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO, accelerate_launcher

BAD_KEY = "error: Unknown key lora.rank in command-line override 'lora.rank=8'. Did you mean lora.r?"


def launch(command: list[str], tmp_path) -> subprocess.CompletedProcess:
    """``command`` with a recipe error that every process meets before the model loads: seconds, not minutes."""
    command = [
        *command,
        "recipes/run.py",
        "arith_tiny",
        "lora.rank=8",
        f"trainer.output_dir={tmp_path / 'out'}",
    ]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


def test_the_readmes_launch_command_reports_a_recipe_error_in_one_line(tmp_path):
    """Without -q, accelerate's launcher followed the line with its own CalledProcessError traceback."""
    flags = re.search(r"accelerate launch (.*)recipes/run\.py arith_tiny", (REPO / "README.md").read_text())
    result = launch([sys.executable, "-m", "accelerate.commands.launch", *flags[1].split()], tmp_path)
    assert result.returncode == 1
    assert result.stderr.count(BAD_KEY) == 1
    assert "Traceback" not in result.stderr and "CalledProcessError" not in result.stderr


def test_torchruns_report_of_a_failed_launch_quotes_the_recipe_error(tmp_path):
    """Its root cause read "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"."""
    result = launch(accelerate_launcher(2), tmp_path)
    assert result.returncode == 1
    assert f"traceback : {BAD_KEY}" in result.stderr.split("Root Cause (first observed failure):")[1]
