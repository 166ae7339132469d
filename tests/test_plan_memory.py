"""Memory plan totals: each part from counts x bytes, phases as documented sums, batches that fit."""

from __future__ import annotations

from types import SimpleNamespace

import bitsandbytes.functional as bnbf
import pytest
import torch
from transformers import AutoConfig

from recipes.planner.memory import LOGPROB_TILE, NF4_CODEBOOKS, OVERHEAD, plan_memory
from recipes.planner.render import CARDS, largest_batch, render_plan
from recipes.planner.shapes import config_for, shape_of
from recipes.recipe import RecipeError
from tests._plan_helpers import GIB, recipe_config

QWEN7 = "Qwen/Qwen2.5-7B-Instruct"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_resident_parts_are_counts_times_bytes():
    plan = plan_memory(recipe_config(QWEN7))
    assert plan.weights == plan.base_params * 2  # bf16, untied lm_head counted in base_params
    assert plan.lora_params == plan.lora_grads == plan.trainable_params * 4  # fp32 adapters
    assert plan.optimizer_states == plan.trainable_params * 2 * 4  # AdamW: two fp32 states
    assert plan.reference_model == 0 and plan.overhead == OVERHEAD
    assert plan.resident == OVERHEAD + plan.weights + plan.lora_params + plan.optimizer_states
    tied = plan_memory(recipe_config("Qwen/Qwen2.5-1.5B-Instruct"))
    assert tied.weights == tied.base_params * 2  # the tied lm_head is stored once


def test_phases_and_peak_are_the_documented_sums():
    plan = plan_memory(recipe_config(QWEN7))
    # backward through the fused head happens before any layer is recomputed, so the two never add up
    head = plan.activations_checkpointed - plan.recomputed_layer + plan.logprob_workspace
    layers = plan.activations_checkpointed + plan.backward_workspace
    training = plan.lora_grads + max(head, layers)
    assert plan.gradient_checkpointing and plan.training_phase == training
    assert 0 < plan.recomputed_layer < plan.activations_checkpointed
    assert plan.generation_phase(80 * GIB) == plan.kv_cache + plan.generation_workspace
    for _, card in CARDS:
        assert plan.peak(card) == plan.resident + max(plan.kv_cache + plan.generation_workspace, training)


def test_kv_cache_and_generation_batch_follow_the_trainer_settings():
    config = config_for(LLAMA)
    head_dim = config.hidden_size // config.num_attention_heads
    for trainer, generation_batch in [
        ({}, 6 * 4),  # steps_per_generation defaults to gradient_accumulation_steps
        ({"steps_per_generation": 2}, 12),
        ({"generation_batch_size": 48}, 48),
    ]:
        plan = plan_memory(recipe_config(LLAMA, trainer=trainer), model_config=config)
        assert plan.generation_batch == generation_batch
        # keys and values, all layers + the one torch.cat reallocates, bf16, every sequence at prompt + completion
        expected = 2 * (config.num_hidden_layers + 1) * config.num_key_value_heads * head_dim * 2
        assert plan.kv_cache == expected * generation_batch * (256 + 512)


def test_quantized_weights_match_bitsandbytes_storage():
    config = AutoConfig.for_model(
        "llama", hidden_size=256, intermediate_size=640, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=1000,
    )  # fmt: skip
    shape = shape_of(config)
    unquantized = (
        2 * shape.vocab * shape.hidden + shape.norm_params
    ) * 2  # embeddings, lm_head, norms in bf16
    nf4 = int8 = 0
    for x in shape.layer_linears:
        weight = torch.randn(x.out_features, x.in_features, dtype=torch.bfloat16)
        packed, state = bnbf.quantize_4bit(weight, blocksize=64, compress_statistics=True, quant_type="nf4")
        nested = state.state2.absmax.nbytes + state.state2.code.nbytes
        nf4 += packed.nbytes + state.absmax.nbytes + nested + state.code.nbytes + 4  # + the fp32 offset
        codes, scales, _ = bnbf.int8_vectorwise_quant(weight.half())
        int8 += codes.nbytes + scales.nbytes
    assert NF4_CODEBOOKS == state.state2.code.nbytes + state.code.nbytes + 4
    qlora = plan_memory(recipe_config(model={"quantization": "4bit"}), model_config=config)
    assert qlora.weights == unquantized + nf4
    assert (
        plan_memory(recipe_config(model={"quantization": "8bit"}), model_config=config).weights
        == unquantized + int8
    )
    # TRL casts adapters of a quantized base to bf16 and recipes/trainer.py back to fp32; torch AdamW keeps its
    # states in the parameter dtype
    assert qlora.adapter_dtype == "float32" and qlora.lora_params == qlora.trainable_params * 4
    assert qlora.optimizer_states == qlora.trainable_params * 2 * 4
    assert qlora.dequant_buffer == 640 * 256 * 2


def test_optimizer_states_follow_the_optimizer():
    base = plan_memory(recipe_config(QWEN7))
    bnb8 = plan_memory(recipe_config(QWEN7, trainer={"optim": "paged_adamw_8bit"}))
    sgd = plan_memory(recipe_config(QWEN7, trainer={"optim": "sgd"}))
    assert (bnb8.optimizer_states, sgd.optimizer_states) == (base.trainable_params * 2, 0)


