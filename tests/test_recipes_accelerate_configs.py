"""The shipped accelerate configs load with accelerate's own reader and say what their headers promise."""

from __future__ import annotations

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.utils import DistributedType
from conftest import REPO

EXPECTED = {
    "single_gpu.yaml": (DistributedType.NO, {}),
    "multi_gpu.yaml": (DistributedType.MULTI_GPU, {}),
    "deepspeed_zero2_offload.yaml": (
        DistributedType.DEEPSPEED,
        {"zero_stage": 2, "offload_optimizer_device": "cpu"},
    ),
    "deepspeed_zero3.yaml": (DistributedType.DEEPSPEED, {"zero_stage": 3}),
    "fsdp.yaml": (DistributedType.FSDP, {"fsdp_version": 2, "fsdp_state_dict_type": "FULL_STATE_DICT"}),
}


def test_every_shipped_config_is_checked():
    assert sorted(p.name for p in (REPO / "recipes" / "accelerate").glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_loads_with_its_distribution_and_bf16(name):
    path = REPO / "recipes" / "accelerate" / name
    config = load_config_from_file(str(path))
    distributed, settings = EXPECTED[name]
    assert config.distributed_type == distributed and config.mixed_precision == "bf16"
    plugin = config.deepspeed_config or config.fsdp_config or {}
    assert {key: plugin.get(key) for key in settings} == settings
    assert (
        f"--config_file recipes/accelerate/{name}" in path.read_text().splitlines()[1]
    )  # header gives the command
