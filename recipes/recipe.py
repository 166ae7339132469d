"""Recipe loading: YAML files composed with ``base:``, dotted command-line overrides, full validation.

    python recipes/run.py gsm8k_llama --print     # shows what this module resolves

Order of precedence: base, recipe, command line. Mappings deep-merge (the later one wins); lists are replaced
whole. Every key is checked, and every error names where the bad value was written.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from callbacks.errors import CheckpointError
from callbacks.settings import CheckpointSettings
from common.errors import UserError
from common.secrets import credential_problem, redact
from recipes import schema

RECIPE_DIR = Path(__file__).parent


class RecipeError(UserError):
    """A recipe that cannot run: the message says where, what was expected, and how to fix it."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-5`` as a float; YAML 1.1 wants ``1.0e-5`` and PyYAML returns a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$|^[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML with float-friendly rules; syntax errors become RecipeErrors naming ``source``."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise RecipeError(f"{source}: not valid YAML: {e}") from None


@dataclass
class Recipe:
    """A resolved, validated recipe."""

    name: str
    path: Path
    config: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict, repr=False)

    def to_yaml(self) -> str:
        """The fully resolved recipe as YAML (what `run.py` writes to ``output_dir/recipe.yaml``)."""
        return yaml.safe_dump(self.config, sort_keys=False, width=110)


def available() -> dict[str, str]:
    """Runnable recipes (``recipes/*.yaml`` without a leading underscore) and their one-line descriptions."""
    found = {}
    for path in sorted(RECIPE_DIR.glob("*.yaml")):
        if not path.name.startswith("_"):
            first = path.read_text().splitlines()[0] if path.stat().st_size else ""
            found[path.stem] = first.lstrip("# ").strip()
    return found


def _suggest(word: str, options, prefix: str = "") -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean {prefix}{close[0]}?" if close else ""


def find_recipe(name_or_path: str) -> Path:
    """A recipe name (``gsm8k_llama``) or a path to a YAML file -> the file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if path.is_dir():
            raise RecipeError(f"{path} is a folder; a recipe is a .yaml file or a name (see run.py --list).")
        if not path.is_file():
            raise RecipeError(f"Recipe file {path} does not exist.")
        return path
    path = RECIPE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        names = available()
        raise RecipeError(
            f"Unknown recipe {name_or_path!r}.{_suggest(name_or_path, names)} Available: {', '.join(names)}"
        )
    return path


def _read_layers(path: Path, seen: tuple = ()) -> list[tuple[str, dict]]:
    """The recipe file and its ``base:`` chain, base first, as (source, mapping) pairs."""
    if path.resolve() in seen:
        raise RecipeError(f"{path}: base: chain loops back to itself ({' -> '.join(map(str, seen))}).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise RecipeError(
            f"{path} line {line} is not UTF-8 text ({e.reason}); save the file as UTF-8."
        ) from None
    data = parse_yaml(text, str(path)) or {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of sections, got {type(data).__name__}.")
    base = data.pop("base", None)
    if base is None:
        return [(str(path), data)]
    base_path = path.parent / f"{base}.yaml" if not str(base).endswith(".yaml") else path.parent / base
    if not base_path.is_file():
        raise RecipeError(f"{path}: base: {base!r} not found (looked for {base_path}).")
    return _read_layers(base_path, seen + (path.resolve(),)) + [(str(path), data)]


def _nested(key: str, value: Any) -> dict:
    """``("trainer.max_steps", 4)`` -> ``{"trainer": {"max_steps": 4}}``; a malformed key is a RecipeError."""
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise RecipeError(
            f"Malformed recipe value key {key!r}: expected section.key, e.g. trainer.max_steps."
        )
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def parse_override(text: str) -> dict:
    """``trainer.learning_rate=1e-5`` -> ``{"trainer": {"learning_rate": 1e-5}}`` (the value parsed as YAML)."""
    key, sep, value = text.partition("=")
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise RecipeError(
            f"Malformed override {redact(text)!r}: expected section.key=value, e.g. trainer.learning_rate=1e-5."
        )
    return _nested(key, parse_yaml(value, f"override {redact(text)!r}") if value.strip() else None)


def _merge(into: dict, layer: dict, source: str, origins: dict, prefix: str = "") -> None:
    for key, value in layer.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, source, origins, path + ".")
        else:
            into[key] = value
            origins[path] = source


def _credentials(config: dict, origins: dict, prefix: str = "") -> list[str]:
    """Refuse every string value holding a URI with credentials: the recipe is saved with each checkpoint."""
    problems = []
    for key, value in config.items() if isinstance(config, dict) else enumerate(config):
        path = f"{prefix}{key}" if isinstance(config, dict) else f"{prefix.rstrip('.')}[{key}]"
        if isinstance(value, (dict, list)):
            problems += _credentials(value, origins, f"{path}.")
        elif problem := credential_problem(path, value):
            source = origins.get(path) or origins.get(path.split(".")[0].split("[")[0], "the recipe")
            problems.append(f"{problem} (set in {source})")
    return problems


def _annotation_types(annotation) -> tuple | None:
    """Base types a GRPOConfig field accepts, or None when the annotation is too exotic to check."""
    if annotation is type(None):
        return (None,)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return (str,)
    if isinstance(annotation, type):
        return (annotation,)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_annotation_types(a) for a in typing.get_args(annotation)]
        return None if any(p is None for p in parts) else tuple(t for p in parts for t in p)
    if origin in (dict, list, tuple):
        return (origin if origin is not tuple else list,)
    return None


def trainer_fields() -> dict[str, tuple | None]:
    """GRPOConfig's fields and the base types each accepts."""
    from trl import GRPOConfig

    return {f.name: _annotation_types(f.type) for f in dataclasses.fields(GRPOConfig) if f.init}


