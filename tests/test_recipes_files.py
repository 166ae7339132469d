"""Recipe files: YAML rules, bases a recipe builds on, resolved recipes written out and read back."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from recipes.layers import parse_yaml
from recipes.recipe import RecipeError, load_recipe, parse_override, trainer_defaults


def test_exponent_floats_read_as_floats():
    recipe = load_recipe("gsm8k_tiny", ["trainer.learning_rate=1e-5"])
    assert recipe.config["trainer"]["learning_rate"] == pytest.approx(1e-5)
    assert isinstance(load_recipe("gsm8k_llama").config["trainer"]["learning_rate"], float)
    assert parse_override("trainer.learning_rate=3E-4") == {"trainer": {"learning_rate": 3e-4}}


def test_base_composition_merges_mappings_and_replaces_lists(tmp_path):
    (tmp_path / "_parent.yaml").write_text(
        "model: {name_or_path: builtin:tiny-llama, dtype: float32}\n"
        "data: {system_prompt: 'Answer in <answer> tags.', source: samples/gsm8k_train_sample.jsonl}\n"
        "rewards: [{name: correctness}, {name: format}]\ntrainer: {bf16: false, num_generations: 4}\n"
    )
    (tmp_path / "child.yaml").write_text(
        "# A child recipe.\nbase: _parent\nrewards: [{name: format, weight: 0.5}]\n"
        "trainer: {per_device_train_batch_size: 4, gradient_accumulation_steps: 1}\n"
    )
    recipe = load_recipe(str(tmp_path / "child.yaml"), ["trainer.num_generations=2"])
    assert recipe.config["rewards"] == [{"name": "format", "weight": 0.5}]
    set_here = {
        "bf16": False,
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "output_dir": "outputs/child",
        "save_strategy": "steps",
        "save_steps": 25,  # from checkpoint.every_steps
        "reward_weights": [0.5],  # from rewards[].weight
    }
    # Resolved once: the recipe's keys, then every other GRPOConfig field at its default.
    assert recipe.config["trainer"] == {**trainer_defaults(), **set_here}
    assert list(recipe.config["trainer"])[:4] == [
        "bf16",
        "num_generations",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
    ]
    assert recipe.config["model"]["attn_implementation"] == "sdpa"  # schema default filled in


@pytest.mark.parametrize("name", ["gsm8k_tiny", "arith_tiny", "gsm8k_llama_qlora"])
def test_a_resolved_recipe_written_out_loads_back_as_the_same_recipe(name, tmp_path):
    # What --print shows and what a run writes to OUTPUT_DIR/recipe.yaml, the runner's own keys included.
    recipe = load_recipe(name)
    written = tmp_path / "recipe.yaml"
    written.write_text(recipe.to_yaml())
    assert load_recipe(str(written)).config == recipe.config


def test_errors_in_a_file_name_that_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("# Bad.\nbase: gsm8k_tiny\ntrainer: {learning_rat: 0.1}\n")
    bad.with_name("gsm8k_tiny.yaml").write_text((REPO / "recipes" / "gsm8k_tiny.yaml").read_text())
    bad.with_name("_base.yaml").write_text((REPO / "recipes" / "_base.yaml").read_text())
    with pytest.raises(
        RecipeError,
        match=rf"Unknown key trainer.learning_rat in {bad}\. Did you mean trainer.learning_rate\?",
    ):
        load_recipe(str(bad))


def test_text_that_yaml_reads_as_a_number_is_refused_with_how_to_quote_it(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: gsm8k_tiny\nmodel:\n  revision: 0123\n")
    with pytest.raises(RecipeError) as error:
        load_recipe(str(mine))
    assert f'model.revision in {mine} must be a string or null, got 83. YAML read it as a number: to keep it as ' \
        'text, put it in double quotes, revision: "...".' in str(error.value)  # fmt: skip
    mine.write_text('base: gsm8k_tiny\nmodel:\n  revision: "0123"\n')
    assert load_recipe(str(mine)).config["model"]["revision"] == "0123"


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    """YAML keeps the last of two equal keys: a second trainer: section silently dropped the first's values."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "base: gsm8k_tiny\ntrainer:\n  max_steps: 3\ndata:\n  limit: 8\ntrainer:\n  learning_rate: 0.1\n"
    )
    with pytest.raises(RecipeError) as error:
        load_recipe(str(mine))
    assert f"{mine}: not valid YAML: key 'trainer' appears twice in one mapping (first on line 2)" in str(
        error.value
    )
    assert "line 6, column 1" in str(error.value) and "merge the two into one" in str(error.value)
    with pytest.raises(RecipeError, match="key 'max_steps' appears twice"):
        load_recipe("gsm8k_tiny", ["trainer={max_steps: 2, max_steps: 3}"])
    # Merge keys and a reused anchor (which PyYAML hands back already merged) are no repeated keys.
    merged = parse_yaml("b: &b {a: 1, x: 3}\nd: {<<: &c {<<: *b, a: 2}}\ne: *c\n", "merges.yaml")
    assert merged["e"] == {"a": 2, "x": 3}
    mine.write_text(
        "base: gsm8k_tiny\ntrainer:\n  max_steps: 3\ndata:\n  max_steps: 3\n"
    )  # same key, other sections
    with pytest.raises(RecipeError, match=r"Unknown key data\.max_steps"):
        load_recipe(str(mine))


