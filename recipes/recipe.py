"""Recipe loading: the layers of ``recipes.layers`` merged, every key validated, every default resolved.

    python recipes/run.py gsm8k_llama --print     # shows what this module resolves

Order of precedence: base, recipe, command line, values. Mappings deep-merge (the later one wins); lists are
replaced whole. Every key is checked, and every error names where the bad value was written.
"""

from __future__ import annotations

import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from callbacks.errors import CheckpointError
from callbacks.settings import CheckpointSettings
from common.errors import UserError
from common.secrets import SECRET_KEY, credential_problem, redact
from common.suggestions import did_you_mean
from recipes import schema
from recipes.layers import (
    RecipeError,
    available,
    find_recipe,
    list_section_hint,
    merge_layer,
    nested_value,
    parse_override,
    read_layers,
    unknown_section_hint,
)
from recipes.trainer_section import (
    RENAMED_TRAINER_KEYS,
    drop_written_old_names,
    grpo_config_defaults,
    trainer_defaults,
    trainer_fields,
)

__all__ = [
    "Recipe",
    "RecipeError",
    "available",
    "load_recipe",
    "parse_override",
    "trainer_defaults",
    "with_defaults",
]


@dataclass
class Recipe:
    """A resolved, validated recipe."""

    name: str
    path: Path
    config: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict, repr=False)

    def to_yaml(self) -> str:
        """The fully resolved recipe as YAML (what `run.py` writes to ``output_dir/recipe.yaml``)."""
        return yaml.dump(self.config, Dumper=_RecipeDumper, sort_keys=False, width=110)


class _RecipeDumper(yaml.SafeDumper):
    """YAML as a person writes it: a multi-line string (a system prompt) as a ``|`` block, not quoted with escapes."""


_RecipeDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def _credentials(config: dict, origins: dict, prefix: str = "") -> list[str]:
    """Refuse every string value holding a URI with credentials: the recipe is saved with each checkpoint."""
    problems = []
    for key, value in config.items() if isinstance(config, dict) else enumerate(config):
        path = f"{prefix}{key}" if isinstance(config, dict) else f"{prefix.rstrip('.')}[{key}]"
        if isinstance(value, (dict, list)):
            problems += _credentials(value, origins, f"{path}.")
        elif problem := credential_problem(path, value):
            # The nearest key with a recorded origin: a mapping value (model_init_kwargs) records only its key.
            keys = re.split(r"\.|\[", path)
            where = (".".join(keys[:n]) for n in range(len(keys), 0, -1))
            source = next((origins[k] for k in where if k in origins), "the recipe")
            problems.append(f"{problem} (set in {source})")
    return problems


def _other_home(key: str, besides: str | None = None) -> str:
    """' Did you mean SECTION.KEY?' when ``key`` is exactly a key of another section (a key written in the wrong
    section, or with no section at all), else ''."""
    homes = [name for name, specs in schema.SECTIONS.items() if key in specs]
    homes += ["trainer"] if key in trainer_fields() else []
    homes = [name for name in homes if name != besides]
    return f" Did you mean {' or '.join(f'{name}.{key}' for name in homes)}?" if homes else ""