def _check_section(name: str, section: Any, origins: dict, errors: list[str]) -> None:
    where = origins.get(name, "the recipe")
    if not isinstance(section, dict):
        errors.append(f"{where}: section {name} must be a mapping, got {type(section).__name__}.")
        return
    if name == "trainer":
        specs = {k: schema.Key(t, None, "") for k, t in trainer_fields().items()}
    else:
        specs = schema.SECTIONS[name]
    for key, value in section.items():
        where = origins.get(f"{name}.{key}", origins.get(name, "the recipe"))
        if key not in specs:
            errors.append(f"Unknown key {name}.{key} in {where}.{_suggest(key, specs, prefix=name + '.')}")
            continue
        spec = specs[key]
        if spec.types is not None and not schema.type_ok(value, spec.types):
            errors.append(f"{name}.{key} in {where} must be {schema.type_name(spec.types)}, got {value!r}.")
        elif spec.choices and value not in spec.choices:
            errors.append(
                f"{name}.{key} in {where} must be one of {', '.join(spec.choices)}, got {value!r}."
                f"{_suggest(str(value), spec.choices)}"
            )
        elif (rule := schema.RANGES.get(f"{name}.{key}")) and not rule[0](value):
            errors.append(f"{name}.{key} in {where} must be {rule[1]}, got {value!r}.")
    for key, spec in specs.items():
        if spec.default is schema.REQUIRED and key not in section:
            errors.append(f"Missing required key {name}.{key} in {origins.get(name, 'the recipe')}.")


def trainer_defaults() -> dict[str, Any]:
    """Every ``trl.GRPOConfig`` field with its default: what a recipe's ``trainer:`` section is resolved over."""
    from trl import GRPOConfig

    return {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(GRPOConfig)
        if f.init
    }


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
    """Build the rewards and callbacks once to validate them; returns the reward weights."""
    from callbacks import build_callbacks
    from rewards import build_rewards

    weights: list[float] = []
    for name in schema.LIST_SECTIONS:
        specs = config.get(name)
        where = origins.get(name, "the recipe")
        if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
            errors.append(f"{name} in {where} must be a list of mappings, got {specs!r}.")
            continue
        try:
            if name == "rewards":
                weights = build_rewards(specs, defaults=reward_defaults(config))[1]
            else:
                build_callbacks(specs)
        except UserError as e:
            errors.append(f"{name} in {where}: {e}")
    return weights


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
    path = find_recipe(name_or_path)
    layers = _read_layers(path) + [
        (f"command-line override {redact(o)!r}", parse_override(o)) for o in overrides
    ]
    layers += [(f"value {redact(f'{k}={v!r}')}", _nested(k, v)) for k, v in (values or {}).items()]
    config: dict[str, Any] = {section: schema.defaults(section) for section in schema.SECTIONS}
    config.update({"rewards": [], "callbacks": [], "trainer": {}})
    origins: dict[str, str] = {}
    errors: list[str] = []
    for source, layer in layers:
        for section in layer:
            origins.setdefault(section, source)
            if section not in schema.TOP_LEVEL:
                errors.append(f"Unknown section {section} in {source}.{_suggest(section, schema.TOP_LEVEL)}")
        _merge(config, {k: v for k, v in layer.items() if k in schema.TOP_LEVEL}, source, origins)
    for section in (*schema.SECTIONS, "trainer"):
        _check_section(section, config[section], origins, errors)
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
        # Rewards read the trainer's resolved values (max_completion_length): resolve a provisional copy first.
        config["trainer"] = _resolve_trainer(config, path.stem, [])
        weights = _check_lists(config, origins, errors)
        config["trainer"]["reward_weights"] = weights
    if errors:
        raise RecipeError("\n".join(errors))
    for section, keys in schema.SECTIONS.items():  # schema order, so printed recipes read like the reference
        config[section] = {key: config[section][key] for key in keys if key in config[section]}
    recipe = Recipe(name=path.stem, path=path, config=config, origins=origins)
    from recipes.checks import check_combinations

    check_combinations(recipe)
    return recipe
