"""DeepSpeed ZeRO-2 with the optimizer offloaded to CPU RAM, launched exactly as the README says, on 2 CPU processes:
it trains, saves a full non-zero adapter and both ranks' optimizer shards, and resumes onto the same loss curve.

The first run on a machine compiles DeepSpeed's CPU Adam and shared-memory ops (~90 s on 2 cores), cached in
~/.cache/torch_extensions (TORCH_EXTENSIONS_DIR) for every later run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from _callbacks_helpers import s3_bucket
from _distributed import COMMON, assert_full_trained_adapters
from conftest import REPO, free_port, plugin_env, require_optional
from safetensors.torch import load_file

from callbacks.manifest import local_checkpoint_problems
from callbacks.remote import scan_remote
from callbacks.s3_store import S3Store

pytestmark = pytest.mark.slow
CONFIG = "recipes/accelerate/deepspeed_zero2_offload.yaml"


def zero2_command(*machine: str) -> list[str]:
    """The README's ZeRO-2 offload command with 2 processes (``machine``: the flags of one of several machines)."""
    require_optional("deepspeed", "pip install -e '.[deepspeed]'")
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / CONFIG),
            "--num_processes", "2", *machine, str(REPO / "recipes" / "run.py"), "gsm8k_tiny", *COMMON]  # fmt: skip


def launch_zero2(out, *overrides: str) -> subprocess.CompletedProcess:
    command = [
        *zero2_command("--main_process_port", str(free_port())),
        f"trainer.output_dir={out}",
        *overrides,
    ]
    result = subprocess.run(
        command, check=False, cwd=REPO, env=plugin_env(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def curve(out) -> dict[int, tuple[float, float, float]]:
    """Step -> (loss, grad_norm, reward): GRPO's loss is near 0 on-policy, so the gradient's norm and the reward
    are what show two runs took the same steps."""
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    return {h["step"]: (h["loss"], h["grad_norm"], h["reward"]) for h in history if "loss" in h}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero2") / "out"
    return out, launch_zero2(out)


def test_zero2_offload_trains_on_two_processes_with_the_recipes_precision(uninterrupted, tiny_model_dir):
    out, result = uninterrupted
    # The config's bf16 yields to the float32 CPU recipe, said once, instead of DeepSpeed's config-mismatch error.
    assert result.stderr.count("asks for mixed_precision=bf16, but recipe gsm8k_tiny") == 1
    assert "training with mixed_precision=no (the recipe's)" in result.stderr
    for step in (2, 4):
        checkpoint = out / f"checkpoint-{step}"
        shards = sorted(p.name for p in (checkpoint / f"global_step{step}").glob("*optim_states.pt"))
        assert shards == [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)]
        assert local_checkpoint_problems(checkpoint) == []  # sealed with both ranks' files
        manifest = json.loads((checkpoint / "manifest.json").read_text())
        assert {f"global_step{step}/{name}" for name in shards} <= set(manifest["files"])
    assert_full_trained_adapters(out, tiny_model_dir)
    assert result.stderr.count("Final adapter saved") == 1


def test_zero2_offload_resumes_onto_the_uninterrupted_loss_curve(uninterrupted, tmp_path):
    reference, _ = uninterrupted
    half = tmp_path / "half"
    shutil.copytree(reference / "checkpoint-2", half / "checkpoint-2")  # a run that stopped after step 2
    result = launch_zero2(half)
    assert f"Resuming from {half / 'checkpoint-2'}" in result.stderr
    expected, resumed = curve(reference), curve(half)
    assert sorted(resumed) == [1, 2, 3, 4] and expected[3] != expected[4]
    for step in (3, 4):
        assert resumed[step] == pytest.approx(expected[step], rel=1e-4, abs=1e-6), (step, resumed, expected)
    final, reference_final = (
        load_file(half / "adapter_model.safetensors"),
        load_file(reference / "adapter_model.safetensors"),
    )
    assert all(torch.allclose(t, reference_final[k], atol=1e-5) for k, t in final.items())


def launch_two_machines(root, *overrides: str) -> list[str]:
    """Machine ranks 0 and 1 on 127.0.0.1, one process each, each in its own folder (no disk shared)."""
    port, runs = free_port(), []
    for rank in (0, 1):
        (root / f"machine{rank}").mkdir(parents=True, exist_ok=True)
        machine = ["--num_machines", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1",
                   "--main_process_port", str(port)]  # fmt: skip
        runs.append(
            subprocess.Popen(
                [*zero2_command(*machine), "trainer.output_dir=out", *overrides],
                cwd=root / f"machine{rank}",
                # One host plays both machines: a thread per process, as torchrun sets for several local processes
                # (accelerate's CPU default of 2 each makes 2 processes on 2 cores thrash: 5x slower).
                env=plugin_env(OMP_NUM_THREADS="1"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    logs = [run.communicate(timeout=900)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(log[-3000:] for log in logs)
    return logs


def test_two_machines_without_a_shared_disk_commit_every_ranks_shards_and_resume_from_the_store(
    tmp_path, monkeypatch
):
    s3 = s3_bucket(monkeypatch)
    sync = [f"checkpoint.uri={s3.uri('two')}", f"checkpoint.endpoint_url={s3.endpoint}"]
    launch_two_machines(tmp_path, *sync)
    machine0, machine1 = (tmp_path / f"machine{r}" / "out" for r in (0, 1))
    store = S3Store(s3.bucket, "two", endpoint_url=s3.endpoint)
    # Each machine's folder holds its own rank's files only; the committed checkpoint holds both.
    assert (machine1 / "checkpoint-4" / "rng_state_1.pth").is_file()
    assert not (machine1 / "checkpoint-4" / "rng_state_0.pth").exists()
    assert not (machine0 / "checkpoint-4" / "rng_state_1.pth").exists()
    committed = {c.name: c for c in scan_remote(store)}
    for step in (2, 4):
        checkpoint = committed[f"checkpoint-{step}"]
        assert checkpoint.complete, checkpoint.problems
        shards = {f"global_step{step}/zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)}
        assert {"rng_state_0.pth", "rng_state_1.pth", *shards} <= set(checkpoint.manifest["files"])
        assert not [
            rel for rel in checkpoint.files if rel.startswith(".parts/")
        ]  # receipts cleared at commit
    # Both machines lose their disks; both resume from the store and train on to the same step.
    shutil.rmtree(machine0), shutil.rmtree(machine1)
    logs = launch_two_machines(tmp_path, *sync, "trainer.max_steps=6")
    assert "machine-1: downloading" in logs[1] and "checkpoint-4" in logs[1]
    assert all("Resuming from out/checkpoint-4" in log for log in logs)
    assert json.loads((machine0 / "trainer_state.json").read_text())["global_step"] == 6
    assert (machine1 / "checkpoint-6" / "rng_state_1.pth").is_file()
    # The other machine rotates its own folders too (trainer.save_total_limit=2, as the Trainer does on the main).
    assert sorted(p.name for p in machine1.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
    assert {c.name: c.complete for c in scan_remote(store)}["checkpoint-6"]
