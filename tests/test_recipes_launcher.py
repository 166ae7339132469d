"""What `accelerate launch` decided, checked against the recipe: precision reconciled, FSDP refused where it
would not be FSDP or would save no adapter; a saved adapter checked against the model that trained it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, free_port
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from torch.utils.cpp_extension import include_paths

from callbacks.saved_adapter import saved_adapter_problems, trained_lora_shapes
from recipes.launcher import check_engine, check_local_processes, reconcile_precision, say_deepspeed_build
from recipes.layers import RecipeError
from recipes.recipe import load_recipe


@pytest.mark.parametrize(
    ("launched", "overrides", "after", "warned"),
    [
        ("bf16", [], "no", True),  # a bf16 accelerate config, a float32 CPU recipe
        ("no", [], "no", False),
        (
            "no",
            ["trainer.bf16=true", "model.dtype=bfloat16"],
            "bf16",
            False,
        ),  # accelerate's default: no noise
        ("bf16", ["trainer.fp16=true", "model.dtype=float16"], "fp16", True),
    ],
)
def test_the_recipes_precision_wins_and_a_change_is_said(
    monkeypatch, caplog, launched, overrides, after, warned
):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", launched)
    monkeypatch.delenv("RANK", raising=False)
    with caplog.at_level(logging.WARNING, logger="recipes.launcher"):
        reconcile_precision(load_recipe("gsm8k_tiny", overrides))
    assert os.environ["ACCELERATE_MIXED_PRECISION"] == after
    assert bool(caplog.records) is warned
    if warned:
        assert f"asks for mixed_precision={launched}, but recipe gsm8k_tiny" in caplog.text
        assert f"training with mixed_precision={after} (the recipe's)" in caplog.text


def test_without_a_launcher_nothing_is_set(monkeypatch):
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    reconcile_precision(load_recipe("gsm8k_tiny"))
    assert "ACCELERATE_MIXED_PRECISION" not in os.environ


def test_a_first_deepspeed_run_says_its_ops_compile_and_a_built_machine_says_nothing(
    monkeypatch, caplog, tmp_path
):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.delenv("RANK", raising=False)
    caplog.set_level(logging.INFO, logger="recipes.launcher")
    say_deepspeed_build()  # no DeepSpeed launch: nothing to say
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    say_deepspeed_build()
    assert (
        caplog.text.count("DeepSpeed compiles its C++ ops") == 1
        and f"then cached in {tmp_path}" in caplog.text
    )
    caplog.clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU run without optimizer offload
    say_deepspeed_build()
    assert caplog.text == ""  # builds nothing: no notice on every launch
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    say_deepspeed_build()
    assert "DeepSpeed compiles its C++ ops" in caplog.text
    built = tmp_path / "py311_cpu" / "cpu_adam"
    built.mkdir(parents=True)
    (built / "cpu_adam.so").write_bytes(b"built")
    # Built from another environment's torch: ninja rebuilds it, silently, at this launch.
    (built / "build.ninja").write_text(
        "cflags = -isystem /elsewhere/.venv/lib/python3.11/site-packages/torch/include"
    )
    caplog.clear()
    say_deepspeed_build()
    assert "(CPU Adam, the CPU communication op) again, for this environment's torch" in caplog.text
    assert "give each its own TORCH_EXTENSIONS_DIR" in caplog.text
    (built / "build.ninja").write_text(f"cflags = -isystem {include_paths()[0]}")
    caplog.clear()
    say_deepspeed_build()
    assert caplog.text == ""


def test_fsdp_is_refused_on_a_cpu_and_with_a_sharded_state_dict(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_STATE_DICT_TYPE", "FULL_STATE_DICT")
    with pytest.raises(RecipeError, match="FSDP needs GPUs.*would train as plain DDP"):
        check_engine(cuda_available=False)
    check_engine(cuda_available=True)
    monkeypatch.setenv("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT")
    with pytest.raises(
        RecipeError, match="SHARDED_STATE_DICT in the accelerate config saves no adapter.*FULL_STATE"
    ):
        check_engine(cuda_available=True)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    check_engine(cuda_available=False)  # not FSDP: nothing to refuse


def test_more_processes_than_gpus_are_refused_and_more_than_cores_are_said(monkeypatch, caplog):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # multi_gpu.yaml's num_processes
    with pytest.raises(
        RecipeError, match=r"starts 8 processes on this machine, which has 2 GPUs.*--num_processes 2"
    ):
        check_local_processes(gpus=2, cpus=64)
    check_local_processes(gpus=8, cpus=64)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(RecipeError, match="which has 1 GPU: one process per GPU"):
        check_local_processes(gpus=1, cpus=64)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a scheduler may have given each process its own card
    with caplog.at_level(logging.WARNING, logger="recipes.launcher"):
        check_local_processes(gpus=1, cpus=64)
    assert "each sees one GPU (CUDA_VISIBLE_DEVICES=3)" in caplog.text
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(RecipeError, match="which has 2 GPUs"):
        check_local_processes(gpus=2, cpus=64)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="recipes.launcher"):
        check_local_processes(gpus=0, cpus=8)
        assert not caplog.text
        check_local_processes(gpus=0, cpus=2)
    assert "starts 8 CPU processes on a machine with 2 cores" in caplog.text
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    check_local_processes(gpus=1, cpus=1)  # no launcher: one process


@pytest.mark.slow
def test_the_shipped_fsdp_config_is_refused_in_one_line_on_a_cpu(tmp_path):
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "recipes/accelerate/fsdp.yaml",
               "--num_processes", "2", "--main_process_port", str(free_port()), "recipes/run.py", "gsm8k_tiny",
               f"trainer.output_dir={tmp_path / 'out'}"]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode != 0
    assert "error: FSDP needs GPUs" in result.stderr and "DistributedDataParallel" not in result.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.fixture
def peft_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    return get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))


def test_a_saved_adapter_is_checked_against_the_trained_model(peft_model, tmp_path):
    peft_model.save_pretrained(tmp_path)
    assert saved_adapter_problems(tmp_path, peft_model) == []
    saved = load_file(tmp_path / "adapter_model.safetensors")
    assert set(saved) == set(trained_lora_shapes(peft_model))
    # A shard of one matrix and a missing one, as a sharded engine could leave them.
    key, lost = sorted(saved)[:2]
    save_file(
        {**{k: v for k, v in saved.items() if k != lost}, key: saved[key][:2].clone()},
        tmp_path / "adapter_model.safetensors",
    )
    problems = saved_adapter_problems(tmp_path, peft_model)
    assert any(f"holds {key} with shape [2, " in p and "(a shard?)" in p for p in problems)
    assert any(p.endswith(f"lacks {lost}") for p in problems)
    (tmp_path / "adapter_model.safetensors").unlink()
    assert saved_adapter_problems(tmp_path, peft_model) == [
        f"{tmp_path / 'adapter_model.safetensors'} was not written"
    ]


def test_zero3_partitioned_parameters_are_compared_by_their_full_shape(peft_model):
    name, parameter = next((n, p) for n, p in peft_model.named_parameters() if "lora_A" in n)
    full = tuple(parameter.shape)
    parameter.data = torch.empty(0)  # what ZeRO-3 leaves on a rank, with the full shape kept aside
    parameter.ds_shape = torch.Size(full)
    assert trained_lora_shapes(peft_model)[name.replace(".default", "")] == full