def _check_section(name: str, section: Any, origins: dict, errors: list[str], recipe_file: str) -> None:
    where = origins.get(name, "the recipe")
    if not isinstance(section, dict):
        on_off = isinstance(section, bool) and "enabled" in schema.SECTIONS.get(name, {})  # heldout=false
        fix = f"Write {name}.enabled={str(section).lower()}" if on_off else f"Set its keys: {name}.KEY=VALUE"
        errors.append(f"{where}: section {name} must be a mapping, got {type(section).__name__}. {fix}.")
        return
    if name == "trainer":
        specs = {k: schema.Key(t, None, "") for k, t in trainer_fields().items()}
    else:
        specs = schema.SECTIONS[name]
    for key, value in section.items():
        where = origins.get(f"{name}.{key}", origins.get(name, "the recipe"))
        if key not in specs:
            if name == "trainer" and key in RENAMED_TRAINER_KEYS:
                new = RENAMED_TRAINER_KEYS[key]
                errors.append(
                    f"trainer.{key} in {where} is the old name of trainer.{new}: write {new} instead."
                )
                continue
            alias = schema.KEY_ALIASES.get(f"{name}.{key}")
            hint = (
                f" Did you mean {name}.{alias}?" if alias
                else _other_home(key, name) or did_you_mean(key, specs, prefix=name + ".")
            )  # fmt: skip
            errors.append(f"Unknown key {name}.{key} in {where}.{hint}")
            continue
        if SECRET_KEY.search(f"{name}.{key}") and value is not None:
            continue  # refused by _credentials, without its value
        spec = specs[key]
        wrong_type = spec.types is not None and not schema.type_ok(value, spec.types)
        if wrong_type and not spec.choices:
            errors.append(
                f"{name}.{key} in {where} must be {schema.type_name(spec.types)}, got {value!r}."
                + schema.quote_hint(f"{name}.{key}", value, spec.types, where.startswith("override"))
            )
        # A wrong type is checked apart from membership: 1 == True, so 1 is "in" (auto, True, False).
        elif spec.choices and (wrong_type or value not in spec.choices):
            choices = [str(c).lower() if isinstance(c, bool) else c for c in spec.choices]  # YAML's spelling
            errors.append(
                f"{name}.{key} in {where} must be one of {', '.join(choices)}, got {value!r}."
                + (
                    f" Did you mean {schema.VALUE_ALIASES[value]}?"
                    if isinstance(value, str) and schema.VALUE_ALIASES.get(value) in choices
                    else did_you_mean(value, choices)
                )
            )
        elif (rule := schema.RANGES.get(f"{name}.{key}")) and not rule[0](value):
            errors.append(f"{name}.{key} in {where} must be {rule[1]}, got {value!r}.")
    for key, spec in specs.items():
        if spec.default is schema.REQUIRED and key not in section:
            # The recipe's own file, not where the section began: _base.yaml leaves these keys to each recipe.
            errors.append(f"Missing required key {name}.{key} in {recipe_file} (set it there).")


def with_defaults(config: dict) -> dict:
    """A recipe's nested dict with every default filled in under its values, as ``load_recipe`` resolves it.

    Idempotent, so readers that may get a hand-made partial dict (the memory planner) use it too, and there is
    one place for each default: the schema for our sections, ``trl.GRPOConfig`` for ``trainer:``.
    """
    filled = {name: {**schema.defaults(name), **(config.get(name) or {})} for name in schema.SECTIONS}
    trainer = dict(config.get("trainer") or {})
    filled["trainer"] = {**trainer, **{k: v for k, v in trainer_defaults().items() if k not in trainer}}
    return {**config, **filled}


def reward_defaults(config: dict) -> dict:
    """Values rewards may take from elsewhere in the recipe (so a spec need not repeat them)."""
    return {"max_completion_length": config["trainer"]["max_completion_length"]}


def _check_lists(config: dict, origins: dict, errors: list[str]) -> list[float]:
    """Build the rewards and check the callbacks to validate them; returns the reward weights."""
    from callbacks import check_callbacks
    from rewards import build_rewards

    weights: list[float] = []
    for name in schema.LIST_SECTIONS:
        specs = config.get(name)
        where = origins.get(name, "the recipe")
        if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
            errors.append(
                f"{name} in {where} must be a list of mappings, got {specs!r}.{list_section_hint(name)}"
            )
            continue
        try:
            if name == "rewards":
                weights = build_rewards(specs, defaults=reward_defaults(config))[1]
            else:
                check_callbacks(specs)
        except UserError as e:
            errors.append(f"{name} in {where}: {e}")
    return weights


_RUNNER_KEYS = {
    "save_strategy": "checkpoint.every_steps",
    "save_steps": "checkpoint.every_steps",
    "reward_weights": "rewards[].weight",
}


def _resolve_trainer(config: dict, name: str, reward_weights: list[float]) -> dict:
    """The ``trainer:`` section as GRPOConfig will get it: the recipe's keys, then every default.

    The runner owns three keys: checkpoints are saved every ``checkpoint.every_steps``, and reward weights
    come from ``rewards[].weight``.
    """
    trainer = {
        **config["trainer"],
        "output_dir": config["trainer"].get("output_dir") or os.path.join("outputs", name),
        "save_strategy": "steps",
        "save_steps": config["checkpoint"]["every_steps"],
        "reward_weights": reward_weights,
    }
    return with_defaults({"trainer": trainer})["trainer"]


