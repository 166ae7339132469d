"""Operators per decode step, counted on a CPU: a property of the decode step, not of how long one generates."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import REPO
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.decode_ops import main
from benchmarks.decode_profile import decode_profile
from recipes.recipe import load_recipe


def test_ops_per_step_do_not_depend_on_the_steps_measured_and_lora_adds_its_branch(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    batch = tokenizer(["Natalia sold clips to 48 friends."] * 4, return_tensors="pt")
    torch.manual_seed(0)
    base = decode_profile(model, batch, steps=8)
    assert (
        base["ops_per_step"] > 50
        and base["ops_per_step"] == decode_profile(model, batch, steps=16)["ops_per_step"]
    )
    adapted = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).eval()
    per_step = decode_profile(adapted, batch, steps=8)["ops_per_step"]
    # Each adapted projection adds its branch (dropout, lora_A, lora_B, scale, add): 2 layers x 2 projections.
    assert per_step - base["ops_per_step"] >= 2 * 2 * 4


def test_the_table_prints_a_row_per_model(capsys):
    assert main(["gsm8k_tiny", "--batch", "2", "--steps", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "gsm8k_tiny: decode steps of a batch of 2",
        "| model | aten ops per decode step | ms per decode step |",
        "|---|---|---|",
    ]
    assert [line.split(" | ")[0] for line in out[3:]] == ["| base", "| + LoRA r=8", "| + LoRA r=8, merged"]
    ops = [float(line.split(" | ")[1]) for line in out[3:]]
    assert ops[2] == ops[0] < ops[1]  # merged, a projection is one matmul again


def test_each_row_comes_as_soon_as_it_is_measured(monkeypatch, tiny_model_dir):
    """A GPU run stopped at its time limit printed nothing: the table came only after the slow compiled row."""
    from benchmarks import decode_ops, decode_profile

    measured = []
    monkeypatch.setattr(
        decode_profile,
        "decode_profile",
        lambda *a, **k: measured.append(k) or {"ops_per_step": 1, "ms_per_step": 2.0},
    )
    rows = decode_profile.profile_recipe(load_recipe("gsm8k_tiny", []), batch_size=2, steps=4, compiled=True)
    assert next(rows)["model"] == "base" and len(measured) == 1
    assert [r["model"] for r in rows] == ["+ LoRA r=8", "+ LoRA r=8, merged", "+ LoRA r=8, merged, compiled"]
    assert (
        decode_ops.table_row({"model": "base", "ops_per_step": 1, "ms_per_step": 2.0}) == "| base | 1 | 2.0 |"
    )


def test_an_unknown_recipe_is_a_message_not_a_traceback(capsys):
    assert main(["gsm8k_tiyn"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "gsm8k_tiny" in err and "Traceback" not in err


def test_layers_needs_a_random_weight_shape(capsys):
    with pytest.raises(SystemExit):
        main(["gsm8k_tiny", "--layers", "2"])
    assert "--layers takes a positive number and needs --random-weights" in capsys.readouterr().err


def test_the_script_holds_back_the_bitsandbytes_cpu_kernel_hint_as_every_entry_point_does():
    """Importing transformers before `common` let bitsandbytes' hint (on AVX512-BF16 CPUs: its optional 4-bit CPU
    kernel was not fetched) open every `python benchmarks/decode_ops.py` run, --help included."""
    result = subprocess.run(
        [sys.executable, "benchmarks/decode_ops.py", "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout.startswith("usage: decode_ops.py"), result.stderr
    assert "gemm_4bit_forward" not in result.stderr, result.stderr