def test_a_recipe_of_your_own_builds_on_a_shipped_one_by_name(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("# Mine.\nbase: gsm8k_tiny\ntrainer: {max_steps: 3}\n")
    recipe = load_recipe(str(mine))
    assert (
        recipe.config["trainer"]["max_steps"] == 3
        and recipe.config["model"]["name_or_path"] == "builtin:tiny-llama"
    )
    mine.write_text("base: gsm8k_tinny\n")
    with pytest.raises(
        RecipeError,
        match=r"base: 'gsm8k_tinny' not found \(looked for .*\)\. Did you mean base: gsm8k_tiny\?",
    ):
        load_recipe(str(mine))


def test_base_is_one_name_per_file_and_never_an_override(tmp_path):
    """An lm-eval style list of bases, or a base given after the files, would be ignored or misread: refused."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: [gsm8k_tiny, arith_tiny]\n")
    with pytest.raises(RecipeError, match=r"base: must be one recipe name or .yaml file, got \['gsm8k_tiny'"):
        load_recipe(str(mine))
    with pytest.raises(RecipeError, match=r"^base cannot be overridden \(base='arith_tiny'\)"):
        load_recipe("gsm8k_tiny", ["base=arith_tiny"])
    with pytest.raises(RecipeError, match=r"^base cannot be overridden"):
        load_recipe("gsm8k_tiny", values={"base": "arith_tiny"})


def test_a_key_missing_from_a_recipe_on_base_is_named_in_that_recipe(tmp_path):
    """_base.yaml leaves model.name_or_path to each recipe: the fix is in the user's file, not in _base.yaml."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: _base\n")
    with pytest.raises(
        RecipeError, match=rf"^Missing required key model.name_or_path in {mine} \(set it there\)"
    ):
        load_recipe(str(mine))


def test_a_non_utf8_recipe_or_a_folder_is_one_line_naming_it(tmp_path):
    recipe = tmp_path / "mine.yaml"
    recipe.write_bytes(b"model: {name_or_path: x}\n# caf\xe9\n")
    with pytest.raises(
        RecipeError, match=rf"^{recipe} line 2 is not UTF-8 text \(invalid continuation byte\)"
    ):
        load_recipe(str(recipe))
    with pytest.raises(RecipeError, match=rf"^{tmp_path} is a folder; a recipe is a .yaml file or a name"):
        load_recipe(str(tmp_path))


def test_a_recipe_yaml_written_by_an_earlier_version_loads_as_the_same_recipe(tmp_path):
    """Earlier versions wrote the old names of renamed trainer keys, at GRPOConfig's defaults, into recipe.yaml."""
    written = load_recipe("arith_tiny").config
    old = {**written, "trainer": {**written["trainer"], "gradient_checkpointing": True,
                                  "gradient_checkpointing_kwargs": None, "use_transformers_paged": False,
                                  "vllm_importance_sampling_cap": None}}  # fmt: skip
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(old))
    assert load_recipe(str(path)).config == written
    old["trainer"]["gradient_checkpointing"] = False  # not what an earlier version wrote: a real use, refused
    path.write_text(yaml.safe_dump(old))
    with pytest.raises(RecipeError, match=r"trainer.gradient_checkpointing in .*recipe.yaml is the old name"):
        load_recipe(str(path))