def _runner_conflicts(given: dict, resolved: dict, origins: dict) -> list[str]:
    """Errors for the runner's own trainer keys set to other values than it derives. The same values pass, so a
    run's recipe.yaml and ``--print``'s output load as recipes."""
    return [
        f"trainer.{key}={given[key]!r} in {origins.get('trainer.' + key)} is set by the runner from the recipe "
        f"({source}, which gives {resolved[key]!r}); set that instead."
        for key, source in _RUNNER_KEYS.items()
        if key in given and given[key] != resolved[key]
    ]


def load_recipe(
    name_or_path: str, overrides: typing.Iterable[str] = (), values: typing.Mapping[str, Any] | None = None
) -> Recipe:
    """Load, compose and validate a recipe.

    Args:
        name_or_path: A recipe name from ``recipes/`` (e.g. ``gsm8k_llama``) or a path to a YAML file.
        overrides: ``section.key=value`` strings (the command line's), applied after the files.
        values: ``{"section.key": value}`` Python values (a notebook's, a script's), applied last, taken as
            they are (no YAML parsing), e.g. ``{"trainer.output_dir": "/content/My Drive/run"}``.

    Returns:
        The validated recipe, every default filled in: the schema's for our sections, ``trl.GRPOConfig``'s
        for ``trainer:`` (so the checks, the planner, evaluation and ``--print`` all read the same numbers).

    Raises:
        RecipeError: Listing every problem found, each naming its file and key.
    """
    if isinstance(overrides, str):  # each character would be read as an override
        raise RecipeError(
            f"overrides must be a list of 'section.key=value' strings, got the string {redact(overrides)!r}: "
            "write a list, e.g. ['trainer.max_steps=8'] (papermill: -y overrides '[trainer.max_steps=8]')."
        )
    path = find_recipe(name_or_path)
    layers = read_layers(path) + [(f"override {redact(o)!r}", parse_override(o)) for o in overrides]
    layers += [(f"value {redact(f'{k}={v!r}')}", nested_value(k, v)) for k, v in (values or {}).items()]
    config: dict[str, Any] = {section: schema.defaults(section) for section in schema.SECTIONS}
    config.update({"rewards": [], "callbacks": [], "trainer": {}})
    origins: dict[str, str] = {}
    errors: list[str] = []
    old_defaults = grpo_config_defaults()
    for source, layer in layers:
        drop_written_old_names(layer, old_defaults)
        for section in layer:
            origins.setdefault(section, source)
            if section not in schema.TOP_LEVEL:
                hint = _other_home(section) or unknown_section_hint(section, schema.TOP_LEVEL)
                errors.append(f"Unknown section {section} in {source}.{hint}")
        merge_layer(config, {k: v for k, v in layer.items() if k in schema.TOP_LEVEL}, source, origins)
    for section in (*schema.SECTIONS, "trainer"):
        _check_section(section, config[section], origins, errors, str(path))
    errors += _credentials(config, origins)
    if not errors:
        try:
            CheckpointSettings(**config["checkpoint"])
        except CheckpointError as e:
            named = [
                origins.get(f"checkpoint.{k}") for k in config["checkpoint"] if f"checkpoint.{k}" in str(e)
            ]
            where = ", ".join(dict.fromkeys(o for o in named if o)) or origins.get("checkpoint", "the recipe")
            errors.append(f"{e} (set in {where})")
    if not errors:
        given = dict(config["trainer"])
        # Rewards read the trainer's resolved values (max_completion_length): resolve a provisional copy first.
        config["trainer"] = _resolve_trainer(config, path.stem, [])
        weights = _check_lists(config, origins, errors)
        config["trainer"]["reward_weights"] = weights
        errors += _runner_conflicts(given, config["trainer"], origins)
    if errors:
        raise RecipeError("\n".join(errors))
    for section, keys in schema.SECTIONS.items():  # schema order, so printed recipes read like the reference
        config[section] = {key: config[section][key] for key in keys if key in config[section]}
    recipe = Recipe(name=path.stem, path=path, config=config, origins=origins)
    from recipes.checks import check_combinations

    check_combinations(recipe)
    return recipe
