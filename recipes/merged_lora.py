"""Generate with each LoRA update merged into its base weight, and leave the base exactly as it was.

peft runs an adapter as a side branch on every adapted projection: on a GPU each decode step pays its extra
kernel launches (dropout, two small matmuls, scale, add) for every projection of every layer, which costs more
than the arithmetic at decode's one token per sequence. Merged, a projection is one matmul again.

peft's own ``merge``/``unmerge`` add the update into the weight and subtract it again: in bf16 each cycle rounds,
so the frozen base would drift a little every training step, and on a 4-bit base merging re-quantises it. Here the
base layer is never touched: each adapted layer's ``base_layer`` is swapped, for the duration, for a plain linear
holding ``base + update`` (a 4-bit base dequantised first, as its own forward does), and the original module is
put back afterwards. Cost: one copy of the adapted weights, in the compute dtype, while generating
(``recipes/planner/memory.py`` counts it).

What changes is only rounding: the merged weight is ``base + update`` rounded once to the compute dtype, where the
branch adds the update's output to the base's output. In float32 that is invisible (the tests check that
temperature-0 tokens are the same); in bf16 an update below half a unit in the last place of a base weight is
lost in that weight, as it is when TRL syncs a merged adapter to vLLM. So ``auto`` merges float32 weights only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref

import torch
import torch.nn.functional as F

from common.errors import UserError
from recipes.merge_rules import auto_declines

logger = logging.getLogger(__name__)


class MergedLinear(torch.nn.Module):
    """A base linear with its LoRA updates added in. Like a bitsandbytes linear, it answers in its input's dtype."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        # Frozen parameters: a compiled decode step (CUDA graphs) treats parameters as fixed addresses.
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        # A copy: the base layer's own bias must stay out of reach of anything that casts this module.
        bias = bias.detach().to(weight.dtype, copy=True) if bias is not None else None
        self.bias = torch.nn.Parameter(bias, requires_grad=False) if bias is not None else None

    def refill(self, weight: torch.Tensor) -> bool:
        """Copy a newly merged weight into this one, keeping its address; False when the shapes differ."""
        if weight.shape != self.weight.shape or weight.dtype != self.weight.dtype:
            return False
        self.weight.copy_(weight)
        return True

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)


def _base_weight(base: torch.nn.Linear) -> tuple[torch.Tensor, torch.dtype]:
    """The base layer's weight as its forward computes with it, and that compute dtype: a 4-bit weight
    dequantised, computed in bitsandbytes' ``compute_dtype``."""
    from peft.utils.integrations import dequantize_bnb_weight, get_bnb_param_type

    if get_bnb_param_type(base.weight) == "4bit":
        weight = dequantize_bnb_weight(base.weight)
        return weight, getattr(base, "compute_dtype", None) or weight.dtype
    return base.weight, base.weight.dtype


def _merged_weight(layer) -> torch.Tensor:
    """The layer's base weight plus the updates of its active adapters, summed in float32 and rounded once."""
    base, dtype = _base_weight(layer.base_layer)
    # Never ``float()``: on a float32 base that returns the weight itself, and the sum would land in it.
    total = base.to(torch.float32, copy=True)
    for name in layer.active_adapters:
        if name in layer.lora_A:
            total += layer.get_delta_weight(name).float()
    return total.to(dtype)


def _check_mergeable(layer, where: str) -> None:
    base = layer.base_layer
    weight = getattr(base, "weight", None)
    names = [n for n in layer.active_adapters if n in layer.lora_A]
    # Exactly these: other nn.Linear subclasses (FP8, compressed or 8-bit weights) compute with more than .weight.
    known = type(base) is torch.nn.Linear or type(base).__name__ == "Linear4bit"
    variant = any(layer.lora_bias.get(n) or n in getattr(layer, "lora_variant", {}) for n in names)
    why = (
        f"a {type(base).__name__} base layer; it merges plain and bitsandbytes 4-bit linears" if not known
        else "a LoRA bias or a LoRA variant such as DoRA" if variant
        else "sharded weights" if hasattr(weight, "ds_shape") or type(weight).__name__ == "DTensor"
        else "already merged by peft" if layer.merged
        else "4-bit weights repacked by bitsandbytes for its CPU bf16 kernel, which do not dequantise exactly"
        if getattr(getattr(weight, "quant_state", None), "packing_format_for_cpu", False)
        else None
    )  # fmt: skip
    if why:
        raise UserError(
            f"lora.merged_generation cannot merge {where} ({why}): it merges plain LoRA on the linears of a "
            "model held whole on each process (one GPU, DDP, ZeRO-1/2). Set lora.merged_generation=false."
        )
    if any(getattr(layer.lora_dropout[name], "p", 0) > 0 for name in layer.active_adapters):
        raise UserError(
            f"lora.merged_generation: {where} has LoRA dropout, which TRL keeps active while generating; merged "
            "weights cannot drop it. Set lora.dropout=0, or lora.merged_generation=false."
        )


# LoRA layer -> the MergedLinear it generated with last, for ``keep=True``; weak, so a dropped model frees them.
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _merged_linear(layer, keep: bool) -> MergedLinear:
    weight = _merged_weight(layer)
    kept = _KEPT.get(layer) if keep else None
    if kept is not None and kept.refill(weight):
        return kept
    merged = MergedLinear(weight, layer.base_layer.bias)
    if keep:
        _KEPT[layer] = merged
    return merged


