"""recipes.colab, what the notebooks call: secrets into the environment unseen, the GPU check, CLI steps."""

from __future__ import annotations

import json
import os
import re
import sys
import types

import pytest
import torch

from recipes import colab
from recipes.planner.render import plan_memory
from recipes.recipe import RecipeError, load_recipe
from stats import compare
from stats.report import format_text

GIB = 2**30


@pytest.fixture
def clean_env(monkeypatch):
    for name in colab.SECRETS:
        # Set first: delenv of a variable that is not set records nothing to undo, and the secrets load_credentials
        # then put into os.environ outlived the test, into every later test of the worker (its processes too).
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    return monkeypatch


def fake_colab(monkeypatch, secrets: dict, denied=()):
    """A ``google.colab.userdata`` module serving ``secrets`` (``denied``: defined, but no notebook access)."""
    userdata = types.ModuleType("google.colab.userdata")

    class SecretNotFoundError(Exception):
        pass

    class NotebookAccessError(Exception):
        pass

    def get(name):
        if name in denied:
            raise NotebookAccessError(name)
        if name not in secrets:
            raise SecretNotFoundError(name)
        return secrets[name]

    userdata.get, userdata.SecretNotFoundError, userdata.NotebookAccessError = (
        get,
        SecretNotFoundError,
        NotebookAccessError,
    )
    package = types.ModuleType("google.colab")
    package.userdata = userdata
    monkeypatch.setitem(sys.modules, "google.colab", package)
    monkeypatch.setitem(sys.modules, "google.colab.userdata", userdata)


