"""Decode with a static KV cache and a compiled forward (``model.compiled_generation``): fewer launches per token.

Hugging Face ``generate`` dispatches every operator of every layer again for each new token, so at one token per
sequence a GPU waits on Python and kernel launches, not on its memory. With a static cache every decode step has
the same shapes, and transformers compiles the step with ``torch.compile``: inductor fuses the small operators,
and on CUDA (mode ``reduce-overhead``) replays the whole step as one CUDA graph. TRL's GRPOTrainer turns this off
(``disable_compile=True`` in its generation config); this module turns it back on where the recipe asks.

Compiling costs a pause the first time each shape is met (about 20 s for the tiny model on a CPU). The static cache
is sized once for the longest prompt the run can meet (``data.max_prompt_tokens`` + the completion length in
training, the longest question in an evaluation), so a longer prompt never recompiles the step; a new batch size
(the held-out evaluation's, a last smaller batch) compiles once more.

transformers allocates a new static cache for every ``generate`` call. On CUDA its tensors are marked as fixed
addresses for the CUDA graph, so where the allocator hands back other addresses the graph is recorded again (torch
2.13 does not count such re-records toward its limit, so graphs stay on, but each adds a graph that later steps
check first): to be checked on a GPU (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

_TORCH_DEFAULT_RECOMPILES = 8  # torch._dynamo.config.recompile_limit; past it a function silently runs eager


def compile_generation(config, device_type: str, cache_tokens: int | None = None) -> None:
    """Set a ``transformers.GenerationConfig`` to decode with a static cache and a compiled forward.

    Args:
        config: The generation config to change in place.
        device_type: ``cuda`` compiles with CUDA graphs (``reduce-overhead``); any other device compiles the
            fused kernels alone (transformers compiles only CUDA-like devices unless told to).
        cache_tokens: The longest prompt plus completion to size the static cache for from the start; None sizes
            it for each call, growing (and recompiling) as longer prompts come.
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
    config.max_cache_len = cache_tokens
    config.compile_config = compile_config
    config.disable_compile = False
    # Cache lengths grow a few times before they settle, and evaluation batch sizes add shapes: room for both, so
    # the step is not silently left uncompiled after the eighth.
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, 4 * _TORCH_DEFAULT_RECOMPILES)


def static_cache_tokens(config: dict) -> int | None:
    """The longest prompt plus completion a training run generates: its static cache's length, or None when
    ``data.max_prompt_tokens`` leaves prompts unbounded."""
    prompt = config["data"]["max_prompt_tokens"]
    return prompt + config["trainer"]["max_completion_length"] if prompt else None


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
    if t.get("use_transformers_continuous_batching"):
        return "trainer.use_transformers_continuous_batching=true: its paged cache is not a static cache"
    from recipes.launcher import sharding_engine

    sharded = sharding_engine(t)
    return (
        f"{sharded}: each process holds only shards of the weights it would compile over" if sharded else None
    )


def compile_refusal(config: dict) -> str | None:
    """The error for ``model.compiled_generation=true`` where it cannot run, or None: checked when the recipe
    loads (``recipes.checks``) and again when the run starts, once the launcher has said which engine it is."""
    why = compile_declines(config) if config["model"]["compiled_generation"] else None
    return (
        f"model.compiled_generation=true cannot run with {why}. Set model.compiled_generation=false."
        if why
        else None
    )


def use_compiled_generation(recipe) -> bool:
    """Whether this run decodes compiled: ``model.compiled_generation``, refused where it cannot run; logged.

    Raises:
        RecipeError: ``true`` with a bitsandbytes base, vLLM, continuous batching, FSDP or ZeRO-3.
    """
    from recipes.launcher import first_process
    from recipes.layers import RecipeError

    if not recipe.config["model"]["compiled_generation"]:
        return False
    refusal = compile_refusal(recipe.config)
    if refusal:
        raise RecipeError(refusal)
    if first_process():
        logger.info(
            "model.compiled_generation=true: decoding with a static KV cache and a compiled step; the first "
            "generation of each shape pauses to compile"
        )
    return True
