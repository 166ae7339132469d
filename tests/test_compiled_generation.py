"""Compiled decoding (recipes/compiled_generation.py): a static cache and a torch.compile'd step write the same
tokens as plain ``generate``, change nothing that training computes, and are refused where they cannot run."""

from __future__ import annotations

import logging

import pytest
import torch
from _devices import ON_EACH_DEVICE
from test_merged_lora import (
    PROMPTS,
    adapted,
    assert_trained_alike,
    random_shape,
    training_step,
    two_grpo_steps,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from recipes.compiled_generation import use_compiled_generation
from recipes.evaluation.generation import Decoding, HFGenerator
from recipes.layers import RecipeError
from recipes.merged_lora import _KEPT, merge_adapters, merged_lora, restore_adapters
from recipes.planner.memory import GIB, plan_memory
from recipes.recipe import load_recipe


@pytest.fixture
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


GREEDY = Decoding(temperature=0.0, top_p=1.0, max_new_tokens=20)


def completions(model, tokenizer, prompts, compiled: bool) -> list[list[int]]:
    """Greedy token ids, 20 new tokens each, generated as TRL does (``generate`` under no_grad) with the
    generation config of evaluate.py's generator."""
    generator = HFGenerator(model, tokenizer, GREEDY, compiled)
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    batch = tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(model.device)
    generator.config.min_new_tokens = 20  # never stopped early by an EOS: all 20 tokens compared
    with torch.no_grad():
        out = model.generate(**batch, generation_config=generator.config)
    return out[:, batch["input_ids"].shape[1] :].tolist()


@ON_EACH_DEVICE  # on a GPU the compiled step runs as CUDA graphs
@pytest.mark.slow  # compiles the decode step first: ~20 s on a CPU
def test_greedy_tokens_are_the_same_compiled_and_plain_and_the_compiled_step_is_reused(
    device, tiny_model_dir, tokenizer
):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).to(device).eval()
    model = adapted(base)
    batch = tokenizer(PROMPTS[:1], return_tensors="pt").to(device)
    logits, grads = training_step(model, batch)
    plain = completions(model, tokenizer, PROMPTS, compiled=False)
    assert completions(model, tokenizer, PROMPTS, compiled=True) == plain
    assert hasattr(base, "_compiled_call")  # transformers compiled the decode step
    with merged_lora(model, keep=True):  # the fast path: compiled over the merged weights
        assert completions(model, tokenizer, PROMPTS, compiled=True) == plain
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        # Shorter prompts: transformers keeps the longer static cache, so the compiled step is reused as it is.
        shorter = [PROMPTS[1]] * len(PROMPTS)
        assert completions(model, tokenizer, shorter, compiled=True) == completions(
            model, tokenizer, shorter, compiled=False
        )
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
        # evaluate.py's and the held-out evaluation's own generate call reuses that same compiled step.
        evaluator = HFGenerator(model, tokenizer, GREEDY, compiled=True)
        evaluator.generate(tokenizer(shorter, add_special_tokens=False)["input_ids"], seeds=[0, 1, 2])
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    # What training computes afterwards is untouched: the same log-probs and LoRA gradients, bit for bit.
    again, grads_again = training_step(model, batch)
    assert torch.equal(logits, again)
    assert grads.keys() == grads_again.keys() and all(torch.equal(grads[n], grads_again[n]) for n in grads)


@ON_EACH_DEVICE
@pytest.mark.slow  # compiles the decode step first: ~20 s on a CPU
def test_evaluation_on_a_wider_four_layer_shape_writes_the_same_answers_and_compiles_once(device, tokenizer):
    model = adapted(random_shape(tokenizer).to(device))
    ids = tokenizer(PROMPTS, add_special_tokens=False)["input_ids"]
    seeds = [0, 1, 2]
    plain = HFGenerator(model, tokenizer, GREEDY).generate(ids, seeds)
    with merged_lora(model, keep=True):
        generator = HFGenerator(model, tokenizer, GREEDY, compiled=True)
        generator.size_cache(ids)  # as evaluate.py and the held-out evaluation do, before the first batch
        generator.generate([min(ids, key=len)] * len(ids), seeds)  # the shortest prompts first: compiles
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        assert generator.generate(ids, seeds) == plain
    assert (
        torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    )  # the longer batch did not recompile


