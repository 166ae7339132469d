"""What the planner reads of an accelerate launch: DeepSpeed's optimizer offload, and a weight sharding (ZeRO-3,
FSDP) the formulas do not model; from a config file, or from what ``accelerate launch`` exported."""

from __future__ import annotations

import os

from recipes.recipe import RecipeError


def _launch(config_file: str | None) -> dict:
    """What the planner reads of a launch: DeepSpeed (its ZeRO stage and optimizer offload) or FSDP.

    Read from the accelerate config file when one is named, else from what ``accelerate launch`` exported.

    Raises:
        RecipeError: The config file cannot be read.
    """
    if config_file:
        from accelerate.commands.config.config_args import load_config_from_file
        from accelerate.utils import DistributedType

        try:
            config = load_config_from_file(config_file)
        except (OSError, ValueError, TypeError) as e:
            raise RecipeError(
                f"--config_file {config_file}: not a readable accelerate config ({e})"
            ) from None
        deepspeed = config.distributed_type == DistributedType.DEEPSPEED
        settings = (config.deepspeed_config or {}) if deepspeed else {}
        return {
            "deepspeed": deepspeed,
            "offload": settings.get("offload_optimizer_device", "none"),
            "stage": settings.get("zero_stage"),
            "fsdp": config.distributed_type == DistributedType.FSDP,
        }
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    return {
        "deepspeed": deepspeed,
        "offload": os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none")
        if deepspeed
        else "none",
        "stage": os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") if deepspeed else None,
        "fsdp": os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true",
    }


def offloads_optimizer(config_file: str | None = None) -> bool:
    """Whether the launch keeps the optimizer in host RAM: DeepSpeed with ``offload_optimizer_device: cpu``.

    Raises:
        RecipeError: The config file cannot be read, or it offloads to NVMe (not modelled).
    """
    device = str(_launch(config_file)["offload"]).lower()
    if device == "nvme":
        raise RecipeError("offload_optimizer_device: nvme is not modelled by the planner; plan with cpu.")
    return device == "cpu"


def unmodelled_sharding(config_file: str | None = None) -> str | None:
    """The name of the launch's weight sharding (ZeRO-3, FSDP), which the formulas do not model, or None."""
    launch = _launch(config_file)
    if launch["deepspeed"] and str(launch["stage"]) == "3":
        return "DeepSpeed ZeRO-3"
    return "FSDP" if launch["fsdp"] else None
