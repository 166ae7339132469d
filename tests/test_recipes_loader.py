"""Recipe loading: every shipped recipe builds its GRPOConfig; every error path says what and where."""

from __future__ import annotations

import pytest
import yaml
from _in_process import run_recipe
from conftest import REPO

from recipes.recipe import RecipeError, available, load_recipe, trainer_defaults
from recipes.run import grpo_config

RECIPES = sorted(available())


def test_recipes_are_found_by_listing_the_folder():
    assert len(RECIPES) > 0
    assert {"gsm8k_llama", "gsm8k_llama_qlora", "gsm8k_qwen", "gsm8k_qwen_small", "gsm8k_tiny"} <= set(
        RECIPES
    )
    assert {"arith_tiny", "math_tiny", "math_qwen_math", "math_qwen"} <= set(RECIPES)
    assert len(RECIPES) == len([p for p in (REPO / "recipes").glob("*.yaml") if not p.name.startswith("_")])


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_loads_validates_and_builds_grpo_config(name):
    recipe = load_recipe(name)
    config = grpo_config(recipe)
    assert config.save_steps == recipe.config["checkpoint"]["every_steps"]
    assert config.generation_batch_size % config.num_generations == 0
    assert config.reward_weights == [float(r["weight"]) for r in recipe.config["rewards"]]
    assert available()[name], f"{name}.yaml needs a one-line description as its first comment line"