def test_kept_merged_copies_keep_their_addresses_and_follow_the_adapter(tiny_model_dir):
    from recipes.merged_lora import MergedLinear

    model = adapted(AutoModelForCausalLM.from_pretrained(tiny_model_dir))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    first = merge_adapters(model, keep=True)
    layer, base = first[0]
    address, before = layer.base_layer.weight.data_ptr(), layer.base_layer.weight.clone()
    restore_adapters(first)
    with torch.no_grad():
        layer.lora_B["default"].weight.add_(0.5)  # an optimizer step on the adapter
    with merged_lora(model, keep=True):
        assert layer.base_layer.weight.data_ptr() == address  # the same tensor, refilled
        assert not torch.equal(layer.base_layer.weight, before)
        assert torch.equal(layer.base_layer.weight, base.weight + layer.get_delta_weight("default"))
    assert layer in _KEPT and layer.base_layer is base
    assert not any(isinstance(m, MergedLinear) for m in model.modules())
    after = model.state_dict()
    assert after.keys() == state.keys()  # the kept copies are never part of the model's state
    assert all(torch.equal(after[k], state[k]) for k in state if "lora_B" not in k)


@pytest.mark.slow  # compiles the decode step first: ~20 s on a CPU
def test_a_grpo_run_generates_compiled_and_trains_as_without(tmp_path):
    compiled = two_grpo_steps(tmp_path / "compiled", "model.compiled_generation=true")
    plain = two_grpo_steps(tmp_path / "plain", "model.compiled_generation=false")
    # Generation ran compiled, and only when asked.
    assert hasattr(compiled[2].model.get_base_model(), "_compiled_call")
    config = compiled[2].generation_config  # the static cache sized for the longest prompt from the start
    assert config.cache_implementation == "static" and config.max_cache_len == 384 + 32  # gsm8k_tiny's
    assert not hasattr(plain[2].model.get_base_model(), "_compiled_call")
    assert_trained_alike(compiled, plain, rel=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "overrides, env, says",
    [
        (["model.quantization=4bit"], {}, "does not compile bitsandbytes models"),
        (["trainer.use_vllm=true"], {}, "vLLM generates"),
        (
            ["trainer.use_transformers_continuous_batching=true"],
            {},
            "continuous_batching=true: its paged cache",
        ),
        ([], {"ACCELERATE_USE_FSDP": "true"}, "FSDP"),
        ([], {"ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}, "ZeRO-3"),
    ],
)
def test_engines_that_cannot_compile_are_refused(overrides, env, says, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RecipeError, match=says) as error:  # the recipe's own settings already as it loads
        use_compiled_generation(load_recipe("gsm8k_tiny", ["model.compiled_generation=true", *overrides]))
    assert "Set model.compiled_generation=false" in str(error.value)


def test_the_choice_is_logged_and_off_by_default(caplog):
    with caplog.at_level(logging.INFO, logger="recipes.compiled_generation"):
        assert use_compiled_generation(load_recipe("gsm8k_tiny", [])) is False
        assert use_compiled_generation(load_recipe("gsm8k_tiny", ["model.compiled_generation=true"])) is True
    assert "static KV cache and a compiled step" in caplog.text
    with pytest.raises(RecipeError, match="compiled_generation .* must be true/false"):
        load_recipe("gsm8k_tiny", ["model.compiled_generation=1"])


def test_the_planner_keeps_merged_copies_beside_training_and_sizes_the_static_cache_once():
    def plan(*overrides):
        return plan_memory(load_recipe("gsm8k_llama", ["lora.merged_generation=true", *overrides]).config)

    plain, compiled = plan(), plan("model.compiled_generation=true")
    card = 80 * GIB
    assert plain.kept_merged(card) == 0 and compiled.kept_merged(card) == plain.merged_weights > 10 * GIB
    # A static cache is allocated at its full length once: no extra layer for the cache growing by torch.cat.
    assert plain.kv_cache - compiled.kv_cache == plain.kv_cache // 33  # Llama 3.1 8B: 32 layers
    beside_training = compiled.merged_weights + compiled.training_phase
    assert compiled.peak(card) == compiled.resident + max(compiled.generation_phase(card), beside_training)
    # Where the generation phase is small, the copies kept through training set the peak.
    small = ("trainer.num_generations=2", "trainer.per_device_train_batch_size=2")
    plain, compiled = plan(*small), plan(*small, "model.compiled_generation=true")
    assert compiled.peak(card) == compiled.resident + compiled.merged_weights + compiled.training_phase
    assert compiled.peak(card) > plain.peak(card)
    with pytest.raises(
        RecipeError, match="bitsandbytes"
    ):  # --plan, like the run, refuses what cannot compile
        load_recipe("gsm8k_llama_qlora", ["model.compiled_generation=true"])
