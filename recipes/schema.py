"""What a recipe may contain: every section's keys, their types and defaults, with a line of help each.

The `trainer:` section is not listed here: its keys are the fields of `trl.GRPOConfig` (recipes/trainer_section.py),
checked against that dataclass so a new TRL release needs no change here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from callbacks.settings import SETTING_FIELDS
from recipes.tasks import TASKS

# (expected types, default, help). `None` in the types tuple means the key may be null.
REQUIRED = object()


@dataclass(frozen=True)
class Key:
    types: tuple
    default: Any
    help: str
    choices: tuple | None = None


SECTIONS: dict[str, dict[str, Key]] = {
    "model": {
        "name_or_path": Key((str,), REQUIRED, "Hub id, local folder, or builtin:tiny-llama"),
        "revision": Key((str, None), None, "Hub revision (branch, tag or commit) to pin"),
        "dtype": Key(
            (str,), "bfloat16", "dtype the base weights load in", ("bfloat16", "float16", "float32", "auto")
        ),
        "quantization": Key(
            (str,), "none", "bitsandbytes quantization of the base", ("none", "4bit", "8bit")
        ),
        "attn_implementation": Key((str, None), "sdpa", "eager | sdpa | flash_attention_2 | ..."),
        "trust_remote_code": Key((bool,), False, "run modelling code shipped with the checkpoint"),
        "compiled_generation": Key(
            (bool,),
            False,
            "decode with a static KV cache and a torch.compile'd step, CUDA graphs on a GPU "
            "(recipes/compiled_generation.py); not with bitsandbytes, vLLM, FSDP or ZeRO-3",
        ),
    },
    "lora": {
        "r": Key((int,), 16, "adapter rank"),
        "alpha": Key((int, float), 32, "LoRA scaling numerator (scale = alpha / r)"),
        "dropout": Key((int, float), 0.0, "dropout on the adapter input (also active while TRL generates)"),
        "target_modules": Key((str, list), "all-linear", "'all-linear' or a list of module names"),
        "merged_generation": Key(
            (bool, str),
            "auto",
            "generate with the adapter merged into copies of the weights (recipes/merged_lora.py); auto: "
            "when LoRA dropout is off, the engine keeps weights whole, and the GPU has room",
            ("auto", True, False),
        ),
    },
    "data": {
        "task": Key(
            (str,), "gsm8k", "what the questions are (recipes/tasks): " + ", ".join(TASKS), tuple(TASKS)
        ),
        "source": Key((str,), "openai/gsm8k", "Hub dataset id, or a local .jsonl/.parquet file or folder"),
        "config": Key((str, None), "main", "Hub dataset config name (of data.source)"),
        "eval_source": Key(
            (str, None), None, "where evaluation reads its questions, like data.source; null: data.source"
        ),
        "split": Key((str,), "train", "split to train on"),
        "system_prompt": Key((str,), REQUIRED, "system message that opens every prompt"),
        "limit": Key((int, None), None, "keep only the first N training rows (after the held-out carve)"),
        "max_prompt_tokens": Key((int, None), None, "drop prompts longer than this many tokens"),
    },
    # Held-out evaluation during training (callbacks/heldout.py): accuracy on questions the run never trains on
    # nor is finally evaluated on, the best checkpoint, and the alarm. Shipped recipes turn it on.
    "heldout": {
        "enabled": Key((bool,), False, "evaluate held-out questions during training"),
        "questions": Key((int,), 100, "questions drawn (by seed) from the held-out split"),
        "samples": Key((int,), 2, "completions per question, sampled like training"),
        "every_steps": Key(
            (int, None), None, "evaluate every N steps and at the end; null: checkpoint.every_steps"
        ),
        "split": Key((str,), "heldout", "split the questions come from (carved from the training split)"),
        "seed": Key((int,), 0, "seeds the question draw and the sampling (the same every evaluation)"),
        "batch_size": Key((int,), 64, "completions per generate call"),
        "stop_on_alarm": Key((bool,), False, "end the run (saving a checkpoint first) when an alarm fires"),
        "patience": Key((int, None), None, "end the run after N evaluations without a new best; null: never"),
        "alarm_alpha": Key(
            (int, float), 0.01, "paired tests flag a held-out fall or unparseable rise at p < this"
        ),
        "length_collapse": Key(
            (int, float), 0.5, "flag completion length below this share of its early level"
        ),
        "cap_share": Key(
            (int, float), 0.9, "flag when this share of completions is clipped at the length cap"
        ),
        "kl_spike": Key((int, float), 10.0, "flag KL above this many times its earlier median"),
    },
    # Keys, defaults and rules live with the code that uses them (callbacks.settings.CheckpointSettings).
    "checkpoint": {
        name: Key(f.metadata["types"], f.default, f.metadata["help"]) for name, f in SETTING_FIELDS.items()
    },
}


def _at_least(low: int):
    return lambda v: v is None or v >= low


# What peft, transformers and other tools call a key or a value, for "did you mean": spelling alone finds no
# likeness between lora.rank and lora.r, or fp32 and float32.
KEY_ALIASES = {
    "lora.rank": "r",
    "lora.lora_r": "r",
    "lora.lora_alpha": "alpha",
    "lora.lora_dropout": "dropout",
    "model.torch_dtype": "dtype",
    "model.model_name_or_path": "name_or_path",
    "data.dataset_name": "source",
}
VALUE_ALIASES = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "float": "float32",
}


# Ranges checked at load, after the types: values outside them pass TRL's and peft's own checks and then fail
# late (after recipe.yaml is written), or silently do something else (max_steps=0 still trains a step).
RANGES: dict[str, tuple[Any, str]] = {
    "lora.r": (_at_least(1), "at least 1 (the adapter's rank; 8-64 is usual)"),
    "lora.alpha": (lambda v: math.isfinite(v) and v > 0, "a positive number (usually 2 x lora.r)"),
    "lora.dropout": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "data.limit": (_at_least(1), "null or at least 1"),
    "data.max_prompt_tokens": (_at_least(1), "null or at least 1"),
    "trainer.max_steps": (lambda v: v >= 1 or v == -1, "at least 1 (or -1: train for num_train_epochs)"),
    "trainer.num_generations": (
        _at_least(2),
        "at least 2: GRPO compares completions of one prompt, and a group of one has no advantage",
    ),
    "trainer.learning_rate": (lambda v: math.isfinite(v) and v > 0, "a finite number above 0, e.g. 1e-5"),
    "trainer.per_device_train_batch_size": (_at_least(1), "at least 1"),
    "trainer.gradient_accumulation_steps": (_at_least(1), "at least 1"),
    "trainer.max_completion_length": (_at_least(1), "at least 1"),
    "trainer.num_iterations": (_at_least(1), "at least 1"),
    # 0 is not "no timeout" to torch: refused at load rather than silently replaced by the default.
    "trainer.ddp_timeout": (_at_least(1), "at least 1 (seconds a process waits for the others, e.g. 1800)"),
    "heldout.questions": (_at_least(1), "at least 1"),
    "heldout.samples": (_at_least(1), "at least 1"),
    "heldout.every_steps": (_at_least(1), "null or at least 1"),
    "heldout.batch_size": (_at_least(1), "at least 1"),
    "heldout.patience": (_at_least(1), "null or at least 1 (evaluations without a new best)"),
    "heldout.alarm_alpha": (lambda v: 0 < v < 1, "in (0, 1), e.g. 0.01"),
    "heldout.length_collapse": (lambda v: 0 < v < 1, "in (0, 1), e.g. 0.5"),
    "heldout.cap_share": (lambda v: 0 < v <= 1, "in (0, 1], e.g. 0.9"),
    "heldout.kl_spike": (lambda v: v > 1, "above 1, e.g. 10"),
    "trainer.temperature": (
        lambda v: math.isfinite(v) and v > 0,
        "a finite number above 0 (1.0 samples as is)",
    ),
    # Else refused only by the held-out evaluation's decoding, after the data loads, naming evaluate.py's --top-p.
    "trainer.top_p": (lambda v: 0 < v <= 1, "above 0 and at most 1 (1.0 keeps every token)"),
    # Else transformers' traceback when the trainer is built (warmup, logging), or trained on silently (the rest).
    "trainer.warmup_steps": (
        lambda v: 0 <= v < 1 or math.isfinite(v) and v == int(v) and v > 0,
        "a whole number of steps, at least 0, or a number below 1: a share of the run's steps",
    ),
    "trainer.logging_steps": (
        lambda v: 0 < v < 1 or math.isfinite(v) and v == int(v) and v > 0,
        "a whole number of steps, at least 1, or a number below 1: a share of the run's steps",
    ),
    "trainer.epsilon": (
        lambda v: math.isfinite(v) and v > 0,
        "a finite number above 0: the clipping range, e.g. 0.2",
    ),
    "trainer.epsilon_high": (
        lambda v: v is None or math.isfinite(v) and v > 0,
        "null (= trainer.epsilon) or a finite number above 0, e.g. 0.28",
    ),
    "trainer.beta": (
        lambda v: math.isfinite(v) and v >= 0,
        "a finite number, at least 0: the KL penalty's weight (0.0 loads no reference model)",
    ),
    "trainer.max_grad_norm": (
        lambda v: v is None or math.isfinite(v) and v >= 0,
        "at least 0 (0 turns gradient clipping off), e.g. 1.0",
    ),
    "trainer.weight_decay": (lambda v: math.isfinite(v) and v >= 0, "a finite number, at least 0"),
    "trainer.adam_beta1": (lambda v: 0 <= v < 1, "in [0, 1), e.g. 0.9"),
    "trainer.adam_beta2": (lambda v: 0 <= v < 1, "in [0, 1), e.g. 0.999"),
    "trainer.adam_epsilon": (lambda v: math.isfinite(v) and v > 0, "a finite number above 0, e.g. 1e-8"),
    "trainer.num_train_epochs": (lambda v: math.isfinite(v) and v > 0, "a finite number above 0"),
}
# Sections that are lists of {name|path: ..., params} specs, validated by their registries.
LIST_SECTIONS = ("rewards", "callbacks")

TOP_LEVEL = ("base", "model", "lora", "data", "rewards", "callbacks", "heldout", "checkpoint", "trainer")


def type_name(types: tuple) -> str:
    """Human name of a tuple of accepted types, e.g. ``int or null``."""
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true/false",
        list: "a list",
        dict: "a mapping",
        None: "null",
    }
    return " or ".join(dict.fromkeys(names.get(t, getattr(t, "__name__", str(t))) for t in types))


def quote_hint(key: str, value: Any, types: tuple, on_command_line: bool) -> str:
    """For text that YAML read as another type (``Solve: end with N`` is a mapping, ``0123`` the number 83, ``yes``
    true): how to keep it text; "" where text was not expected or the value is text."""
    if str not in types or isinstance(value, str) or value is None:
        return ""
    kind = {dict: "a mapping (': ' inside a value starts one)", list: "a list", bool: "true/false"}
    write = (
        f"'{key}=\"...\"' (single quotes around the whole override)"
        if on_command_line
        else f'{key.split(".")[-1]}: "..."'
    )
    return f" YAML read it as {kind.get(type(value), 'a number')}: to keep it as text, put it in double quotes, {write}."


def type_ok(value: Any, types: tuple) -> bool:
    """YAML-aware type check: ints pass as floats, bools never pass as numbers."""
    if value is None:
        return None in types
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return any(t is not None and isinstance(value, t) for t in types)


def defaults(section: str) -> dict[str, Any]:
    """Default values of a section's optional keys."""
    return {k: spec.default for k, spec in SECTIONS[section].items() if spec.default is not REQUIRED}