def merge_adapters(model: torch.nn.Module, keep: bool = False) -> list[tuple]:
    """Give every active LoRA layer of ``model`` a merged base layer; returns what ``restore_adapters`` puts back.

    Dropping the returned list instead makes the merge permanent and frees the original base layers (an evaluation
    that only generates). A model without active LoRA layers is left unchanged.

    Args:
        keep: Keep the merged copies between merges and refill them in place, so every generation computes with
            tensors at the same addresses: a compiled decode step's CUDA graphs would otherwise be recorded again
            each time. They then hold their memory between generations too (the planner counts it).

    Raises:
        UserError: a LoRA layer that cannot be merged (a base other than a plain or 4-bit linear, a LoRA bias or
            variant, sharded weights, dropout, merged by peft).
    """
    from peft.tuners.lora import LoraLayer

    active = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, LoraLayer) and not m.disable_adapters and m.active_adapters
    ]
    for name, layer in active:
        _check_mergeable(layer, name)
    originals = []
    try:
        for _, layer in active:
            with torch.no_grad():
                merged = _merged_linear(layer, keep)
            originals.append((layer, layer.base_layer))
            layer.base_layer = merged
            # Marked merged, peft's forward runs the base layer alone.
            layer.merged_adapters = list(layer.active_adapters)
    except BaseException:  # out of memory halfway: leave the model as it was
        restore_adapters(originals)
        raise
    return originals


def restore_adapters(originals: list[tuple]) -> None:
    """Put back the base layers ``merge_adapters`` replaced: the model is bit for bit what it was."""
    for layer, base in originals:
        layer.base_layer = base
        layer.merged_adapters = []


@contextlib.contextmanager
def merged_lora(model: torch.nn.Module, keep: bool = False):
    """Inside the block the model's active LoRA layers compute with merged weights; on exit the originals are back.

    The original base modules are never written to, so leaving the block restores them exactly, however often
    it is entered. ``keep``: as for ``merge_adapters``.
    """
    originals = merge_adapters(model, keep)
    try:
        yield model
    finally:
        restore_adapters(originals)


def use_merged_generation(recipe) -> bool:
    """Whether this process generates with merged adapters: ``lora.merged_generation``, ``auto`` decided here.

    ``false`` and ``true`` are obeyed (``true`` is refused where merging cannot run). ``auto`` merges unless
    another engine generates (vLLM, continuous batching), LoRA dropout is on, the weights are not float32
    (``merge_is_exact``; DeepSpeed casts them to its mixed precision), the engine shards them (FSDP, ZeRO-3), or,
    on a GPU, the planned peak with the merged copies does not fit the card (``MemoryPlan.merges``); its choice
    is logged.

    Raises:
        RecipeError: ``true`` under FSDP or ZeRO-3, or with TRL's continuous batching.
    """
    from recipes.launcher import first_process, sharding_engine
    from recipes.layers import RecipeError

    lora, t = recipe.config["lora"], recipe.config["trainer"]
    setting = lora["merged_generation"]
    env = os.environ.get
    main = first_process()
    if setting is False or t["use_vllm"]:  # vLLM generates: TRL syncs merged weights to it itself
        if main:
            logger.info("lora.merged_generation=%s: generating with peft's LoRA branch", str(setting).lower())
        return False
    sharded = sharding_engine(t) or ("a trainer.deepspeed config" if t.get("deepspeed") else None)
    declines = auto_declines(recipe.config)
    # TRL casts the model to bf16 for continuous batching, with the merged copies swapped in.
    paged = declines == "paged"
    if setting is True and (sharded or paged or declines == "8bit"):
        raise RecipeError(
            "lora.merged_generation=true cannot run "
            + (f"under {sharded}: each process may hold only a shard of every weight" if sharded
               else "with trainer.use_transformers_continuous_batching: TRL casts the model it generates with"
               if paged else "with model.quantization=8bit: it merges plain and 4-bit linears only")
            + ". Set lora.merged_generation=false (or auto)."
        )  # fmt: skip
    if setting is True:
        if main:
            logger.info("lora.merged_generation=true: generating with the adapter merged")
        return True
    dtype = recipe.config["model"]["dtype"]
    mixed = env("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true" and (t["bf16"] or t["fp16"])
    why = (
        "TRL's continuous batching generates" if paged
        else "model.quantization=8bit: 8-bit layers do not merge" if declines == "8bit"
        else "LoRA dropout is on" if declines == "dropout"
        else f"model.dtype={dtype}: a merged weight rounded to {dtype} loses small LoRA updates, so generation "
        "would sample a policy lagging the one trained (docs/PERFORMANCE.md); lora.merged_generation=true merges "
        "anyway" if declines == "dtype"
        else "DeepSpeed casts the weights to the recipe's bf16/fp16, which rounds small LoRA updates away" if mixed
        else f"{sharded} shards the weights" if sharded
        else _no_room(recipe) if torch.cuda.is_available()
        else None
    )  # fmt: skip
    if main:
        logger.info(
            "lora.merged_generation=auto: %s",
            f"generating with peft's LoRA branch ({why})"
            if why
            else "generating with the adapter merged (float32 weights, whole on each process, room for the copies)",
        )
    return why is None


def _no_room(recipe) -> str | None:
    """Why the merged copies do not fit this GPU by the memory plan, or None when they do."""
    from recipes.layers import RecipeError
    from recipes.planner.memory import GIB, plan_memory

    try:
        plan = plan_memory(recipe.config)
    except RecipeError as e:
        return f"the memory planner cannot size the merged copies: {e}"
    card = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if plan.merges(card):
        return None
    merged = plan.generation_phase(card, merged=True) - plan.generation_phase(card, merged=False)
    return (
        f"the merged copies, {merged / GIB:.1f} GB, would take the planned peak over this {card / GIB:.0f} GB "
        "GPU; see --plan"
    )