def test_published_settings_are_what_the_recipes_say():
    llama = load_recipe("gsm8k_llama").config
    assert llama["model"]["name_or_path"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert (
        llama["trainer"]["per_device_train_batch_size"],
        llama["trainer"]["gradient_accumulation_steps"],
    ) == (6, 4)
    assert llama["trainer"]["num_generations"] == 6 and llama["checkpoint"]["every_steps"] == 25
    assert llama["lora"] == {
        "r": 16,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": "all-linear",
        "merged_generation": "auto",
    }
    qwen = load_recipe("gsm8k_qwen").config["trainer"]
    assert (qwen["num_generations"], qwen["max_completion_length"], qwen["beta"]) == (12, 400, 0.04)
    assert (qwen["epsilon"], qwen["max_grad_norm"]) == (0.1, 0.1)
    assert load_recipe("gsm8k_llama_qlora").config["model"]["quantization"] == "4bit"
    assert load_recipe("gsm8k_qwen_small").config["model"]["name_or_path"] == "Qwen/Qwen2.5-1.5B-Instruct"
    math = load_recipe("math_qwen_math").config
    assert (math["model"]["name_or_path"], math["data"]["task"]) == ("Qwen/Qwen2.5-Math-1.5B", "math")
    assert (math["data"]["source"], math["data"]["config"], math["data"]["eval_source"]) == (
        "EleutherAI/hendrycks_math",
        None,
        "HuggingFaceH4/MATH-500",
    )
    t = math["trainer"]
    assert (t["num_generations"], t["temperature"], t["beta"], t["epsilon"]) == (8, 1.0, 0.0, 0.2)
    assert (t["loss_type"], t["scale_rewards"], t["use_vllm"]) == ("dr_grpo", "none", False)
    # Qwen2.5-Math-1.5B holds 4,096 tokens: the prompt and completion budgets must fit in it together.
    assert math["data"]["max_prompt_tokens"] + t["max_completion_length"] <= 4096
    for name in ("math_tiny", "math_qwen_math", "math_qwen"):
        config = load_recipe(name).config
        assert {"name": "format", "weight": 1.0, "style": "boxed"} in config["rewards"]
        assert "\\boxed{}" in config["data"]["system_prompt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["trainer.learnin_rate=1e-5"],
            (
                "Unknown key trainer.learnin_rate in override "
                "'trainer.learnin_rate=1e-5'. Did you mean trainer.learning_rate?"
            ),
        ),
        (["lora.rank=8"], "Unknown key lora.rank"),
        # A key of another section, or of no section: named where it lives, not its nearest neighbour here.
        (["lora.compiled_generation=true"], "Did you mean model.compiled_generation?"),
        (["model.learning_rate=1e-5"], "Did you mean trainer.learning_rate?"),
        (
            ["compiled_generation=true"],
            (
                "Unknown section compiled_generation in override "
                "'compiled_generation=true'. Did you mean model.compiled_generation?"
            ),
        ),
        (
            ["modl.dtype=float32"],
            "Unknown section modl in override 'modl.dtype=float32'. Did you mean model?",
        ),
        # A list is replaced whole: an override reaching into one says how to give it all.
        (
            ["rewards.0.weight=2"],
            "rewards is a list, replaced whole (never item by item): give all of it, e.g. ",
        ),
        (
            ["rewards.weight=2"],
            "must be a list of mappings, got {'weight': 2}. rewards is a list, replaced whole",
        ),
        # No close spelling: the sections there are; lm-eval's include: names our base:.
        (["zzz.a=1"], "Unknown section zzz in override 'zzz.a=1'. Sections: base, model, lora,"),
        (
            ["include=gsm8k_tiny"],
            "Unknown section include in override 'include=gsm8k_tiny'. Recipes compose with base:",
        ),
        (
            ["trainer.learning_rate=fast"],
            ("trainer.learning_rate in override 'trainer.learning_rate=fast' must be a number, got 'fast'."),
        ),
        (["lora.r=1.5"], "lora.r in override 'lora.r=1.5' must be an integer, got 1.5."),
        (["lora.r=0"], "lora.r in override 'lora.r=0' must be at least 1 (the adapter's rank"),
        (
            ["trainer.max_steps=0"],
            "trainer.max_steps in override 'trainer.max_steps=0' must be at least 1",
        ),
        (
            ["trainer.num_generations=0"],
            "trainer.num_generations in override 'trainer.num_generations=0' must be at least 2",
        ),
        (["trainer.num_generations=1"], "must be at least 2: GRPO compares completions of one prompt"),
        (
            ["trainer.ddp_timeout=0"],
            "trainer.ddp_timeout in override 'trainer.ddp_timeout=0' must be at least 1",
        ),
        (
            ["trainer.learning_rate=-1e-3"],
            "trainer.learning_rate in override 'trainer.learning_rate=-1e-3' must be a finite number above 0, e.g. 1e-5, got -0.001.",
        ),
        (["trainer.learning_rate=.nan"], "must be a finite number above 0, e.g. 1e-5, got nan."),
        (
            ["trainer.temperature=0"],
            "trainer.temperature in override 'trainer.temperature=0' must be a finite number above 0",
        ),
        (  # was refused only after the data loaded, as "trainer.top_p 2 (the recipe's; --top-p overrides it)"
            ["trainer.top_p=2"],
            "trainer.top_p in override 'trainer.top_p=2' must be above 0 and at most 1 (1.0 keeps every token), got 2.",
        ),
        (["trainer.top_p=0"], "must be above 0 and at most 1 (1.0 keeps every token), got 0."),
        # transformers' traceback when the trainer was built, after recipe.yaml was written
        (
            ["trainer.warmup_steps=-3"],
            "trainer.warmup_steps in override 'trainer.warmup_steps=-3' must be a whole number of steps, at least 0",
        ),
        (
            ["trainer.logging_steps=0"],
            "trainer.logging_steps in override 'trainer.logging_steps=0' must be a whole number of steps, at least 1",
        ),
        # trained on silently: a negative clipping range or KL weight
        (
            ["trainer.epsilon=-1"],
            "trainer.epsilon in override 'trainer.epsilon=-1' must be a finite number above 0",
        ),
        (
            ["trainer.beta=-0.1"],
            "trainer.beta in override 'trainer.beta=-0.1' must be a finite number, at least 0",
        ),
        (["trainer.warmup_steps=.inf"], "must be a whole number of steps, at least 0, or a number below 1"),
        (["trainer.adam_beta2=1"], "trainer.adam_beta2 in override 'trainer.adam_beta2=1' must be in [0, 1)"),
        (["model.quantization=3bit"], "must be one of none, 4bit, 8bit, got '3bit'. Did you mean 8bit?"),
        (["model.quantization=4BIT"], "must be one of none, 4bit, 8bit, got '4BIT'. Did you mean 4bit?"),
        # a choice of true/false too: 1 == True in Python, yet 1 is not one of the choices
        (
            ["lora.merged_generation=1"],
            (
                "lora.merged_generation in override 'lora.merged_generation=1' "
                "must be one of auto, true, false, got 1."
            ),
        ),
        (["lora.merged_generation=AUTO"], "must be one of auto, true, false, got 'AUTO'. Did you mean auto?"),
        # transformers ignores the old name when the new one is set (the base recipe sets it): refused, renamed
        (
            ["trainer.gradient_checkpointing=false"],
            (
                "trainer.gradient_checkpointing in override 'trainer.gradient_checkpointing=false' "
                "is the old name of trainer.activation_checkpointing: write activation_checkpointing instead."
            ),
        ),
        (["trainer.use_transformers_paged=true"], "old name of trainer.use_transformers_continuous_batching"),
        (["trainer"], "Malformed override 'trainer': expected section.key=value"),
        (["=3"], "Malformed override '=3'"),
        (  # it said only "must be a mapping, got bool"
            ["heldout=false"],
            "override 'heldout=false': section heldout must be a mapping, got bool. Write heldout.enabled=false.",
        ),
        (["lora=3"], "section lora must be a mapping, got int. Set its keys: lora.KEY=VALUE."),
        (["trainer.max_steps=a: b: c"], "override 'trainer.max_steps=a: b: c': not valid YAML"),
        # what the shell makes of an unquoted `rewards=[{name: format}]`: two arguments, the first cut short
        (
            ["rewards=[{name:"],
            (
                "Override 'rewards=[{name:': its brackets do not pair up. The shell splits an override at each "
                "space unless it is quoted: put the whole override in single quotes, 'rewards=...'."
            ),
        ),
        # text that YAML reads as something else: a comment dropped `#### N` without a word
        (
            ["data.system_prompt=End with #### N"],
            (
                "YAML reads ' #' as the start of a comment and would drop the rest of the value. Put the value in "
                """double quotes to keep it: 'data.system_prompt="End with #### N"'"""
            ),
        ),
        (
            ["data.system_prompt=Solve: end with N"],
            (
                "got {'Solve': 'end with N'}. YAML read it as a mapping (': ' inside a value starts one): to keep "
                """it as text, put it in double quotes, 'data.system_prompt="..."' (single quotes around the"""
            ),
        ),
        (
            ["model.revision=0123"],
            "got 83. YAML read it as a number: to keep it as text, put it in double quotes",
        ),
        (
            ["lora.rank=8"],
            "Unknown key lora.rank in override 'lora.rank=8'. Did you mean lora.r?",
        ),
        (
            ["model.dtype=fp32"],
            "must be one of bfloat16, float16, float32, auto, got 'fp32'. Did you mean float32?",
        ),
        (["model.dtype=[fp32]"], "must be one of bfloat16, float16, float32, auto, got ['fp32']."),
        (
            ["model.name_or_path=builtin:tiny-lama"],
            (
                "unknown built-in model 'builtin:tiny-lama' (in override "
                "'model.name_or_path=builtin:tiny-lama'). Did you mean builtin:tiny-llama?"
            ),
        ),
        (["rewards=[{name: corectness}]"], "unknown reward 'corectness'. Did you mean 'correctness'?"),
        (
            ["trainer.per_device_train_batch_size=5"],
            (
                "the generation batch (5 completions = per_device_train_batch_size "
                "5 x 1 processes x steps_per_generation 1) is not divisible by trainer.num_generations (4)"
            ),
        ),
        (
            ["trainer.save_steps=3"],
            (
                "trainer.save_steps=3 in override 'trainer.save_steps=3' is set by the "
                "runner from the recipe (checkpoint.every_steps, which gives 4); set that instead."
            ),
        ),
        (
            ["trainer.steps_per_generation=2", "checkpoint.every_steps=3"],
            (
                "checkpoint.every_steps (3) in override 'checkpoint.every_steps=3' cuts a GRPO generation cycle in half"
            ),
        ),
    ],
)
def test_errors_name_the_source_and_suggest_a_fix(args, message):
    with pytest.raises(RecipeError) as error:
        load_recipe("gsm8k_tiny", args)
    assert message in str(error.value)