def test_checkpointing_settings_change_the_activations_used():
    default = plan_memory(recipe_config(QWEN7))  # TRL turns checkpointing on by default
    off = plan_memory(recipe_config(QWEN7, trainer={"activation_checkpointing": False}))
    every2 = plan_memory(
        recipe_config(QWEN7, trainer={"activation_checkpointing_kwargs": {"every_n_layers": 2}})
    )
    assert default.activations == default.activations_checkpointed < every2.activations < off.activations
    assert off.activations == off.activations_full == default.activations_full
    # flash attention keeps k and v at their kv heads instead of repeated to every head
    flash = plan_memory(recipe_config(QWEN7, model={"attn_implementation": "flash_attention_2"}))
    assert flash.activations_full < default.activations_full


def test_logits_are_never_materialised():
    plan = plan_memory(recipe_config(QWEN7))
    full_logits = plan.batch * plan.completion_tokens * 152064 * 4
    assert plan.logprob_workspace < full_logits / 4


def test_logprob_tile_is_trls_buffer_whatever_the_vocabulary():
    # TRL allocates its projection buffer at full chunk width even for a vocabulary narrower than the chunk
    from trl.kernels.chunked_logprob import TOKEN_CHUNK_SIZE
    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    assert LOGPROB_TILE == (TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE)
    narrow, wide = (
        plan_memory(recipe_config(LLAMA), model_config=_with_vocab(config_for(LLAMA), v))
        for v in (512, 128256)
    )
    assert (
        wide.logprob_workspace - narrow.logprob_workspace == 0
    )  # the tile is the only vocabulary-sized part


def _with_vocab(config, vocab: int):
    config.vocab_size = vocab
    return config


def test_every_part_grows_with_the_batch():
    small, large = (plan_memory(recipe_config(QWEN7), batch=b) for b in (3, 12))
    assert small.resident == large.resident
    assert small.training_phase < large.training_phase and small.kv_cache < large.kv_cache


def test_vllm_modes():
    server = plan_memory(recipe_config(QWEN7, trainer={"use_vllm": True, "vllm_mode": "server"}))
    assert server.peak(80 * GIB) == server.resident + server.training_phase and server.kv_cache == 0
    colocate = plan_memory(
        recipe_config(QWEN7, trainer={"use_vllm": True, "vllm_gpu_memory_utilization": 0.4})
    )
    assert colocate.peak(80 * GIB) == colocate.resident + int(0.4 * 80 * GIB) + colocate.training_phase
    # its own copy of the weights, plus the KV cache of the generation batch (28 layers, 4 kv heads of 128)
    assert colocate.vllm_need == colocate.base_params * 2 + 2 * 28 * 4 * 128 * 2 * 24 * (256 + 512)
    default_share = plan_memory(recipe_config(QWEN7, trainer={"use_vllm": True}))  # 0.3 of the card
    assert default_share.fits(80 * GIB) and not default_share.fits(
        40 * GIB
    )  # 12 GiB < 15.2 GiB of weights + KV
    sleeping = plan_memory(
        recipe_config(
            QWEN7,
            trainer={"use_vllm": True, "vllm_gpu_memory_utilization": 0.4, "vllm_enable_sleep_mode": True},
        )
    )
    assert sleeping.peak(80 * GIB) == sleeping.resident + max(int(0.4 * 80 * GIB), sleeping.training_phase)


def test_largest_batch_is_the_edge_of_fitting_and_keeps_groups_whole():
    config = recipe_config(QWEN7, trainer={"num_generations": 6, "gradient_accumulation_steps": 4})
    step = 3  # 6 / gcd(6, 4): batch x 4 must be divisible by 6
    best = largest_batch(config, 24 * GIB)
    assert best % step == 0 and (best * 4) % 6 == 0
    assert plan_memory(config, batch=best).fits(24 * GIB)
    assert not plan_memory(config, batch=best + step).fits(24 * GIB)
    assert largest_batch(config, 16 * GIB) is None  # the bf16 weights alone nearly fill the card


@pytest.mark.parametrize(
    "change, message",
    [
        ({"prompt": None}, r"data\.max_prompt_tokens is not set.*data\.max_prompt_tokens=256"),
        (
            {"trainer": {"optim": "adafactor"}},
            r"trainer\.optim 'adafactor' is not modelled.*adamw_torch_fused",
        ),
        ({"model": {"attn_implementation": "flex_attention"}}, r"'flex_attention'.*eager, sdpa and flash"),
        ({"trainer": {"activation_checkpointing_kwargs": {"offload": True}}}, r"offload.*does not model"),
    ],
)
def test_values_the_formulas_cannot_take_fail_clearly(change, message):
    with pytest.raises(RecipeError, match=message):
        plan_memory(recipe_config(QWEN7, **change))


def test_render_plan_prints_parts_and_the_card_table():
    config = recipe_config(QWEN7)
    text = render_plan(SimpleNamespace(name="gsm8k_qwen", config=config))
    plan = plan_memory(config)
    assert text.startswith("Memory plan for gsm8k_qwen (Qwen/Qwen2.5-7B-Instruct)")
    assert f"{plan.trainable_params:,} trainable" in text
    for label, part in [("base weights (bfloat16)", plan.weights), ("KV cache", plan.kv_cache)]:
        assert any(line.split() == [*label.split(), f"{part / GIB:.2f}"] for line in text.splitlines())
    assert "activations, no checkpointing (not used)" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    for name, card in CARDS:
        row, best = rows[name], largest_batch(config, card)
        assert row[1] == f"{card / GIB:.2f}" and row[3] == f"{plan.peak(card) / GIB:.2f}"
        assert row[4:6] == ["yes" if plan.fits(card) else "no", str(best or "none")]
