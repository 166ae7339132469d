"""recipes/evaluation/generation.py and vllm_engine.py: decoding defaults, token counting, and the vLLM engine's use
of vLLM's API."""

from __future__ import annotations

import json
import re
import sys
import types
from types import SimpleNamespace

import pytest

from recipes.evaluation.generation import (
    Completion,
    Decoding,
    EvaluationError,
    HFGenerator,
    decoding_for,
    generation_config,
)
from recipes.evaluation.vllm_engine import VLLMGenerator
from recipes.model import load_model_and_tokenizer
from recipes.recipe import load_recipe


def test_decoding_defaults_to_the_recipes_training_sampling():
    trainer = load_recipe("gsm8k_tiny").config["trainer"]  # max_completion_length 32, temperature unset
    assert decoding_for(trainer, None, None, None) == Decoding(1.0, 1.0, 32)
    assert decoding_for({**trainer, "temperature": 0.7}, None, 0.9, 8) == Decoding(0.7, 0.9, 8)
    assert decoding_for({}, 0, None, None, samples=1) == Decoding(0.0, 1.0, 512)  # GRPOConfig's defaults
    with pytest.raises(EvaluationError, match="all 5 samples would be the same"):
        decoding_for(trainer, 0, None, None, samples=5)
    with pytest.raises(
        EvaluationError, match=r"^Bad decoding setting: --temperature -1: expected 0 or above\.$"
    ):
        decoding_for(trainer, -1, None, None)


@pytest.mark.parametrize(
    ("trainer", "given", "said"),
    [
        ({}, (float("nan"), None, None), "--temperature nan: expected 0 or above"),  # nan passed
        (
            {"top_p": 2.0},
            (None, None, None),
            "trainer.top_p 2 (the recipe's; --top-p overrides it): expected above 0",
        ),
        (
            {},
            (-2, 0, None),
            "--temperature -2: expected 0 or above; --top-p 0: expected above 0 and at most 1",
        ),
    ],
)
def test_a_bad_decoding_setting_is_named_by_where_it_was_set(trainer, given, said):
    """It was "Bad decoding settings Decoding(temperature=-1.0, top_p=1.0, max_new_tokens=32): need temperature
    >= 0, 0 < top_p <= 1, max new tokens >= 1.", naming neither the option nor the recipe key."""
    with pytest.raises(EvaluationError, match=re.escape(f"Bad decoding setting: {said}")):
        decoding_for(trainer, *given)


def test_generation_config_forces_exactly_our_decoding(tiny_model_dir):
    from transformers import GenerationConfig

    base = GenerationConfig(temperature=0.6, top_p=0.9, top_k=20, repetition_penalty=1.1, max_length=8000)
    sampled = generation_config(base, Decoding(0.8, 0.95, 64), pad_token_id=0)
    assert (sampled.do_sample, sampled.temperature, sampled.top_p, sampled.top_k) == (True, 0.8, 0.95, 0)
    assert (sampled.repetition_penalty, sampled.max_new_tokens, sampled.pad_token_id) == (1.0, 64, 0)
    greedy = generation_config(base, Decoding(0, 1.0, 16), pad_token_id=0)
    assert greedy.do_sample is False and greedy.num_beams == 1 and greedy.max_new_tokens == 16
    assert base.top_k == 20  # the model's own config is left alone


def test_completion_ends_at_the_first_stop_token_and_counts_it(tiny_model_dir):
    model, tokenizer = load_model_and_tokenizer(
        load_recipe("gsm8k_tiny", [f"model.name_or_path={tiny_model_dir}"]).config["model"]
    )
    generator = HFGenerator(model, tokenizer, Decoding(1.0, 1.0, 8))
    words = tokenizer("18 eggs", add_special_tokens=False)["input_ids"]
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    assert generator._completion([*words, eos, pad, pad]) == Completion("18 eggs", len(words) + 1)
    assert generator._completion(words) == Completion("18 eggs", len(words))  # cut by max_new_tokens
    completions = generator.generate([words, words[:1]], seeds=[1, 2])
    assert len(completions) == 2 and all(1 <= c.n_tokens <= 8 for c in completions)
    assert generator.generate([words, words[:1]], seeds=[1, 2]) == completions  # same batch, same draws


def test_generating_leaves_an_fsdp2_policy_trainable(tiny_model_dir, tmp_path):
    """Held-out evaluation generates with the policy between training steps. Under inference_mode, FSDP2 gathered
    the weights as inference tensors and the next training forward failed ("Inference tensors do not track
    version counter"; seen on a GPU). FSDP2 over gloo, one process, shows it on a CPU."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model, tokenizer = load_model_and_tokenizer(
        load_recipe("gsm8k_tiny", [f"model.name_or_path={tiny_model_dir}"]).config["model"]
    )
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        words = tokenizer("18 eggs", add_special_tokens=False)["input_ids"]
        HFGenerator(model, tokenizer, Decoding(0, 1.0, 4)).generate([words], seeds=[1])
        model.train()
        loss = model(input_ids=torch.tensor([words]), labels=torch.tensor([words])).loss
        loss.backward()
        assert torch.isfinite(loss) and model.lm_head.weight.grad is not None
    finally:
        dist.destroy_process_group()


@pytest.fixture
def fake_vllm(monkeypatch):
    """vLLM's public offline API (LLM, SamplingParams, LoRARequest), recording how it is called."""
    calls = {}

    class LLM:
        def __init__(self, **kwargs):
            calls["init"] = kwargs

        def generate(self, requests, params, *, use_tqdm, lora_request):
            calls["generate"] = (requests, params, lora_request)
            return [SimpleNamespace(outputs=[SimpleNamespace(text=f"#### {i}", token_ids=[7] * (i + 2))])
                    for i in range(len(requests))]  # fmt: skip

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, lambda **kwargs: kwargs
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda *args: args
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    return calls


def test_vllm_engine_sends_token_prompts_with_one_seed_each(fake_vllm, tmp_path, tiny_model_dir):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 12}))
    model = load_recipe("gsm8k_tiny").config["model"]
    generator = VLLMGenerator(model, tmp_path, Decoding(0.7, 0.9, 16), seed=3)
    init = fake_vllm["init"]
    assert init["model"] == str(tiny_model_dir) and init["seed"] == 3 and init["dtype"] == "float32"
    assert init["enable_lora"] is True and init["max_lora_rank"] == 16  # the next rank vLLM supports
    assert init["max_model_len"] == 1024  # the tiny model's context, less than 2048 + 16
    completions = generator.generate([[1, 2], [3]], seeds=[11, 12])
    requests, params, lora = fake_vllm["generate"]
    assert requests == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
    assert [p["seed"] for p in params] == [11, 12]
    assert params[0] == {"n": 1, "temperature": 0.7, "top_p": 0.9, "max_tokens": 16, "seed": 11}
    assert lora == ("adapter", 1, str(tmp_path))
    assert completions == [Completion("#### 0", 2), Completion("#### 1", 3)]


def test_vllm_engine_refuses_8bit(fake_vllm):
    model = {**load_recipe("gsm8k_tiny").config["model"], "quantization": "8bit"}
    with pytest.raises(EvaluationError, match="cannot load model.quantization=8bit"):
        VLLMGenerator(model, None, Decoding(1.0, 1.0, 8), seed=0)
