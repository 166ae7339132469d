"""Impossible combinations, caught before any model weights load.

`check_combinations` needs only the recipe (it runs inside `load_recipe`). `check_environment` also needs the
machine and the model's config (a small JSON file), so `run.py` calls it just before loading weights, and
`recipes.planner.on_card.check_card` the GPU's size.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os

from common.suggestions import did_you_mean, install_extra
from recipes.planner.shapes import SUPPORTED_MODEL_TYPES, lora_targets, shape_of
from recipes.recipe import Recipe, RecipeError

logger = logging.getLogger(__name__)


def world_size() -> int:
    """Processes the run will use (accelerate launch sets WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def generation_schedule(trainer: dict, processes: int | None = None) -> tuple[int, int]:
    """(generation batch in completions, steps_per_generation in micro-steps), as GRPOConfig derives them.

    Args:
        trainer: A resolved recipe's ``trainer:`` section.
        processes: Processes sharing the batch; defaults to this launch's world size.
    """
    per_step = trainer["per_device_train_batch_size"] * (processes or world_size())
    if trainer["generation_batch_size"]:
        return trainer["generation_batch_size"], trainer["generation_batch_size"] // per_step
    steps = trainer["steps_per_generation"] or trainer["gradient_accumulation_steps"]
    return per_step * steps, steps


# report_to value -> (module it needs, the extra that installs it).
TRACKERS = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "trackio": ("trackio", "trackio"),
}


def unknown_trackers(recipe: Recipe) -> list[str]:
    """One line per trainer.report_to name transformers does not know (it raised after the model had loaded).
    Not at load, which every tool pays for: a run, --print and --plan (recipes/start_checks.py) ask it."""
    report_to = recipe.config["trainer"]["report_to"]
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if all(name in ("none", "all", *TRACKERS) for name in names):
        return []  # names transformers has long known: its integrations module takes ~9 s to import
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    known = ["none", "all", *INTEGRATION_TO_CALLBACK]
    where = recipe.origins.get("trainer.report_to", "the recipe")
    return [
        f"trainer.report_to: {name!r} in {where} is not a tracker transformers knows.{did_you_mean(name, known)} "
        f"Available: {', '.join(known)}."
        for name in names
        if name not in known
    ]


def _missing_trackers(recipe: Recipe) -> list[str]:
    """One line per tracker in trainer.report_to whose package is not installed, naming the extra."""
    report_to = recipe.config["trainer"]["report_to"]
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    where = recipe.origins.get("trainer.report_to", "the recipe")
    return [
        f"trainer.report_to={name} in {where} needs the {module} package, which is not installed: "
        f"{install_extra(extra)}, or set trainer.report_to=none."
        for name in names
        if name in TRACKERS
        for module, extra in [TRACKERS[name]]
        if importlib.util.find_spec(module) is None
    ]


def check_combinations(recipe: Recipe) -> None:
    """Raise RecipeError for settings that cannot work together, whatever the machine."""
    t, where = recipe.config["trainer"], recipe.origins
    errors = []
    num_generations = t["num_generations"]
    batch, steps_per_generation = generation_schedule(t)
    if batch % num_generations:
        errors.append(
            f"trainer: the generation batch ({batch} completions = per_device_train_batch_size "
            f"{t['per_device_train_batch_size']} x {world_size()} processes x steps_per_generation "
            f"{steps_per_generation}) is not divisible by trainer.num_generations ({num_generations}) "
            f"(set in {where.get('trainer.num_generations', where.get('trainer', 'the recipe'))}). "
            f"Make per_device_train_batch_size a multiple of {num_generations}, or change num_generations."
        )
    # A GRPO generation batch lives only in memory and serves steps_per_generation x num_iterations micro-steps.
    # The trainer's micro-step counter restarts at 0 on resume, so a checkpoint inside that cycle would resume
    # with a fresh generation where the saved run would have reused its buffered one.
    cycle = steps_per_generation * t["num_iterations"]
    accumulation = t["gradient_accumulation_steps"]
    every = recipe.config["checkpoint"]["every_steps"]
    if (every * accumulation) % cycle:
        step = cycle // math.gcd(cycle, accumulation)
        errors.append(
            f"checkpoint.every_steps ({every}) in {where.get('checkpoint.every_steps', 'the defaults')} cuts a GRPO "
            f"generation cycle in half: one generation batch serves {cycle} micro-steps (steps_per_generation "
            f"{steps_per_generation} x num_iterations {t['num_iterations']}) = {cycle / accumulation:g} "
            f"optimizer steps, and a resumed run would not see the batch the saved one had. Use a multiple of "
            f"{step}, e.g. {max(step, every - every % step)}."
        )
    from recipes.builtin import BUILTIN_PREFIX, BUILTINS

    name = recipe.config["model"]["name_or_path"]
    if name.startswith(BUILTIN_PREFIX) and name.removeprefix(BUILTIN_PREFIX) not in BUILTINS:
        names = [BUILTIN_PREFIX + n for n in BUILTINS]
        errors.append(
            f"model.name_or_path: unknown built-in model {name!r} (in "
            f"{where.get('model.name_or_path', 'the recipe')}).{did_you_mean(name, names)} Available: "
            f"{', '.join(names)}."
        )
    if recipe.config["model"]["quantization"] != "none" and importlib.util.find_spec("bitsandbytes") is None:
        errors.append(
            f"model.quantization={recipe.config['model']['quantization']} needs bitsandbytes, which is not "
            "installed. pip install bitsandbytes, or set model.quantization=none."
        )
    from recipes.merge_rules import lora_dropout_active

    lora = recipe.config["lora"]
    if lora["merged_generation"] is True and lora_dropout_active(recipe.config):
        errors.append(
            f"lora.dropout={lora['dropout']} in {where.get('lora.dropout', 'the recipe')} with "
            "lora.merged_generation=true: TRL generates in train mode, so the adapter's dropout is part of the "
            "sampling policy, and merged weights cannot drop it. Set lora.merged_generation=false (keep the "
            "dropout), lora.dropout=0, or trainer.disable_dropout=true."
        )
    from recipes.compiled_generation import compile_refusal

    errors += [refusal] if (refusal := compile_refusal(recipe.config)) else []
    errors += _unearnable_formats(recipe) + _missing_trackers(recipe) + _unranked_checkpoints(recipe)
    errors += _other_completion_lengths(recipe)
    from recipes.tasks.heldout import trained_split_refusals

    errors += trained_split_refusals(recipe.config, where)
    if errors:
        raise RecipeError("\n".join(errors))


