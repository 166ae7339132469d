"""benchmarks/live_tensors.py: live tensor bytes counted op by op, per phase, as CUDA's allocated counter would."""

from __future__ import annotations

from unittest import mock

import torch
from trl.extras.profiling import ProfilingContext

from benchmarks.live_tensors import LiveTensorBytes

MB = 1_000_000  # a 1000 x 250 float32 tensor


def _block() -> torch.Tensor:
    return torch.ones(1000, 250)


def test_counts_given_and_new_storages_once_until_freed():
    weight = torch.randn(1000, 250)
    with LiveTensorBytes([weight, weight[:10]]) as live:  # a view of a counted storage adds nothing
        assert live.live == MB
        x = weight * 2
        view = x.view(250, 1000).t()  # views share x's storage
        assert live.live == 2 * MB and view.shape == (1000, 250)
        del x, view
        assert live.live == MB  # freed with its last reference
        y = weight.clone()
    assert live.peak == {"generation": 0, "training": 2 * MB}
    assert y.sum() == weight.sum()


def test_autograd_backward_is_counted():
    weight = torch.randn(1000, 250, requires_grad=True)
    with LiveTensorBytes([weight]) as live:
        loss = (weight * 2).relu().sum()  # relu keeps its output for backward; the product is freed
        assert live.live == 2 * MB + 4  # weight, relu's saved output, the scalar loss
        loss.backward()  # frees the saved output and leaves weight.grad
        assert live.live == 2 * MB + 4 and weight.grad is not None
    assert live.peak["training"] >= 3 * MB  # saved output, incoming gradient and weight.grad at once


def test_peaks_are_kept_per_phase_by_trls_profiling_blocks():
    with LiveTensorBytes() as live:
        with ProfilingContext("GRPOTrainer.transformers.generate", report_to=[]):
            assert live.phase == "generation"
            a, b = _block(), _block()
            del a, b
        assert live.phase == "training"
        c = _block()
    assert live.peak == {"generation": 2 * MB, "training": MB}
    assert c.numel() == 250_000


def test_the_trainers_generation_call_is_generation_also_outside_trls_block():
    """The merged LoRA copies are made before TRL's generate block opens and freed after it closes: they are
    generation's memory, not training's (counted as training, they read as a planner miss of 0.35 GB)."""
    from recipes.trainer import RecipeGRPOTrainer

    phases, original = [], RecipeGRPOTrainer._generate_single_turn

    def single_turn(trainer):  # what RecipeGRPOTrainer does: merge, generate inside TRL's block, free
        merged = _block()
        phases.append(live.phase)
        with ProfilingContext("GRPOTrainer.transformers.generate", report_to=[]):
            tokens = _block()
        phases.append(live.phase)
        del merged
        return tokens

    with mock.patch.object(RecipeGRPOTrainer, "_generate_single_turn", single_turn):
        with LiveTensorBytes() as live:
            tokens = RecipeGRPOTrainer._generate_single_turn(None)
            assert live.phase == "training"
            del tokens
            d = _block()
        assert RecipeGRPOTrainer._generate_single_turn is single_turn  # put back on exit, not left wrapped
    assert RecipeGRPOTrainer._generate_single_turn is original
    assert phases == ["generation", "generation"]
    assert live.peak == {"generation": 2 * MB, "training": MB}
    assert d.numel() == 250_000


def test_other_devices_do_not_count():
    with LiveTensorBytes(device_type="cuda") as live:
        x = _block() + 1
    assert live.live == 0 and live.peak["training"] == 0 and x.device.type == "cpu"
