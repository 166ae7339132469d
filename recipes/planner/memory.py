"""The memory formulas of the planner: a recipe's expected GPU memory, part by part, in bytes.

`recipes/planner/render.py` prints them (``python recipes/run.py RECIPE --plan``); benchmarks compare them with measured peaks.

Notation: h hidden, i intermediate, L layers, q = heads x head_dim, kv = kv_heads x head_dim, V vocab, r LoRA
rank; B per_device_train_batch_size (completions), G = B x steps_per_generation (the generation batch), P the
prompt budget (data.max_prompt_tokens), C max_completion_length, S = P + C, T = B x S training tokens, N = B x C
scored tokens; a = activation bytes (2 under bf16/fp16 autocast, else the weight dtype), w = bytes of the
weights' compute dtype. GB in the tables means GiB (2**30 bytes), as nvidia-smi counts.

Resident for the whole run:
  overhead        1 GiB: CUDA context, cuBLAS workspaces and caching-allocator slack (a constant, not measured)
  weights         params x w; 4-bit NF4 linears: ceil(n/2) packed bytes + per 64-weight block a uint8 absmax
                  (double quantisation) + one fp32 per 256 blocks + 1,092 bytes of codebooks and offset per linear;
                  8-bit linears: n bytes + one fp32 scale per output row. Embeddings, lm_head and norms stay at w.
  lora params     trainable x 4 bytes: fp32 (peft upcasts adapters of a bf16/fp16 base; on a quantized base TRL casts
                  them to bf16 and recipes/trainer.py back). No master copy: AdamW updates the adapters in place.
  optimizer       trainable x states x bytes: torch AdamW 2 states in the adapter dtype, bitsandbytes 32-bit
                  2 x 4, 8-bit 2 x 1; Lion 1 state; SGD none (see OPTIMIZERS).
  reference model 0: with LoRA and beta > 0 the reference is the same model with the adapter disabled.
  ZeRO-2 offload  DeepSpeed with offload_optimizer_device cpu (recipes/accelerate/deepspeed_zero2_offload.yaml):
                  the optimizer lives in host RAM, 0 on the GPU. Per trainable parameter DeepSpeed's CPU Adam
                  keeps an fp32 master copy, two fp32 moments and an fp32 gradient (16 bytes), partitioned
                  across the ranks: a machine holds 16 x trainable x its ranks / all ranks of host RAM.
Training phase (one micro-batch of B sequences, padded to S):
  lora grads      = lora params.
  activations     saved per token and layer: 8h (two RMSNorms keep an fp32 copy) + attention: sdpa a x 4q
                  (q, k and v repeated to all heads because padded batches carry a mask, output) + 4 x heads
                  (logsumexp); flash a x (2q + 2kv) + 4 x heads; eager a x 3q + 6 x heads x S (fp32 softmax
                  and its copy) + MLP 3a x i (SiLU input and output, up) + 4(q + kv) for qwen3's q/k norms +
                  per adapted linear in x (a + 1 if dropout > 0: the cast input lora_A keeps and the dropout
                  mask; the adapter dtype instead of a without autocast) + a x r. An adapter on lm_head adds
                  nothing: TRL's fused head multiplies by lm_head.weight directly.
                  Without checkpointing: T x (L x layer + 4h). With it: T x (L x a x h + one layer + 4h), the
                  layer inputs kept plus the heaviest layer recomputed in backward (with every_n_layers = k only
                  layers 0, k, 2k... are checkpointed; the others keep everything).
  backward        T x (3a x i + 8h): gradients of one layer's widest tensors in flight (an estimate).
  log-prob        TRL's fused LM head never materialises the B x S x V logits: it saves the scored hidden
                  states N x (a x h + 36) and in backward holds an fp32 grad N x h x (4 + a), plus one logits
                  tile min(N, 4096) x 32768 x a (4 with cast_lm_head_to_fp32, which adds N x 4h); the tile is
                  32768 wide whatever V is (TRL's TOKEN_CHUNK_SIZE x _CHUNKED_LOGPROB_CHUNK_SIZE). Without Triton
                  (a CPU, ``gpu=False``) TRL scores all N = B x (S - 1) positions in torch ops, whose backward
                  holds 7 fp32 copies and a bool mask of each min(N, 4096) x min(V, 32768) tile.
  dequant         4/8-bit: the largest linear dequantised to w for its matmul.
Generation phase (transformers generate on the G prompts, no grad):
  kv cache        2 x L x kv x w x G x S, + one layer for the torch.cat that grows the cache (none with
                  model.compiled_generation: a static cache is allocated once at its full length).
  merged weights  lora.merged_generation (auto: float32 weights, on a card where the merged peak fits): a copy of
                  every adapted linear with its update merged, n x w, made before the first token; while it is
                  made, one linear's float32 sum, its update (twice in the adapter dtype, plus a float32 copy of a
                  bf16 one) and, on a 4/8-bit base, its dequantised weight at w. With model.compiled_generation
                  the copies are kept between generations (a CUDA graph replays fixed addresses), so they are
                  beside the training phase too.
  gen workspace   G x P x (m + 4h) for the prefill MLP + 3 x 4 x G x V for last-token logits and sampling, where
                  m is the largest of 3a x i (gate, up and their product); with gate/up adapted i x (2a + 2o),
                  o the adapter output's bytes (a under autocast, else the adapter dtype); with down_proj adapted
                  its input while peft feeds the adapter: i x (a + the cast to the adapter dtype + dropout's
                  output and mask: 1 byte on a GPU, the adapter dtype on a CPU). TRL generates in train mode, so
                  LoRA dropout is active while generating.
vLLM (use_vllm): colocate reserves vllm_gpu_memory_utilization x card, which must hold its own copy of the
weights (params x w) and the KV cache of G sequences; it replaces the generation phase and is resident unless
vllm_enable_sleep_mode frees it while training. Server mode generates on another GPU: 0 here. The shares that
fit a card run from (weights + KV) / card up to (card - resident - training phase) / card, or (card - resident) /
card when vLLM sleeps while training (``MemoryPlan.vllm_share_range``).

  training phase  lora grads + dequant + max(head, layers): backward first runs through the log-prob head, with
                  the saved activations (checkpointed: the layer inputs only) and the log-prob workspace, then
                  through the layers, with the activations (checkpointed: + one recomputed layer) and the backward
                  workspace.
  peak = resident (+ colocated vLLM share unless sleeping) + max(generation phase, training phase)

The old/reference log-prob passes run without grad in chunks of B and stay below the training phase.
"""