def _unranked_checkpoints(recipe: Recipe) -> list[str]:
    """Held-out evaluations must fall on every checkpoint's step, or the `best` pointer could not rank them; and
    early stopping needs them at all."""
    heldout, every = recipe.config["heldout"], recipe.config["checkpoint"]["every_steps"]
    stops = [
        f"heldout.{key}={str(heldout[key]).lower()}" for key in ("patience", "stop_on_alarm") if heldout[key]
    ]
    if not heldout["enabled"] and stops:
        where = recipe.origins.get("heldout.enabled", "the recipe")
        keys = " and ".join(s.split("=")[0] for s in stops)
        return [
            (
                f"{' and '.join(stops)} {'stop' if len(stops) > 1 else 'stops'} the run on what held-out "
                "evaluations see, but heldout.enabled=false "
                f"(in {where}) turns them off, and the alarms with them. Set heldout.enabled=true, or drop {keys}."
            )
        ]
    if not heldout["enabled"] or heldout["every_steps"] is None or every % heldout["every_steps"] == 0:
        return []
    where = recipe.origins.get("heldout.every_steps", "the recipe")
    divisors = [d for d in range(1, every + 1) if every % d == 0]
    return [
        (
            f"heldout.every_steps ({heldout['every_steps']}) in {where} does not divide checkpoint.every_steps "
            f"({every}): checkpoints saved between evaluations would have no held-out accuracy to rank them by. "
            f"Use a divisor of {every} (e.g. {max(d for d in divisors if d <= heldout['every_steps'])}) or "
            "null (evaluate at every checkpoint)."
        )
    ]


def _unearnable_formats(recipe: Recipe) -> list[str]:
    """A format reward whose layout the system prompt never asks for cannot be earned: the model is never told."""
    from recipes.recipe import reward_defaults
    from rewards import build_rewards, reward_name
    from rewards._layout import STYLE_MARKERS

    prompt = recipe.config["data"]["system_prompt"]
    funcs, _ = build_rewards(recipe.config["rewards"], defaults=reward_defaults(recipe.config))
    errors = []
    for index, func in enumerate(funcs):
        marker = STYLE_MARKERS.get(getattr(func, "style", None))
        if marker and marker not in prompt:
            others = [f"style: {s}" for s, m in STYLE_MARKERS.items() if m in prompt]
            errors.append(
                f"rewards[{index}] ({reward_name(func)}) pays for the {func.style} layout, but data.system_prompt "
                f"never mentions {marker!r}, so the model is never asked for it and the reward cannot be earned. "
                f"Ask for it in data.system_prompt{', or set ' + others[0] if others else ''}."
            )
    return errors


def _gpu_need(recipe: Recipe) -> str:
    """``, planned peak N GB of GPU memory`` for a model whose shape ships with the planner, else ""."""
    from recipes.planner.memory import GIB, plan_memory
    from recipes.planner.shapes import SHAPES, config_for

    name = recipe.config["model"]["name_or_path"]
    if name not in SHAPES:
        return ""
    plan = plan_memory(recipe.config, model_config=config_for(name))
    return f", planned peak {plan.peak(80 * 10**9, merged=False) / GIB:.1f} GB of GPU memory, see --plan"


