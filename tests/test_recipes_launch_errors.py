"""What a refused run shows under `accelerate launch`: run.py's `error:` line once, not buried under the launcher's
own traceback (one process), said by every process or left unnamed in torchrun's report (several)."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from conftest import REPO, accelerate_launcher

from recipes.recipe import load_recipe

BAD_KEY = "error: Unknown key lora.rank in override 'lora.rank=8'. Did you mean lora.r?"


def launch(command: list[str], tmp_path, override: str = "lora.rank=8") -> subprocess.CompletedProcess:
    """``command`` with a recipe error met before the model loads (by every process, by default): seconds."""
    out = f"trainer.output_dir={tmp_path / 'out'}"
    return subprocess.run(
        [*command, "recipes/run.py", "arith_tiny", override, out],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def root_cause(stderr: str) -> str:
    return stderr.split("Root Cause (first observed failure):")[1]


def test_the_readmes_launch_command_reports_a_recipe_error_in_one_line(tmp_path):
    """Without -q, accelerate's launcher followed the line with its own CalledProcessError traceback."""
    flags = re.search(r"accelerate launch (.*)recipes/run\.py arith_tiny", (REPO / "README.md").read_text())
    result = launch([sys.executable, "-m", "accelerate.commands.launch", *flags[1].split()], tmp_path)
    assert result.returncode == 1
    assert result.stderr.count(BAD_KEY) == 1
    assert "Traceback" not in result.stderr and "CalledProcessError" not in result.stderr


def test_torchruns_report_quotes_the_recipe_error_that_is_said_once(tmp_path):
    """The report's root cause read "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    and each process said the error."""
    result = launch(accelerate_launcher(2), tmp_path)
    assert result.returncode == 1
    assert "rank      : 0" in root_cause(result.stderr)
    said = [line for line in result.stderr.splitlines() if "lora.rank" in line]
    assert said == [BAD_KEY, f"  traceback : {BAD_KEY}"]  # rank 0's line, and the report's root cause


@pytest.mark.slow  # rank 1 waits 5 s for rank 0 to say the same error
def test_an_error_of_one_process_is_said_with_its_rank(tmp_path):
    """Rank 1 said it as plain "error: ...", with the report's root cause a link to torch's docs."""
    plugin = tmp_path / "rank_plugin.py"
    plugin.write_text(
        "import os\n\n"
        "if os.environ['RANK'] == '1':\n"
        "    raise OSError('this copy is unreadable')\n\n\n"
        "def nothing(completions, **kwargs):\n"
        "    return [0.0] * len(completions)\n"
    )
    result = launch(accelerate_launcher(2), tmp_path, f"rewards=[{{path: '{plugin}:nothing'}}]")
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if "unreadable" in line]
    assert len(said) == 2, result.stderr
    assert said[0].startswith("error (rank 1): rewards ") and said[0].endswith(
        "raised OSError: this copy is unreadable"
    )
    assert said[1] == "  traceback : " + said[0].replace(" (rank 1)", "", 1)
    assert "rank      : 1" in root_cause(result.stderr)


def test_a_recipes_ddp_timeout_reaches_the_process_group(monkeypatch):
    """The Trainer joins run.py's state: trainer.ddp_timeout, which it gives its own, was ignored, and a machine
    whose peer failed before joining waited 30 minutes without a word."""
    import accelerate

    from recipes.run import train

    class Stop(Exception):
        pass

    given = {}

    def state(**kwargs):
        given.update(kwargs)
        raise Stop

    monkeypatch.setattr(accelerate, "PartialState", state)
    for overrides, timeout in (([], None), (["trainer.ddp_timeout=30"], timedelta(seconds=30))):
        given.clear()
        with pytest.raises(Stop):
            train(load_recipe("gsm8k_tiny", overrides))
        assert given.get("timeout") == timeout  # unset: torch's own default, not GRPOConfig's 1800 s


@pytest.mark.slow  # two processes train a step
def test_a_nan_reward_on_one_process_stops_every_process_at_the_same_step(tmp_path):
    """Raised where the reward returned, on rank 1 alone, rank 0 was left waiting in TRL's gather of the rewards
    until the launcher killed it: every process now stops at the step, and the error is said once."""
    plugin = tmp_path / "rank_nan.py"
    plugin.write_text(
        "import os\n\n\n"
        "def nan_on_rank_1(completions, id, **kwargs):\n"
        "    bad = os.environ['RANK'] == '1'\n"
        "    return [float('nan') if bad and i != 'probe-0' else 0.0 for i in id]\n"
    )
    result = subprocess.run(
        [*accelerate_launcher(2), "recipes/run.py", "gsm8k_tiny", f"trainer.output_dir={tmp_path / 'out'}",
         "trainer.max_steps=2", "heldout.enabled=false",
         f"rewards=[{{name: format, style: hash}}, {{path: '{plugin}:nan_on_rank_1', weight: 0.1}}]"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if "returned nan" in line]
    assert said[0].startswith(
        "error: rewards[1] (nan_on_rank_1) returned nan at step 1: TRL reads a NaN as None"
    )
    assert not any(line.startswith("error (rank") for line in said), result.stderr[-3000:]
