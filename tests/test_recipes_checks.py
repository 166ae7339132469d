"""The checks a recipe passes before any weights load: the machine (a GPU, bitsandbytes, a tracker's package),
the model (its context, its LoRA target layers), and rewards that could never pay."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from _in_process import run_recipe
from conftest import REPO

from recipes import checks
from recipes.recipe import RecipeError, load_recipe


def test_four_bit_without_bitsandbytes_fails_at_load(monkeypatch):
    real = checks.importlib.util.find_spec
    monkeypatch.setattr(
        checks.importlib.util, "find_spec", lambda n: None if n == "bitsandbytes" else real(n)
    )
    with pytest.raises(
        RecipeError, match="model.quantization=4bit needs bitsandbytes, which is not installed"
    ):
        load_recipe("gsm8k_llama_qlora")


def test_bf16_without_a_gpu_fails_before_the_model_loads():
    recipe = load_recipe("gsm8k_llama")
    config = SimpleNamespace(max_position_embeddings=131072)
    with pytest.raises(RecipeError) as raised:
        checks.check_environment(recipe, config, cuda_available=False)
    message = str(raised.value)
    assert message.startswith(
        "gsm8k_llama needs a GPU and this machine has none: model.dtype=bfloat16 and trainer.bf16=true need one "
        "(meta-llama/Llama-3.1-8B-Instruct, planned peak 19.5 GB of GPU memory, see --plan)."
    )
    assert (
        "accelerate launch -q recipes/run.py arith_tiny" in message and "float32" not in message
    )  # an 8B on a CPU
    tiny = load_recipe("gsm8k_tiny", ["model.dtype=bfloat16"])
    with pytest.raises(
        RecipeError, match=r"model.dtype=bfloat16 needs one \(builtin:tiny-llama\)\. .*set model.dtype="
    ):
        checks.check_environment(tiny, config, cuda_available=False)
    checks.check_environment(recipe, config, cuda_available=True)  # the same recipe is fine on a GPU


def test_a_tracker_transformers_does_not_know_is_refused_before_the_weights_load():
    recipe = load_recipe("gsm8k_tiny", ["trainer.report_to=tensorbord"])
    config = SimpleNamespace(max_position_embeddings=2048)
    with pytest.raises(
        RecipeError, match="'tensorbord' in override .* not a tracker .* Did you mean tensorboard"
    ):
        checks.check_environment(recipe, config, cuda_available=False)
    checks.check_environment(
        load_recipe("gsm8k_tiny", ["trainer.report_to=none"]), config, cuda_available=False
    )


def test_lora_targets_that_match_no_layer_are_refused_before_the_weights_load():
    from recipes.model import load_config

    recipe = load_recipe("gsm8k_tiny", ["lora.target_modules=[q_proj, v_prj]"])
    with pytest.raises(
        RecipeError, match="'v_prj' matches no linear layer of this llama model. Did you mean v_proj"
    ):
        checks.check_environment(recipe, load_config(recipe.config["model"]), cuda_available=False)


def test_a_prompt_longer_than_the_model_holds_is_refused_when_nothing_drops_it():
    """With data.max_prompt_tokens null, a 12,000-token question trained on without a word past the model's 1,024."""
    from datasets import Dataset

    from recipes.model import load_config, load_tokenizer

    recipe = load_recipe("gsm8k_tiny", ["data.max_prompt_tokens=null"])
    config, tokenizer = load_config(recipe.config["model"]), load_tokenizer(recipe.config["model"])
    rows = [
        {"id": f"q{i}", "prompt": [{"role": "user", "content": "1 plus " * n}]}
        for i, n in enumerate((3, 3000))
    ]
    with pytest.raises(
        RecipeError, match=r"^1 of 2 training prompts .* the longest, q1, has \d+\. Set data\.max_pro"
    ):
        checks.check_prompts_fit(recipe, config, tokenizer, Dataset.from_list(rows))
    checks.check_prompts_fit(recipe, config, tokenizer, Dataset.from_list(rows[:1]))  # fits
    capped = load_recipe("gsm8k_tiny")  # max_prompt_tokens set: load_split drops the long ones
    checks.check_prompts_fit(capped, config, tokenizer, Dataset.from_list(rows))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_a_gpu_recipe_on_a_cpu_machine_is_refused_before_any_download(tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "0",
    }  # a download would be tried (and retried) if the check came late
    result = subprocess.run(
        [sys.executable, "recipes/run.py", "gsm8k_llama", f"trainer.output_dir={tmp_path / 'out'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: gsm8k_llama needs a GPU and this machine has none" in result.stderr
    assert "huggingface.co" not in result.stderr and not (tmp_path / "out").exists()


def test_prompt_and_completion_budget_must_fit_the_model(tiny_model_dir):
    from recipes.model import load_config

    recipe = load_recipe("gsm8k_tiny", ["trainer.max_completion_length=700"])
    with pytest.raises(
        RecipeError,
        match=r"\(384\) \+ trainer.max_completion_length \(700\) = 1084 tokens, but "
        r"builtin:tiny-llama holds at most 1024",
    ):
        checks.check_environment(recipe, load_config(recipe.config["model"]), cuda_available=False)


def test_a_correctness_reward_that_can_never_pay_is_refused_at_load():
    dead = "rewards=[{name: correctness, min_tokens: 50, full_credit_tokens: 100}]"
    with pytest.raises(RecipeError) as error:
        load_recipe("gsm8k_tiny", [dead])  # completions stop at 32 tokens
    assert (
        "rewards[0] (correctness): can never pay: completions stop at max_completion_length=32 tokens"
        in str(error.value)
    )
    assert "Set min_tokens below 32" in str(error.value) and "or raise trainer.max_completion_length" in str(
        error.value
    )
    assert load_recipe("gsm8k_tiny", [dead, "trainer.max_completion_length=64"])


def test_a_format_reward_the_prompt_never_asks_for_is_refused_at_load():
    with pytest.raises(RecipeError) as error:
        load_recipe(
            "gsm8k_tiny", ["data.system_prompt='Answer as <answer>n</answer>.'"]
        )  # format style: hash
    assert (
        "rewards[1] (format) pays for the hash layout, but data.system_prompt never mentions '####'"
        in str(error.value)
    )
    assert "or set style: tags" in str(error.value)


def test_a_tracker_without_its_package_names_the_extra_to_install(monkeypatch):
    real = checks.importlib.util.find_spec
    monkeypatch.setattr(
        checks.importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("wandb", "trackio") else real(name, *a),
    )
    with pytest.raises(RecipeError) as raised:
        load_recipe("gsm8k_tiny", ["trainer.report_to=[wandb, trackio]"])
    lines = str(raised.value).splitlines()
    assert lines == [
        (
            "trainer.report_to=wandb in override 'trainer.report_to=[wandb, trackio]' needs the wandb "
            'package, which is not installed: pip install -e ".[wandb]" (in the grpo-recipes folder), or set '
            "trainer.report_to=none."
        ),
        (
            "trainer.report_to=trackio in override 'trainer.report_to=[wandb, trackio]' needs the trackio "
            'package, which is not installed: pip install -e ".[trackio]" (in the grpo-recipes folder), or set '
            "trainer.report_to=none."
        ),
    ]
    load_recipe("gsm8k_tiny", ["trainer.report_to=none"])


def test_an_output_folder_holding_someone_elses_files_or_the_store_is_refused(tmp_path):
    """A user's README.md, recipe.yaml and trainer_state.json were written over; a store in the output folder
    failed every upload ("manifest.json already exists") and the run exited 0."""
    from recipes.rerun import output_folder_refusal

    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    (out / "data.csv").write_text("1,2")  # not a name a run writes
    recipe = load_recipe("gsm8k_tiny", [f"trainer.output_dir={out}"])
    assert output_folder_refusal(recipe) == (
        f"trainer.output_dir {out} holds README.md, not written by a run of this project: a run would write over "
        "them. Choose a new or empty trainer.output_dir, or move them away."
    )
    result = run_recipe("gsm8k_tiny", f"trainer.output_dir={out}")
    assert result.returncode == 2 and "error: trainer.output_dir" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "data.csv",
    ]  # nothing written, nothing replaced
    assert (out / "README.md").read_text() == "my notes"
    (out / ".checkpoint_sync").mkdir()  # a folder a run of ours made: its README.md is the run's card
    assert output_folder_refusal(recipe) is None

    def with_store(uri):
        return load_recipe("gsm8k_tiny", [f"trainer.output_dir={out}", f"checkpoint.uri={uri}"])

    for uri, how in [
        (out, "the same folder"),
        (f"file://{out}", "the same folder"),
        (out / "s", "one inside"),
    ]:
        assert output_folder_refusal(with_store(uri)).startswith(
            f"checkpoint.uri {uri} and trainer.output_dir {out} are {how}"
        )
    assert output_folder_refusal(with_store(tmp_path)) is not None  # the store around the output folder
    assert output_folder_refusal(with_store(tmp_path / "elsewhere")) is None
    assert output_folder_refusal(with_store("s3://bucket/runs/a")) is None


def test_a_reward_given_another_completion_length_than_the_trainers_is_refused_at_load():
    """Completions stop at trainer.max_completion_length (32 here): an overlong penalty keyed to 64 never applies."""
    overlong = "rewards=[{name: soft_overlong, soft_punish_cache: 8, max_completion_length: %d}]"
    with pytest.raises(
        RecipeError,
        match=r"rewards\[0\] \(soft_overlong\) sets max_completion_length=64, but completions stop at "
        r"trainer.max_completion_length=32: remove it from the reward",
    ):
        load_recipe("gsm8k_tiny", [overlong % 64])
    assert load_recipe("gsm8k_tiny", [overlong % 32])  # the same length: said twice, but right
    assert load_recipe("gsm8k_tiny", ["rewards=[{name: soft_overlong, soft_punish_cache: 8}]"])  # filled in
