"""The devices a generation test runs on: the CPU always, and the GPU where the machine has one (CI has none)."""

import pytest
import torch

ON_EACH_DEVICE = pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine"),
        ),
    ],
)
