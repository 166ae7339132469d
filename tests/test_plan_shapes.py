"""The planner's parameter counts against models built from the same configs (meta device), and config loading."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig

from recipes.planner import shapes
from recipes.planner.memory import plan_memory
from recipes.planner.shapes import SHAPES, config_for, load_model_config, lora_targets, shape_of
from recipes.recipe import RecipeError
from tests._plan_helpers import meta_model, recipe_config


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize(
    "targets", ["all-linear", ["q_proj", "v_proj"], ["q_proj", "embed_tokens"], r".*(v_proj|embed_tokens)"]
)
def test_counts_match_the_model_and_adapter_built_from_the_same_config(name, targets):
    config = config_for(name)
    model = get_peft_model(
        meta_model(config), LoraConfig(r=8, lora_alpha=16, target_modules=targets, task_type="CAUSAL_LM")
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    plan = plan_memory(recipe_config(name, lora={"r": 8, "target_modules": targets}), model_config=config)

    assert plan.base_params == sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert plan.trainable_params == sum(p.numel() for p in trainable)
    # peft upcasts adapters of a bf16 base to fp32: the planner's adapter bytes follow
    assert {p.dtype for p in trainable} == {torch.float32}
    assert plan.adapter_dtype == "float32" and plan.lora_params == plan.trainable_params * 4


def test_shipped_configs_carry_the_published_values():
    llama, qwen7, qwen15 = (
        config_for(n)
        for n in (
            "meta-llama/Llama-3.1-8B-Instruct",
            "Qwen/Qwen2.5-7B-Instruct",
            "Qwen/Qwen2.5-1.5B-Instruct",
        )
    )
    assert (llama.vocab_size, llama.hidden_size, llama.intermediate_size, llama.num_key_value_heads) == (
        128256, 4096, 14336, 8,
    )  # fmt: skip
    assert llama.rope_parameters["rope_type"] == "llama3" and llama.rope_parameters["rope_theta"] == 500000.0
    qwen7_values = (qwen7.vocab_size, qwen7.hidden_size, qwen7.intermediate_size, qwen7.num_hidden_layers)
    assert qwen7_values + (qwen7.num_attention_heads, qwen7.num_key_value_heads) == (
        152064,
        3584,
        18944,
        28,
        28,
        4,
    )
    qwen15_values = (
        qwen15.vocab_size,
        qwen15.hidden_size,
        qwen15.intermediate_size,
        qwen15.num_hidden_layers,
    )
    assert qwen15_values + (qwen15.num_attention_heads, qwen15.num_key_value_heads) == (
        151936,
        1536,
        8960,
        28,
        12,
        2,
    )
    assert (llama.tie_word_embeddings, qwen7.tie_word_embeddings, qwen15.tie_word_embeddings) == (
        False,
        False,
        True,
    )
    # Qwen2.5-Math-1.5B: Qwen2.5-1.5B's shape with a 4,096-token context (prompt + completion must fit).
    math15 = config_for("Qwen/Qwen2.5-Math-1.5B")
    assert (math15.hidden_size, math15.num_hidden_layers, math15.num_attention_heads, math15.num_key_value_heads) == (
        1536, 28, 12, 2,
    )  # fmt: skip
    assert (math15.intermediate_size, math15.vocab_size, math15.max_position_embeddings) == (
        8960,
        151936,
        4096,
    )
    assert math15.tie_word_embeddings is True
    attention = meta_model(qwen15).model.layers[0].self_attn
    assert (
        attention.q_proj.bias is not None
        and attention.v_proj.bias is not None
        and attention.o_proj.bias is None
    )


@pytest.mark.parametrize(
    "model_type, extra",
    [
        ("llama", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True}),
        ("mistral", {"head_dim": 32}),
        ("qwen3", {"head_dim": 24, "attention_bias": True}),
    ],
)
def test_other_dense_decoders_count_exactly(model_type, extra):
    config = AutoConfig.for_model(
        model_type, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=300, **extra,
    )  # fmt: skip
    targets = r"model\.layers\.[02]\.(self_attn\.k_proj|mlp\.down_proj)"  # a regex, as peft reads a string
    model = get_peft_model(meta_model(config), LoraConfig(r=4, target_modules=targets, task_type="CAUSAL_LM"))
    plan = plan_memory(recipe_config(lora={"r": 4, "target_modules": targets}), model_config=config)
    assert plan.base_params == sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert plan.trainable_params == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert plan.adapted_linears == 4


def test_unmodelled_architecture_fails_clearly():
    with pytest.raises(
        RecipeError, match="'gpt2'.*llama, mistral, qwen2, qwen3|llama, mistral, qwen2, qwen3.*'gpt2'"
    ):
        shape_of(AutoConfig.for_model("gpt2", n_layer=2, n_embd=64, n_head=4))


def test_targets_that_match_nothing_list_the_module_names():
    shape = shape_of(config_for("Qwen/Qwen2.5-1.5B-Instruct"))
    with pytest.raises(
        RecipeError,
        match=r"'qproj' matches no linear.*Did you mean q_proj\? Available: all-linear, q_proj, k_proj",
    ):
        lora_targets(shape, ["qproj"])
    # One typo among good names: peft would adapt the others and drop it without a word.
    with pytest.raises(RecipeError, match=r"lora.target_modules: 'v_prj' matches no linear"):
        lora_targets(shape, ["q_proj", "v_prj"])
    # A string is peft's regular expression over the whole name, so a bare layer name matches nothing.
    with pytest.raises(
        RecipeError, match=r"a single string is a regular expression .* give a list: \[q_proj\]"
    ):
        lora_targets(shape, "q_proj")
    assert len(lora_targets(shape, r".*\.q_proj")) == shape.layers
    assert {x.name for x in lora_targets(shape, ["lm_head"])} == {"lm_head"}
    assert len(lora_targets(shape, ["q_proj", "embed_tokens"])) == shape.layers  # peft adapts embeddings too


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_shipped_view_reads_as_the_config_class_does(name):
    """--plan reads the shipped JSON without transformers' config classes: every value the planner and the start
    checks read must be the one the class gives, its defaults for keys the JSON leaves out included."""
    view, config = load_model_config({"name_or_path": name}), config_for(name)
    assert not isinstance(view, type(config)) and shape_of(view) == shape_of(config)
    for key in ("model_type", "name_or_path", "max_position_embeddings", "vocab_size"):
        assert getattr(view, key) == getattr(config, key), key
    assert str(view.dtype) == str(config.dtype).removeprefix("torch.")


def test_shipped_names_resolve_offline(monkeypatch):
    def no_network(section):
        raise AssertionError(f"tried to load {section['name_or_path']}")

    monkeypatch.setattr("recipes.model.load_config", no_network)
    config = load_model_config({"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"})
    assert config.model_type == "llama" and config.num_hidden_layers == 32


def test_builtin_tiny_model_resolves_through_its_folder():
    from recipes.builtin.tiny_llama import TINY_CONFIG

    config = load_model_config(
        {"name_or_path": "builtin:tiny-llama", "revision": None, "trust_remote_code": False}
    )
    assert config.model_type == "llama" and config.hidden_size == TINY_CONFIG["hidden_size"]


def test_unloadable_name_fails_with_the_reason_and_the_offline_choices(tmp_path, monkeypatch):
    section = {"name_or_path": str(tmp_path), "revision": None, "trust_remote_code": False}
    with pytest.raises(RecipeError) as error:
        load_model_config(section)
    assert str(tmp_path) in str(error.value) and "Qwen/Qwen2.5-7B-Instruct" in str(error.value)

    def offline(section):
        raise OSError(
            "We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection."
        )

    monkeypatch.setattr("recipes.model.load_config", offline)
    with pytest.raises(
        RecipeError, match=r"'org/typo-model' \(We couldn't connect .*\)\. Give a local folder"
    ):
        load_model_config({**section, "name_or_path": "org/typo-model"})


def test_config_for_unknown_name_lists_the_shapes():
    with pytest.raises(KeyError, match="Available: meta-llama/Llama-3.1-8B-Instruct"):
        shapes.config_for("Qwen/Qwen2.5-3B-Instruct")