def test_colab_secrets_reach_the_environment_but_never_the_output(clean_env):
    secrets = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY123", "AWS_SECRET_ACCESS_KEY": "very-secret-value",
               "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    fake_colab(clean_env, secrets, denied=("HF_TOKEN",))
    clean_env.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # set by the user: it wins over the secret
    summary = colab.load_credentials("s3://bucket/run")
    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIAEXAMPLEKEY123"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "very-secret-value"
    assert os.environ["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert "HF_TOKEN" not in os.environ
    assert not any(value in summary for value in [*secrets.values(), "eu-west-1"])
    lines = {line.split()[0]: line for line in summary.splitlines()[1:]}
    assert "set (Colab secret)" in lines["AWS_SECRET_ACCESS_KEY"]
    assert "set (environment)" in lines["AWS_DEFAULT_REGION"]
    assert "not set" in lines["S3_ENDPOINT_URL"]
    assert "without notebook access" in lines["HF_TOKEN"]


def test_an_s3_uri_requires_the_key_pair(clean_env):
    fake_colab(clean_env, {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY123"})
    with pytest.raises(
        colab.ColabError, match="s3://b/run needs AWS_SECRET_ACCESS_KEY: add them as Colab secrets"
    ):
        colab.load_credentials("s3://b/run")
    assert "not set" in colab.load_credentials("/content/drive/MyDrive/run")  # a folder needs no keys


def test_outside_colab_only_the_environment_counts(clean_env):
    clean_env.setitem(sys.modules, "google.colab", None)  # import fails, as on a plain machine
    with pytest.raises(colab.ColabError, match="needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        colab.load_credentials("s3://b/run")
    clean_env.setenv("AWS_ACCESS_KEY_ID", "a")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "b")
    assert colab.load_credentials("s3://b/run").count("set (environment)") == 2


def test_the_example_bucket_is_refused_before_anything_runs(clean_env):
    with pytest.raises(colab.ColabError, match="set the URI in the parameters cell"):
        colab.load_credentials("s3://YOUR-BUCKET/grpo-recipes/gsm8k_llama")


def test_endpoint_parameter_then_secret(clean_env):
    assert colab.s3_endpoint(None) is None
    clean_env.setenv("S3_ENDPOINT_URL", "http://minio:9000")
    assert colab.s3_endpoint(None) == "http://minio:9000"
    assert colab.s3_endpoint("https://r2.example") == "https://r2.example"


def test_notebook_values_reach_the_recipe_as_given(clean_env, tmp_path):
    clean_env.setenv("S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    folder = str(tmp_path / "My Drive" / "run #2: yes")  # spaces, a comment sign, a colon: no YAML quoting
    values = {"trainer.output_dir": folder, **colab.checkpoint_values("s3://b/run")}
    recipe = load_recipe("gsm8k_tiny", ["trainer.max_steps=3"], values=values)
    assert recipe.config["trainer"]["output_dir"] == folder and recipe.config["trainer"]["max_steps"] == 3
    assert recipe.config["checkpoint"]["uri"] == "s3://b/run"
    assert recipe.config["checkpoint"]["endpoint_url"] == "http://127.0.0.1:9000"
    assert recipe.config["checkpoint"]["require_upload"] is True  # the notebook's disk goes with its machine
    assert recipe.origins["checkpoint.uri"] == "value checkpoint.uri='s3://b/run'"
    assert colab.checkpoint_values(None) == {"checkpoint.endpoint_url": "http://127.0.0.1:9000"}
    with pytest.raises(RecipeError, match=r"Unknown key trainer.max_stepz in value trainer.max_stepz=3"):
        load_recipe("gsm8k_tiny", values={"trainer.max_stepz": 3})


def test_cpu_runtime_continues_for_the_tiny_recipe_and_stops_for_llama(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    tiny = colab.check_runtime(load_recipe("gsm8k_tiny"))
    assert tiny.startswith("No GPU in this runtime: gsm8k_tiny runs on the CPU")
    peak = plan_memory(load_recipe("gsm8k_llama").config).peak(80 * GIB)
    with pytest.raises(colab.ColabError) as error:
        colab.check_runtime(load_recipe("gsm8k_llama"))
    message = str(error.value)
    assert f"about {peak / GIB:.1f} GB to train" in message and "Change runtime type > A100 GPU" in message
    assert "needs a GPU" in message  # the recipe check's own reason follows


def fake_gpu(monkeypatch, gib: float, name="NVIDIA A100-SXM4-40GB", capability=(8, 0)):
    card = types.SimpleNamespace(
        name=name, total_memory=int(gib * GIB), major=capability[0], minor=capability[1]
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: card)
    return card.total_memory


def test_gpu_runtime_reports_need_against_card(monkeypatch):
    config = load_recipe("gsm8k_llama").config
    card = fake_gpu(monkeypatch, 40)
    train, evaluate = (
        colab.check_runtime(load_recipe("gsm8k_llama")),
        colab.check_runtime(load_recipe("gsm8k_llama"), purpose="evaluate"),
    )
    peak = plan_memory(config).peak(card) / GIB
    assert train == (
        f"gsm8k_llama needs about {peak:.1f} GB of GPU memory to train (an estimate: python recipes/run.py "
        "gsm8k_llama --plan); this runtime has NVIDIA A100-SXM4-40GB with 40.0 GB. It fits."
    )
    needed = float(evaluate.split("about ")[1].split(" GB")[0])
    assert 16 < needed < peak  # the bf16 weights (~15 GB) and generation, less than training


def test_too_small_gpu_stops_with_overrides_that_fit_and_keep_the_effective_batch(monkeypatch):
    overrides = ["trainer.activation_checkpointing=false"]  # a training phase a smaller batch shrinks
    config = load_recipe("gsm8k_llama", overrides).config
    card = fake_gpu(monkeypatch, plan_memory(config).peak(80 * GIB) / GIB - 1, name="small")
    with pytest.raises(
        colab.ColabError,
        match=r"to overrides in the parameters cell \(they keep the effective batch and the generation batch\)",
    ) as error:
        colab.check_runtime(load_recipe("gsm8k_llama", overrides))
    added = re.search(r'Add ((?:"trainer\.\w+=\d+"(?:, )?)+) to overrides', str(error.value)).group(1)
    refit = load_recipe("gsm8k_llama", [*overrides, *re.findall(r'"([^"]+)"', added)]).config
    t, new = config["trainer"], refit["trainer"]
    assert new["per_device_train_batch_size"] < t["per_device_train_batch_size"]
    assert (
        new["per_device_train_batch_size"] * new["gradient_accumulation_steps"]
        == t["per_device_train_batch_size"] * t["gradient_accumulation_steps"]
    )
    assert plan_memory(refit).fits(card)
    fake_gpu(monkeypatch, 12, name="L4-ish", capability=(8, 9))  # the bf16 weights alone do not fit
    with pytest.raises(
        colab.ColabError, match=r"but this runtime has L4-ish with 12.0 GB. Choose a larger GPU"
    ):
        colab.check_runtime(load_recipe("gsm8k_llama"))


def test_bfloat16_on_a_gpu_without_it_stops_with_the_float16_overrides(monkeypatch):
    fake_gpu(monkeypatch, 15, name="Tesla T4", capability=(7, 5))
    with pytest.raises(colab.ColabError) as error:
        colab.check_runtime(load_recipe("gsm8k_qwen_small"))
    assert str(error.value) == (
        "gsm8k_qwen_small: model.dtype=bfloat16 and trainer.bf16=true ask for bfloat16, which this Tesla T4 (compute "
        'capability 7.5) does not have. Add "model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true" to '
        "overrides in the parameters cell, or choose an A100 or L4 GPU (Runtime > Change runtime type)."
    )
    fp16 = ["model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true"]  # the fix works
    assert colab.check_runtime(load_recipe("gsm8k_qwen_small", fp16)).endswith("It fits.")


def records(path, correct: list[bool]):
    rows = [{"id": f"q{i}", "sample": 0, "correct": c} for i, c in enumerate(correct)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_run_step_returns_the_api_result_and_stops_run_all_on_a_user_error(tmp_path, capsys):
    base, tuned = records(tmp_path / "b.jsonl", [False] * 4), records(tmp_path / "t.jsonl", [True] * 4)
    comparison = colab.run_step(compare.compare, base, tuned, plot=tmp_path / "c.png")
    assert capsys.readouterr().out == "> stats.compare.compare\n"
    assert (
        format_text(comparison).startswith("Paired comparison by question") and (tmp_path / "c.png").is_file()
    )
    with pytest.raises(colab.ColabError, match=r"^stats.compare.compare stopped: .*missing.jsonl"):
        colab.run_step(compare.compare, base, tmp_path / "missing.jsonl")
    with pytest.raises(TypeError):  # a programming error is not dressed up as the user's
        colab.run_step(compare.compare, base, tuned, no_such_option=True)


def test_drive_paths_need_colab_and_local_folders_are_made(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", None)
    with pytest.raises(colab.ColabError, match="only Colab mounts"):
        colab.prepare_folder("/content/drive/MyDrive/grpo-recipes")
    folder = colab.prepare_folder(tmp_path / "a" / "b")
    assert folder.is_dir()
    colab.mount_drive(None, "s3://b/run", tmp_path)  # nothing on Drive: nothing to do