def test_unknown_recipe_lists_the_available_ones():
    with pytest.raises(
        RecipeError, match=r"Unknown recipe 'gsm8k_lama'\. Did you mean gsm8k_llama\? Available: "
    ):
        load_recipe("gsm8k_lama")


def run_cli(*args):
    return run_recipe(*args)


def test_cli_lists_prints_and_reports_errors_without_traceback():
    listing = run_cli("--list")
    assert listing.returncode == 0
    for name, description in available().items():
        assert name in listing.stdout and description in listing.stdout
    printed = run_cli("gsm8k_qwen", "trainer.max_steps=7", "--print")
    assert printed.returncode == 0, printed.stderr
    assert yaml.safe_load(printed.stdout) == load_recipe("gsm8k_qwen", ["trainer.max_steps=7"]).config
    bad = run_cli("gsm8k_tiny", "trainer.learnin_rate=1")
    assert bad.returncode == 2
    assert "Did you mean trainer.learning_rate?" in bad.stderr and "Traceback" not in bad.stderr
    both = run_cli("gsm8k_tiny", "--print", "--plan")  # printed the recipe alone, the plan unsaid
    assert both.returncode == 2 and "argument --plan: not allowed with argument --print" in both.stderr


def test_readme_documents_every_recipe_key():
    from recipes import schema

    readme = (REPO / "README.md").read_text()
    for section, keys in schema.SECTIONS.items():
        assert f"**`{section}:`**" in readme
        for key in keys:
            assert f"| `{key}` |" in readme, f"README's recipe reference lacks {section}.{key}"