def _other_completion_lengths(recipe: Recipe) -> list[str]:
    """A reward given another max_completion_length than the trainer's: completions stop at the trainer's, so an
    overlong penalty (soft_overlong) or a truncation count keyed to another length misjudges every completion."""
    cap = recipe.config["trainer"]["max_completion_length"]
    return [
        f"rewards[{i}] ({spec.get('name') or spec.get('path')}) sets max_completion_length="
        f"{spec['max_completion_length']}, but completions stop at trainer.max_completion_length={cap}: remove it "
        "from the reward (the recipe gives it the trainer's), or change trainer.max_completion_length."
        for i, spec in enumerate(recipe.config["rewards"])
        if "max_completion_length" in spec and spec["max_completion_length"] != cap
    ]


def check_machine(recipe: Recipe, cuda_available: bool) -> None:
    """Raise RecipeError, before any download, when the recipe needs a GPU this machine lacks."""
    m, t = recipe.config["model"], recipe.config["trainer"]
    errors = []
    if not cuda_available:
        gpu_only = [f"model.dtype={m['dtype']}"] if m["dtype"] in ("bfloat16", "float16") else []
        gpu_only += [f"trainer.{key}=true" for key in ("bf16", "fp16") if t[key]]
        if gpu_only:
            # Only a built-in model is small enough to suggest running this very recipe in float32 on a CPU.
            fix = (
                "set model.dtype=float32 trainer.bf16=false to run it here, or "
                if m["name_or_path"].startswith("builtin:")
                else ""
            )
            errors.append(
                f"{recipe.name} needs a GPU and this machine has none: {' and '.join(gpu_only)} need{'s' if len(gpu_only) == 1 else ''} one "
                f"({m['name_or_path']}{_gpu_need(recipe)}). Run it on a GPU; on this CPU, {fix}try the offline "
                "default, which learns in minutes: accelerate launch -q recipes/run.py arith_tiny"
            )
        if t["use_vllm"]:
            errors.append(
                "trainer.use_vllm=true needs a CUDA GPU; set trainer.use_vllm=false on this machine."
            )
    if errors:
        raise RecipeError("\n".join(errors))


def check_environment(recipe: Recipe, model_config, cuda_available: bool) -> None:
    """Raise RecipeError for settings this machine or this model cannot run."""
    check_machine(recipe, cuda_available)
    m, t = recipe.config["model"], recipe.config["trainer"]
    errors = []
    if t["use_vllm"] and importlib.util.find_spec("vllm") is None:
        errors.append(f"trainer.use_vllm=true but vLLM is not installed: {install_extra('vllm')}.")
    context = getattr(model_config, "max_position_embeddings", None)
    prompt = recipe.config["data"]["max_prompt_tokens"]
    completion = t["max_completion_length"]
    if context and prompt and prompt + completion > context:
        errors.append(
            f"data.max_prompt_tokens ({prompt}) + trainer.max_completion_length ({completion}) = "
            f"{prompt + completion} tokens, but {m['name_or_path']} holds at most {context}. Lower one of them."
        )
    errors += unknown_trackers(recipe)
    # The layers the planner knows: check the LoRA targets against them.
    if getattr(model_config, "model_type", None) in SUPPORTED_MODEL_TYPES:
        try:
            lora_targets(shape_of(model_config), recipe.config["lora"]["target_modules"])
        except RecipeError as e:
            errors.append(str(e))
    if errors:
        raise RecipeError("\n".join(errors))


def check_prompts_fit(recipe: Recipe, model_config, tokenizer, dataset) -> None:
    """Refuse training prompts the model cannot hold with a completion, when data.max_prompt_tokens is null (with it
    set, longer prompts are dropped, and check_environment bounds the sum): TRL does not truncate prompts, and a
    longer one runs past the positions the model was trained on, without a word."""
    context = getattr(model_config, "max_position_embeddings", None)
    if not context or recipe.config["data"]["max_prompt_tokens"] or len(dataset) == 0:
        return
    room = context - recipe.config["trainer"]["max_completion_length"]
    from recipes.data import prompt_lengths  # datasets and the tokenizer: only a training run gets here

    lengths = prompt_lengths(tokenizer, dataset["prompt"])
    if (longest := max(lengths)) <= room:
        return
    over = sum(n > room for n in lengths)
    raise RecipeError(
        f"{over} of {len(lengths)} training prompts are longer than {recipe.config['model']['name_or_path']} holds "
        f"beside trainer.max_completion_length ({context} - {context - room} = {room} tokens); the longest, "
        f"{dataset['id'][lengths.index(longest)]}, has {longest}. Set data.max_prompt_tokens={room} (or less) to "
        "drop them, or lower trainer.max_completion_length."
        if room > 0
        else f"trainer.max_completion_length ({context - room}) leaves no room for a prompt in "
        f"{recipe.config['model']['name_or_path']}'s {context} tokens: lower it."
    )