from __future__ import annotations

import json
import math

from recipes.checks import generation_schedule
from recipes.planner.memory_plan import MemoryPlan
from recipes.planner.shapes import Shape, embedding_adapter_params, load_model_config, lora_targets, shape_of
from recipes.recipe import RecipeError, with_defaults

GIB = 2**30
OVERHEAD = GIB
NF4_CODEBOOKS = 16 * 4 + 256 * 4 + 4  # fp32 NF4 code, fp32 code of the nested absmax quantisation, offset
# TRL's fused log-prob head projects through one buffer of (tokens, vocabulary columns), allocated at full width even
# for a smaller vocabulary: trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE x trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE.
LOGPROB_TILE = (4096, 32768)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
WEIGHT_FORMATS = {"4bit": "NF4 4-bit", "8bit": "int8"}
# optimizer name -> (states per trainable parameter, bytes per state; None: the parameter's own dtype)
OFFLOADED_BYTES = 4 + 2 * 4 + 4  # per trainable parameter: fp32 master, two fp32 Adam moments, fp32 gradient
OPTIMIZERS = {
    "adamw_torch": (2, None), "adamw_torch_fused": (2, None), "paged_adamw_32bit": (2, 4),
    "adamw_8bit": (2, 1), "adamw_bnb_8bit": (2, 1), "paged_adamw_8bit": (2, 1), "adamw_torch_8bit": (2, 1),
    "lion_32bit": (1, 4), "paged_lion_32bit": (1, 4), "lion_8bit": (1, 1), "paged_lion_8bit": (1, 1),
    "sgd": (0, None),
}  # fmt: skip


def section(config: dict, name: str) -> dict:
    """A recipe section with every default filled in (the planner also takes hand-made partial dicts)."""
    return with_defaults(config)[name]


def trainer_settings(config: dict) -> dict:
    """The resolved ``trainer:`` section plus what the formulas derive from it.

    ``checkpointing`` is ``activation_checkpointing`` (TRL defaults it to on); ``every_n_layers`` comes from its
    kwargs.
    """
    t = dict(section(config, "trainer"))
    t["checkpointing"] = bool(t["activation_checkpointing"])
    kwargs = t["activation_checkpointing_kwargs"] or {}
    kwargs = json.loads(kwargs) if isinstance(kwargs, str) else kwargs
    if kwargs.get("offload"):
        raise RecipeError(
            "trainer.activation_checkpointing_kwargs.offload: the memory planner does not model activations "
            "offloaded to host memory; plan without it for an upper bound."
        )
    t["every_n_layers"] = int(kwargs.get("every_n_layers", 1))
    return t


def _attention(model: dict) -> str:
    impl = model.get("attn_implementation") or "sdpa"
    if impl in ("eager", "sdpa") or "flash" in impl:
        return "flash" if "flash" in impl else impl
    raise RecipeError(
        f"model.attn_implementation {impl!r}: the memory planner models eager, sdpa and flash attention "
        "(flash_attention_2, flash_attention_3, kernels-community/flash-attn*)."
    )


