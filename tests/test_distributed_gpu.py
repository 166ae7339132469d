"""The distributed engines on the GPUs of the machine, one process per GPU, in bf16 as the shipped accelerate configs
ask: FSDP saves full adapters that peft loads without FSDP, and ZeRO-2 with the optimizer in CPU RAM trains and
saves every rank's shards. GPU tests: ``GRPO_RECIPES_GPU_TESTS=1 python -m pytest -m gpu`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from _distributed import COMMON, assert_full_trained_adapters, failure_text
from conftest import REPO, free_port, plugin_env, require_optional

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
BF16 = ["model.dtype=bfloat16", "trainer.bf16=true"]


def launch_on_the_gpus(config: str, out) -> subprocess.CompletedProcess:
    """gsm8k_tiny for 4 steps through ``accelerate launch --config_file CONFIG``, one process per GPU, reporting
    how its model is wrapped (OUTPUT_DIR/engine.json)."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / config),
               "--num_processes", str(torch.cuda.device_count()), "--main_process_port", str(free_port()),
               str(REPO / "recipes" / "run.py"), "gsm8k_tiny", *COMMON, *BF16, f"trainer.output_dir={out}",
               "callbacks=[{path: '_plugins:EngineReport'}]"]  # fmt: skip
    result = subprocess.run(
        command, check=False, cwd=REPO, env=plugin_env(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, failure_text(result.stderr)
    assert result.stderr.count("Final adapter saved") == 1
    assert "asks for mixed_precision" not in result.stderr  # the configs' bf16 is the recipe's here
    return result


def test_fsdp_saves_full_adapters_that_peft_loads_without_fsdp(tmp_path, tiny_model_dir):
    out = tmp_path / "fsdp"
    launch_on_the_gpus("recipes/accelerate/fsdp.yaml", out)
    engine = json.loads((out / "engine.json").read_text())
    assert engine["sharded"] and engine["class"].startswith("FSDP"), engine  # FSDP2, not plain DDP
    assert_full_trained_adapters(out, tiny_model_dir)


def test_zero2_offload_trains_on_the_gpus_with_the_optimizer_in_cpu_ram(tmp_path, tiny_model_dir):
    require_optional("deepspeed", "pip install -e '.[deepspeed]'")
    out = tmp_path / "zero2"
    launch_on_the_gpus("recipes/accelerate/deepspeed_zero2_offload.yaml", out)
    for step in (2, 4):
        shards = sorted(
            p.name for p in (out / f"checkpoint-{step}" / f"global_step{step}").glob("*optim_states.pt")
        )
        ranks = range(torch.cuda.device_count())
        # bf16 ZeRO names its shards bf16_zero_pp_rank_* (callbacks/manifest.py counts ranks under either name)
        assert shards == [f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in ranks]
    assert_full_trained_adapters(out, tiny_model_dir)
