"""Decode with a static KV cache and a compiled forward (``model.compiled_generation``): fewer launches per token.

Hugging Face ``generate`` dispatches every operator of every layer again for each new token, so at one token per
sequence a GPU waits on Python and kernel launches, not on its memory. With a static cache every decode step has
the same shapes, and transformers compiles the step with ``torch.compile``: inductor fuses the small operators,
and on CUDA (mode ``reduce-overhead``) replays the whole step as one CUDA graph. TRL's GRPOTrainer turns this off
(``disable_compile=True`` in its generation config); this module turns it back on where the recipe asks.

Compiling costs a pause the first time each shape is met (about 20 s for the tiny model on a CPU). transformers
keeps the longest cache length it has allocated, so recompiles stop once the longest prompt has come by; a new
batch size (the held-out evaluation's) compiles once more.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

_TORCH_DEFAULT_RECOMPILES = 8  # torch._dynamo.config.recompile_limit; past it a function silently runs eager


def compile_generation(config, device_type: str) -> None:
    """Set a ``transformers.GenerationConfig`` to decode with a static cache and a compiled forward.

    Args:
        config: The generation config to change in place.
        device_type: ``cuda`` compiles with CUDA graphs (``reduce-overhead``); any other device compiles the
            fused kernels alone (transformers compiles only CUDA-like devices unless told to).
    """
    import torch
    from transformers import CompileConfig

    cuda = device_type == "cuda"
    compile_config = CompileConfig(
        fullgraph=False, dynamic=False, mode="reduce-overhead" if cuda else "default"
    )
    if not cuda:
        compile_config._compile_all_devices = True  # the documented switch for compiling off CUDA
    config.cache_implementation = "static"
    config.compile_config = compile_config
    config.disable_compile = False
    # Cache lengths grow a few times before they settle, and evaluation batch sizes add shapes: room for both, so
    # the step is not silently left uncompiled after the eighth.
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, 4 * _TORCH_DEFAULT_RECOMPILES)


def compile_declines(config: dict) -> str | None:
    """Why ``model.compiled_generation=true`` cannot run with this recipe, or None. Sections may be partial."""
    model, t = config["model"], config.get("trainer") or {}
    if model.get("quantization", "none") != "none":
        return (
            f"model.quantization={model['quantization']}: transformers does not compile bitsandbytes models "
            "(it would quietly decode uncompiled)"
        )
    if t.get("use_vllm"):
        return "trainer.use_vllm=true: vLLM generates, and compiles its own decode step"
    if t.get("use_transformers_continuous_batching") or t.get("use_transformers_paged"):
        return "trainer.use_transformers_continuous_batching=true: its paged cache is not a static cache"
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" or t.get("fsdp"):
        return "FSDP: each process holds only shards of the weights it would compile over"
    if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":
        return "DeepSpeed ZeRO-3: each process holds only shards of the weights it would compile over"
    return None


def use_compiled_generation(recipe) -> bool:
    """Whether this run decodes compiled: ``model.compiled_generation``, refused where it cannot run; logged.

    Raises:
        RecipeError: ``true`` with a bitsandbytes base, vLLM, continuous batching, FSDP or ZeRO-3.
    """
    from recipes.layers import RecipeError

    if not recipe.config["model"]["compiled_generation"]:
        return False
    why = compile_declines(recipe.config)
    if why:
        raise RecipeError(
            f"model.compiled_generation=true cannot run with {why}. Set model.compiled_generation=false."
        )
    if os.environ.get("RANK", "0") == "0":
        logger.info(
            "model.compiled_generation=true: decoding with a static KV cache and a compiled step; the first "
            "generation of each shape pauses to compile"
        )
    return True