def steps_per_generation(t: dict) -> int:
    """Micro-batches per generation, as GRPOConfig derives it for one process."""
    return max(1, generation_schedule(t, processes=1)[1])


def _weight_bytes(shape: Shape, w: int, quant: str) -> int:
    """Base weights: embeddings, norms and lm_head at w; the decoder linears at w or bitsandbytes' storage."""
    total = shape.vocab * shape.hidden * w * (1 if shape.tied else 2) + shape.norm_params * w
    for x in shape.layer_linears:
        n, bias = x.in_features * x.out_features, (x.out_features * w if x.bias else 0)
        if quant == "4bit":
            blocks = math.ceil(n / 64)
            total += math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / 256) + NF4_CODEBOOKS + bias
        elif quant == "8bit":
            total += n + 4 * x.out_features + bias
        else:
            total += x.params * w
    return total


def plan_memory(
    recipe_config: dict,
    *,
    model_config=None,
    batch: int | None = None,
    gpu: bool = True,
    offload_optimizer: bool = False,
) -> MemoryPlan:
    """Compute the memory plan of a recipe.

    Args:
        recipe_config: The recipe's nested dict (sections model, lora, data, trainer); missing keys take the
            recipe schema's and ``trl.GRPOConfig``'s defaults.
        model_config: A ``transformers.PretrainedConfig``; by default read from ``model.name_or_path``.
        batch: Plan this per-device batch instead of ``trainer.per_device_train_batch_size``.
        gpu: Plan a CUDA GPU run. False plans the same run on a CPU, where TRL's fused log-prob head falls back
            to torch ops (every position scored, fp32 copies of each tile) and dropout keeps a float mask.
        offload_optimizer: DeepSpeed ZeRO-2 keeps the optimizer in host RAM (``host_optimizer``), not on the GPU.

    Raises:
        RecipeError: A value the formulas cannot take (no prompt budget, an unmodelled optimizer or model).
    """
    model, lora, t = (
        section(recipe_config, "model"),
        section(recipe_config, "lora"),
        trainer_settings(recipe_config),
    )
    p = (recipe_config.get("data") or {}).get("max_prompt_tokens")
    if not p:
        raise RecipeError(
            "data.max_prompt_tokens is not set: the memory planner needs a prompt budget. Set it, e.g. "
            "data.max_prompt_tokens=256 (GSM8K chat prompts are about 150-250 tokens)."
        )
    if t["optim"] not in OPTIMIZERS:
        supported = ", ".join(OPTIMIZERS)
        raise RecipeError(
            f"trainer.optim {t['optim']!r} is not modelled by the planner. Supported: {supported}."
        )
    config = model_config if model_config is not None else load_model_config(model)
    shape = shape_of(config)
    dtype = (
        model["dtype"] if model["dtype"] != "auto" else str(config.dtype or "float32").removeprefix("torch.")
    )
    if dtype not in DTYPE_BYTES:
        raise RecipeError(f"model.dtype {dtype!r}: the planner knows {', '.join(DTYPE_BYTES)}.")
    quant, w = model["quantization"], DTYPE_BYTES[dtype]
    autocast = bool(t["fp16"]) or t["bf16"] is not False
    a = 2 if autocast else w
    lora_bytes = 4  # float32 adapters, on a quantized base too (recipes/trainer.py)
    targets = lora_targets(shape, lora["target_modules"])
    trainable = sum(lora["r"] * (x.in_features + x.out_features) for x in targets)
    trainable += embedding_adapter_params(shape, lora["target_modules"], lora["r"])

    b = batch or t["per_device_train_batch_size"]
    g, c = b * steps_per_generation(t), t["max_completion_length"]
    s = p + c
    tokens, scored = b * s, b * c if gpu else b * (s - 1)
    h, i, n_layers, v = shape.hidden, shape.intermediate, shape.layers, shape.vocab
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim

    attention = {
        "sdpa": a * 4 * q + 4 * shape.heads,
        "flash": a * (2 * q + 2 * kv) + 4 * shape.heads,
        "eager": a * 3 * q + 6 * shape.heads * s,
    }[_attention(model)]
    layer = 8 * h + (4 * (q + kv) if shape.model_type == "qwen3" else 0) + attention + 3 * a * i
    lora_in = (a if autocast else lora_bytes) + (1 if lora["dropout"] > 0 else 0)
    adapters = [0] * n_layers  # saved adapter activations per token, by decoder layer
    for x in targets:
        if x.name != "lm_head":  # TRL's fused head reads lm_head.weight directly: its adapter never runs
            adapters[int(x.name.split(".")[2])] += x.in_features * lora_in + lora["r"] * a
    full = [layer + adapters[k] for k in range(n_layers)]
    kept = [k for k in range(n_layers) if k % t["every_n_layers"] == 0]  # the checkpointed layers
    heaviest = max(full[k] for k in kept)  # the layer recomputed in backward
    checkpointed = len(kept) * a * h + sum(full) - sum(full[k] for k in kept) + heaviest
    head_fp32 = t["cast_lm_head_to_fp32"]
    rows = min(scored, LOGPROB_TILE[0])
    tile = rows * LOGPROB_TILE[1] * (4 if head_fp32 else a)
    # torch fallback: _backward_tile's 7 fp32 temporaries (y, z, log_p, p, grad, is_target.float(), a product), a mask
    if not gpu:
        tile += rows * min(v, LOGPROB_TILE[1]) * (7 * 4 + 1)
    logprob = scored * (a * h + 36) + scored * h * (4 + a + (4 if head_fp32 else 0)) + tile
    adapted = {x.name.rsplit(".", 1)[-1] for x in targets}
    prefill_mlp = 3 * a * i
    if adapted & {"gate_proj", "up_proj"}:  # act(gate) and up's base output beside its adapter output, scaled
        prefill_mlp = max(prefill_mlp, i * (2 * a + 2 * (a if autocast else lora_bytes)))
    if "down_proj" in adapted:  # the product beside its copy cast for lora_A and dropout's output and mask
        dropout = lora_bytes + (1 if gpu else lora_bytes) if lora["dropout"] > 0 else 0
        prefill_mlp = max(prefill_mlp, i * (a + (lora_bytes if lora_bytes != a else 0) + dropout))
    largest_linear = max(x.in_features * x.out_features for x in shape.layer_linears)
    states, state_bytes = OPTIMIZERS[t["optim"]]
    vllm = t["vllm_mode"] if t["use_vllm"] else "off"
    # Merging applies to transformers' generate only; auto merges float32 weights without dropout only.
    from recipes.compiled_generation import compile_declines
    from recipes.merge_rules import auto_declines

    setting = lora["merged_generation"]
    auto_off = setting == "auto" and auto_declines({"model": model, "lora": lora, "trainer": t})
    merge = "off" if vllm != "off" or setting is False or auto_off else "on" if setting is True else "auto"
    largest_adapted = max((x.in_features * x.out_features for x in targets), default=0)
    merge_temporaries = 4 + 2 * lora_bytes + (4 if lora_bytes == 2 else 0) + (w if quant != "none" else 0)
    kv_layer = 2 * kv * w * g * s  # one layer's keys and values for the whole generation batch
    compiled = (
        bool(model.get("compiled_generation"))
        and vllm == "off"
        and not compile_declines({"model": model, "trainer": t})
    )
    return MemoryPlan(
        base_params=shape.base_params,
        trainable_params=trainable,
        adapted_linears=len(targets),
        batch=b,
        generation_batch=g,
        prompt_tokens=p,
        completion_tokens=c,
        gradient_checkpointing=t["checkpointing"],
        every_n_layers=t["every_n_layers"],
        weight_dtype=dtype if quant == "none" else f"{WEIGHT_FORMATS[quant]}, compute {dtype}",
        adapter_dtype="bfloat16" if lora_bytes == 2 else "float32",
        vllm=vllm,
        vllm_fraction=float(t["vllm_gpu_memory_utilization"]),
        vllm_sleep=bool(t["vllm_enable_sleep_mode"]),
        overhead=OVERHEAD,
        weights=_weight_bytes(shape, w, quant),
        lora_params=trainable * lora_bytes,
        optimizer_states=0 if offload_optimizer else trainable * states * (state_bytes or lora_bytes),
        host_optimizer=trainable * OFFLOADED_BYTES if offload_optimizer else 0,
        lora_grads=trainable * lora_bytes,
        activations_checkpointed=tokens * (checkpointed + 4 * h),
        activations_full=tokens * (sum(full) + 4 * h),
        recomputed_layer=tokens * heaviest,
        backward_workspace=tokens * (3 * a * i + 8 * h),
        logprob_workspace=logprob,
        dequant_buffer=0 if quant == "none" else largest_linear * w,
        kv_cache=(n_layers + (0 if compiled else 1)) * kv_layer if vllm == "off" else 0,
        generation_workspace=g * p * (prefill_mlp + 4 * h) + 12 * g * v if vllm == "off" else 0,
        vllm_need=shape.base_params * w + n_layers * kv_layer if vllm == "colocate" else 0,
        merge=merge,
        merged_weights=sum(x.in_features * x.out_features for x in targets) * w if merge != "off" else 0,
        merge_workspace=largest_adapted * merge_temporaries if merge != "off" else 0,
        compiled=compiled,
    )