def test_every_reader_sees_the_resolved_trainer_numbers():
    from recipes.checks import generation_schedule
    from recipes.evaluation.generation import decoding_for
    from recipes.planner.memory import trainer_settings
    from recipes.recipe import reward_defaults
    from recipes.run import grpo_config
    from rewards import build_rewards

    recipe = load_recipe("gsm8k_tiny", ["trainer.max_completion_length=48"])
    trainer = recipe.config["trainer"]
    assert trainer["temperature"] == trainer_defaults()["temperature"]  # not set by the recipe: GRPOConfig's
    config = grpo_config(recipe)
    assert decoding_for(trainer, None, None, None).max_new_tokens == config.max_completion_length == 48
    assert trainer_settings(recipe.config)["max_completion_length"] == 48
    assert generation_schedule(trainer, processes=1) == (
        config.generation_batch_size,
        config.steps_per_generation,
    )
    funcs, _ = build_rewards(recipe.config["rewards"], defaults=reward_defaults(recipe.config))
    assert funcs[0].max_completion_length == 48


def test_renamed_trainer_keys_resolve_under_their_new_names_as_grpo_config_does(tmp_path):
    from trl import GRPOConfig

    from recipes.run import grpo_config

    # GRPOConfig turns checkpointing on through the old name; the resolved recipe says so under the new one.
    untouched = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False)
    assert trainer_defaults()["activation_checkpointing"] is untouched.activation_checkpointing is True
    for name in ("gsm8k_tiny", "gsm8k_llama"):
        recipe = load_recipe(name)
        trainer = recipe.config["trainer"]
        assert not {"gradient_checkpointing", "use_transformers_paged"} & set(trainer)
        config = grpo_config(recipe)
        assert (
            config.activation_checkpointing
            == config.gradient_checkpointing
            == trainer["activation_checkpointing"]
        )


def test_checkpoint_section_is_validated_at_load_by_its_one_rule_set():
    with pytest.raises(
        RecipeError,
        match=r"keep_last limits remote checkpoints and needs checkpoint.uri.*"
        r"\(set in override 'checkpoint.keep_last=2'\)",
    ):
        load_recipe("gsm8k_tiny", ["checkpoint.keep_last=2"])
    printed = run_cli("gsm8k_tiny", "checkpoint.run_id=my run", "--print")
    assert printed.returncode == 2 and "checkpoint.run_id must be null or letters" in printed.stderr


@pytest.mark.parametrize("given", ["_base", "recipes/_base.yaml", str(REPO / "recipes" / "_base.yaml")])
def test_a_base_is_not_a_recipe_to_run(given, monkeypatch):
    """By path, its missing keys were answered 'set it there': advice to edit the project's own file."""
    monkeypatch.chdir(REPO)
    with pytest.raises(
        RecipeError, match=r"^_base is a base that recipes build on \(base: _base\), not a recipe"
    ):
        load_recipe(given)


def test_overrides_given_as_one_string_are_refused_with_the_list_form():
    """A notebook's `overrides = "trainer.max_steps=8"` was read character by character ("Malformed override 't'")."""
    with pytest.raises(
        RecipeError, match=r"overrides must be a list .* got the string 'trainer.max_steps=8': write a list"
    ):
        load_recipe("gsm8k_tiny", "trainer.max_steps=8")


def test_a_vllm_run_sizes_vllms_context_to_prompt_plus_completion():
    """Unset, vLLM planned for Llama 3.1's 131,072-token context (16 GiB of KV cache for one sequence) and would not
    start in the colocate share --plan advises; a recipe's own setting is kept."""
    from recipes.run import grpo_config

    config = grpo_config(load_recipe("gsm8k_llama", ["trainer.use_vllm=true"]))
    assert config.vllm_max_model_length == 256 + 512
    mine = grpo_config(
        load_recipe("gsm8k_llama", ["trainer.use_vllm=true", "trainer.vllm_max_model_length=4096"])
    )
    assert mine.vllm_max_model_length == 4096
    assert grpo_config(load_recipe("gsm8k_llama")).vllm_max_model_length is None  # no vLLM: left alone
