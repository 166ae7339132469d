"""Merged-LoRA generation (recipes/merged_lora.py): the same tokens as peft's branch, a base left bit for bit, and a
GRPO step that trains exactly as without it."""

from __future__ import annotations

import logging

import pytest
import torch
from _devices import ON_EACH_DEVICE
from _recipes_learning import EVEN_TOKEN_REWARD
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from common.errors import UserError
from recipes.layers import RecipeError
from recipes.merged_lora import MergedLinear, merge_adapters, merged_lora, use_merged_generation
from recipes.recipe import load_recipe

PROMPTS = ["Natalia sold clips to 48 of her friends.", "How many", "Weng earns $12 an hour for babysitting."]


def adapted(model, seed: int = 0, dropout: float = 0.0):
    """``model`` with an all-linear LoRA whose B is random too (peft starts B at 0, which changes nothing)."""
    torch.manual_seed(seed)
    config = LoraConfig(
        r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False, lora_dropout=dropout
    )
    return get_peft_model(model, config).eval()


def random_shape(tokenizer, seed: int = 1):
    """A 4-layer Llama with random weights, wider than the tiny model, for a second shape."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=344, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def greedy(model, tokenizer, tokens: int = 24) -> list[list[int]]:
    tokenizer.padding_side = "left"
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True).to(model.device)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    return out[:, batch["input_ids"].shape[1] :].tolist()


def training_step(model, batch):
    """Logits and LoRA gradients of one forward and backward pass."""
    model.zero_grad()
    logits = model(**batch).logits
    logits.log_softmax(-1).mean().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.fixture
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@ON_EACH_DEVICE
@pytest.mark.parametrize("shape", ["tiny", "4-layer random"])
def test_greedy_tokens_are_the_same_merged_and_with_peft_branch(shape, device, tiny_model_dir, tokenizer):
    base = (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir) if shape == "tiny" else random_shape(tokenizer)
    ).to(device)
    plain = greedy(base, tokenizer)
    model = adapted(base)
    branch = greedy(model, tokenizer)
    assert branch != plain  # the adapter changes the answers, so agreeing below means something
    with merged_lora(model):
        assert sum(isinstance(m, MergedLinear) for m in model.modules()) == 7 * base.config.num_hidden_layers
        assert greedy(model, tokenizer) == branch
    assert not any(isinstance(m, MergedLinear) for m in model.modules())


def test_a_thousand_merges_leave_the_base_bit_for_bit_where_peft_merge_drifts(tiny_model_dir):
    model = adapted(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for _ in range(1000):
        with merged_lora(model):
            pass
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # What exact restoring avoids: peft's merge/unmerge adds and subtracts the update, rounding each time in bf16.
    for _ in range(20):
        model.merge_adapter()
        model.unmerge_adapter()
    drifted = [k for k, v in model.state_dict().items() if not torch.equal(before[k], v)]
    assert drifted and all("base_layer" in k for k in drifted)


@ON_EACH_DEVICE
def test_log_probs_and_lora_gradients_after_merged_generation_are_unchanged(
    device, tiny_model_dir, tokenizer
):
    model = adapted(AutoModelForCausalLM.from_pretrained(tiny_model_dir).to(device))
    batch = tokenizer(PROMPTS[:1], return_tensors="pt").to(device)
    logits, grads = training_step(model, batch)
    with merged_lora(model):
        greedy(model, tokenizer, tokens=4)
    again, grads_again = training_step(model, batch)
    assert torch.equal(logits, again)
    assert grads.keys() == grads_again.keys() and all(torch.equal(grads[n], grads_again[n]) for n in grads)


def test_a_four_bit_base_generates_the_same_tokens_dequantised_and_keeps_its_quantised_weights(
    tiny_model_dir,
):
    from recipes.model import load_model

    model = adapted(load_model(load_recipe("gsm8k_tiny", ["model.quantization=4bit"]).config["model"]))
    # In train mode, as TRL generates: in eval mode bitsandbytes repacks 4-bit weights for a bf16 CPU kernel.
    model.train()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    packed = {n: m.weight.data.clone() for n, m in model.named_modules() if type(m).__name__ == "Linear4bit"}
    assert packed
    branch = greedy(model, tokenizer)
    with merged_lora(model):
        assert greedy(model, tokenizer) == branch
    now = {n: m.weight.data for n, m in model.named_modules() if type(m).__name__ == "Linear4bit"}
    assert all(torch.equal(packed[n], now[n]) for n in packed)
    model.eval()
    greedy(model, tokenizer, tokens=1)  # on a CPU with AVX512-BF16, bitsandbytes repacks the weights now
    layer = next(m for m in model.modules() if type(m).__name__ == "Linear4bit")
    # bitsandbytes 0.50.2 gives a quant state the flag only once it has repacked its weights.
    if getattr(layer.weight.quant_state, "packing_format_for_cpu", False):  # refused, not merged wrongly
        with pytest.raises(UserError, match="repacked by bitsandbytes for its CPU bf16 kernel"):
            merge_adapters(model)


def test_dropout_and_sharded_engines_are_refused_or_left_unmerged(tiny_model_dir, monkeypatch, caplog):
    model = adapted(AutoModelForCausalLM.from_pretrained(tiny_model_dir), dropout=0.1)
    with pytest.raises(UserError, match="has LoRA dropout, which TRL keeps active while generating"):
        merge_adapters(model)
    assert not any(isinstance(m, MergedLinear) for m in model.modules())

    with pytest.raises(RecipeError, match=r"lora.dropout=0.1 .* Set lora.merged_generation=false"):
        load_recipe("gsm8k_tiny", ["lora.dropout=0.1", "lora.merged_generation=true"])
    # TRL's disable_dropout zeroes every dropout of the model, LoRA's too: nothing is left to refuse.
    quiet = load_recipe("gsm8k_tiny", ["lora.dropout=0.1", "trainer.disable_dropout=true"])
    assert use_merged_generation(quiet) is True
    with pytest.raises(RecipeError, match="must be one of auto, true, false, got 'atuo'"):
        load_recipe("gsm8k_tiny", ["lora.merged_generation=atuo"])

    caplog.set_level(logging.INFO, logger="recipes.merged_lora")
    assert use_merged_generation(load_recipe("gsm8k_tiny")) is True  # auto on a CPU
    assert use_merged_generation(load_recipe("gsm8k_tiny", ["lora.dropout=0.1"])) is False
    assert "generating with peft's LoRA branch (LoRA dropout is on)" in caplog.text
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    assert use_merged_generation(load_recipe("gsm8k_tiny")) is False
    assert "(DeepSpeed ZeRO-3 shards the weights)" in caplog.text
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(RecipeError, match="cannot run under FSDP: each process may hold only a shard"):
        use_merged_generation(load_recipe("gsm8k_tiny", ["lora.merged_generation=true"]))


def test_other_generation_engines_and_mixed_precision_deepspeed_are_left_unmerged(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="recipes.merged_lora")
    paged = "trainer.use_transformers_continuous_batching=true"
    assert use_merged_generation(load_recipe("gsm8k_tiny", [paged])) is False
    assert "(TRL's continuous batching generates)" in caplog.text
    with pytest.raises(RecipeError, match="with trainer.use_transformers_continuous_batching: TRL casts"):
        use_merged_generation(load_recipe("gsm8k_tiny", [paged, "lora.merged_generation=true"]))
    assert use_merged_generation(load_recipe("gsm8k_tiny", ["trainer.use_vllm=true"])) is False
    # 8-bit layers compute with more than their weight: auto declines before the model loads, true is refused.
    assert use_merged_generation(load_recipe("gsm8k_tiny", ["model.quantization=8bit"])) is False
    assert "(model.quantization=8bit: 8-bit layers do not merge)" in caplog.text
    with pytest.raises(
        RecipeError, match="with model.quantization=8bit: it merges plain and 4-bit linears only"
    ):
        use_merged_generation(
            load_recipe("gsm8k_tiny", ["model.quantization=8bit", "lora.merged_generation=true"])
        )
    assert use_merged_generation(load_recipe("gsm8k_tiny", ["lora.merged_generation=false"])) is False
    assert "lora.merged_generation=false: generating with peft's LoRA branch" in caplog.text
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert (
        use_merged_generation(load_recipe("gsm8k_tiny")) is True
    )  # float32 training: DeepSpeed keeps float32
    assert use_merged_generation(load_recipe("gsm8k_tiny", ["trainer.bf16=true"])) is False
    assert "DeepSpeed casts the weights to the recipe's bf16/fp16" in caplog.text


def test_unknown_base_layers_and_lora_variants_are_refused_not_merged_wrongly(tiny_model_dir):
    class ScaledLinear(torch.nn.Linear):  # like FP8 or compressed linears: more than .weight in its forward
        def forward(self, x):
            return 2 * super().forward(x)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    proj = model.model.layers[0].self_attn.q_proj
    scaled = ScaledLinear(proj.in_features, proj.out_features, bias=False)
    model.model.layers[0].self_attn.q_proj = scaled
    with pytest.raises(UserError, match="a ScaledLinear base layer; it merges plain and bitsandbytes 4-bit"):
        merge_adapters(adapted(model))
    dora = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        LoraConfig(r=4, target_modules=["q_proj"], use_dora=True),
    )
    with pytest.raises(UserError, match="a LoRA bias or a LoRA variant such as DoRA"):
        merge_adapters(dora)


def test_the_merged_layer_holds_its_own_bias(tokenizer):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, attention_bias=True,
    )  # fmt: skip
    model = adapted(LlamaForCausalLM(config).eval())
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    original = layer.base_layer.bias
    with torch.no_grad():
        original.normal_()  # Llama starts its biases at 0
    values = original.detach().clone()
    with merged_lora(model):
        assert layer.base_layer.bias is not original and torch.equal(layer.base_layer.bias, values)
        layer.base_layer.bias.zero_()  # whatever happens to the copy
    assert layer.base_layer.bias is original and torch.equal(original, values)


def test_auto_merges_only_where_the_plan_fits_the_gpu(monkeypatch, caplog):
    from recipes.planner.memory import GIB

    card = {"bytes": 24 * GIB}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: type("Props", (), {"total_memory": card["bytes"]})
    )
    caplog.set_level(logging.INFO, logger="recipes.merged_lora")
    recipe = load_recipe("gsm8k_llama", ["model.dtype=float32"])  # 26 GB of copies on a 34 GB plan
    assert use_merged_generation(recipe) is False
    assert "the merged copies, 26.0 GB, would take the planned peak over this 24 GB GPU" in caplog.text
    card["bytes"] = 80 * GIB
    assert use_merged_generation(recipe) is True
    caplog.clear()
    assert use_merged_generation(load_recipe("gsm8k_llama")) is False  # bf16: room, but the merge would round
    assert "model.dtype=bfloat16: a merged weight rounded to bfloat16 loses small LoRA updates" in caplog.text
    assert use_merged_generation(load_recipe("gsm8k_llama", ["lora.merged_generation=true"])) is True


def test_a_bf16_merge_loses_small_updates_and_keeps_large_ones():
    from benchmarks.merge_rounding import rounding_rows

    small, large = rounding_rows(width=512, scales=(1e-5, 1e-2))
    assert small["kept"] < 0.2 and small["output_error"] > 0.8
    assert large["kept"] > 0.95 and large["output_error"] < 0.2


def two_grpo_steps(output_dir, setting: str):
    """(loss logs, final LoRA weights, trainer) of two GRPO steps of gsm8k_tiny with one generation ``setting``."""
    from recipes.run import build_trainer

    recipe = load_recipe(
        "gsm8k_tiny",
        [
            f"trainer.output_dir={output_dir}",
            setting,
            "trainer.max_steps=2",
            "trainer.logging_steps=1",
            "trainer.learning_rate=1e-2",
            "checkpoint.every_steps=2",
            "callbacks=[]",
            "heldout.enabled=false",
            EVEN_TOKEN_REWARD,
        ],
    )
    trainer = build_trainer(recipe)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return logs, {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}, trainer


def assert_trained_alike(run, other, rel: float, atol: float) -> None:
    """Two ``two_grpo_steps`` runs logged the same losses, gradients and rewards and ended on the same adapter,
    a non-zero one."""
    (logs, lora, _), (other_logs, other_lora, _) = run, other
    for got, want in zip(logs, other_logs, strict=True):
        for key in ("loss", "grad_norm", "reward", "completions/mean_length"):
            assert got[key] == pytest.approx(want[key], rel=rel, abs=atol / 10), key
    assert all(torch.allclose(lora[n], other_lora[n], atol=atol) for n in lora)
    assert any(not torch.equal(p, torch.zeros_like(p)) for n, p in lora.items() if "lora_B" in n)


@pytest.mark.slow
def test_a_grpo_step_trains_the_same_with_merged_generation(tmp_path, monkeypatch):
    calls = {"n": 0}
    forward = MergedLinear.forward

    def counted(self, x, *args, **kwargs):
        calls["n"] += 1
        return forward(self, x, *args, **kwargs)

    monkeypatch.setattr(MergedLinear, "forward", counted)
    merged = two_grpo_steps(tmp_path / "merged", "lora.merged_generation=true")
    merged_calls = calls["n"]
    plain = two_grpo_steps(tmp_path / "plain", "lora.merged_generation=false")
    assert merged_calls > 0 and calls["n"] == merged_calls  # generation ran merged, and only when asked
    assert_trained_alike(merged, plain, rel=1e-5, atol=1e-6)
