"""What in a recipe alone decides whether generation may merge LoRA into the weights (``recipes/merged_lora.py``).

Plain rules over the recipe's dicts, with no torch: the recipe checks, the planner and ``--plan`` read them, and
those answer without importing it.
"""

from __future__ import annotations


def merge_is_exact(model: dict) -> bool:
    """Whether merged weights keep a LoRA update as peft's branch applies it: float32 ones do (the tests compare
    tokens); rounded to bf16, an update below half a unit in the last place of a base weight is lost entirely,
    and early in training most of it is (``benchmarks/merge_rounding.py``)."""
    return model["dtype"] == "float32"


def lora_dropout_active(config: dict) -> bool:
    """Whether the adapter's dropout runs while generating: ``lora.dropout`` above 0, unless
    ``trainer.disable_dropout`` (TRL then sets every dropout of the model, LoRA's included, to 0)."""
    return config["lora"]["dropout"] > 0 and not (config.get("trainer") or {}).get("disable_dropout")


def auto_declines(config: dict) -> str | None:
    """What in the recipe alone makes ``auto`` keep peft's branch: ``"vllm"`` or ``"paged"`` (another engine
    generates), ``"8bit"`` (bitsandbytes' 8-bit layers compute with more than a weight: they cannot merge),
    ``"dropout"`` (``lora_dropout_active``), ``"dtype"`` (not ``merge_is_exact``), or None.

    The one statement of the rule: ``use_merged_generation``, the planner and ``--plan`` read it. Sections may be
    partial (the planner's hand-made dicts).
    """
    t = config.get("trainer") or {}
    if t.get("use_vllm"):
        return "vllm"
    if t.get("use_transformers_continuous_batching"):
        return "paged"
    if config["model"].get("quantization") == "8bit":
        return "8bit"
    if lora_dropout_active(config):
        return "dropout"
    return None if merge_is_exact(config["model"]) else "dtype"
