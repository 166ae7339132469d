"""Where a recipe's values come from: YAML files composed with ``base:``, command-line overrides, Python values.

Order of precedence: base, recipe, command line, values. ``recipes.recipe.load_recipe`` merges the layers
and validates the result; this module only reads them, each with a label that names its source.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from common.errors import UserError
from common.secrets import SECRET_KEY, redact
from common.suggestions import did_you_mean

RECIPE_DIR = Path(__file__).parent


class RecipeError(UserError):
    """A recipe that cannot run: the message says where, what was expected, and how to fix it."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5`` and PyYAML returns a string), and
    refuses a key given twice in one mapping (PyYAML keeps the last one without a word: a second ``trainer:``
    section would silently drop the first)."""

    def flatten_mapping(self, node):
        # Checked once per node, before PyYAML merges its << keys into it (a reused anchor comes back merged).
        checked = self.__dict__.setdefault("_checked", set())
        if id(node) not in checked:
            checked.add(id(node))
            first_line = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in first_line:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {key!r} appears twice in one mapping (first on line {first_line[key]}), and YAML "
                        "keeps only the last: merge the two into one",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        super().flatten_mapping(node)


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


def available() -> dict[str, str]:
    """Runnable recipes (``recipes/*.yaml`` without a leading underscore) and their one-line descriptions."""
    found = {}
    for path in sorted(RECIPE_DIR.glob("*.yaml")):
        if not path.name.startswith("_"):
            first = path.read_text().splitlines()[0] if path.stat().st_size else ""
            found[path.stem] = first.lstrip("# ").strip()
    return found


def _refuse_base(name: str) -> None:
    raise RecipeError(
        f"{name} is a base that recipes build on (base: {name}), not a recipe to run. "
        f"Run one of: {', '.join(available())}."
    )


def find_recipe(name_or_path: str) -> Path:
    """A recipe name (``gsm8k_llama``) or a path to a YAML file -> the file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if path.is_dir():
            raise RecipeError(f"{path} is a folder; a recipe is a .yaml file or a name (see run.py --list).")
        if not path.is_file():
            raise RecipeError(f"Recipe file {path} does not exist.")
        if path.resolve().parent == RECIPE_DIR.resolve() and path.name.startswith("_"):
            _refuse_base(path.stem)  # else its missing keys would be answered "set it there", in our file
        return path
    path = RECIPE_DIR / f"{name_or_path}.yaml"
    if path.is_file() and name_or_path.startswith("_"):
        _refuse_base(name_or_path)
    if not path.is_file():
        names = available()
        raise RecipeError(
            f"Unknown recipe {name_or_path!r}.{did_you_mean(name_or_path, names)} Available: {', '.join(names)}"
        )
    return path


def read_layers(path: Path, seen: tuple = ()) -> list[tuple[str, dict]]:
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
    if not isinstance(base, str) or not base.strip():
        # lm-eval's `include:` takes a list; here a list would be looked up as a file named after the list.
        raise RecipeError(
            f"{path}: base: must be one recipe name or .yaml file, got {base!r}. Bases form a chain, one per "
            "file: to combine two recipes, write one's keys in a file whose base: is the other."
        )
    file = f"{base}.yaml" if not str(base).endswith(".yaml") else str(base)
    # Beside the recipe first, then the shipped recipes: a recipe of your own builds on gsm8k_llama by name.
    candidates = [path.parent / file, RECIPE_DIR / file]
    base_path = next((c for c in candidates if c.is_file()), None)
    if base_path is None:
        raise RecipeError(
            f"{path}: base: {base!r} not found (looked for {' and '.join(map(str, dict.fromkeys(candidates)))})."
            f"{did_you_mean(Path(file).stem, available(), prefix='base: ')}"
        )
    return read_layers(base_path, seen + (path.resolve(),)) + [(str(path), data)]


# What other config systems call composition (lm-eval's include:, OmegaConf's defaults:): here it is base:.
COMPOSITION_WORDS = ("include", "includes", "extends", "inherit", "inherits", "defaults", "import", "imports")


def unknown_section_hint(section: str, sections: tuple) -> str:
    """The fix for an unknown top-level key: base: for a composition word, the closest section for a typo, else
    the sections there are."""
    if str(section).lower() in COMPOSITION_WORDS:
        return " Recipes compose with base: NAME (one recipe name or .yaml file), e.g. base: gsm8k_tiny."
    return did_you_mean(section, sections) or f" Sections: {', '.join(sections)}."


def nested_value(key: str, value: Any) -> dict:
    """``("trainer.max_steps", 4)`` -> ``{"trainer": {"max_steps": 4}}``; a malformed key is a RecipeError."""
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise RecipeError(
            f"Malformed recipe value key {key!r}: expected section.key, e.g. trainer.max_steps."
        )
    if key.split(".")[0] == "base":  # files are composed before overrides apply: a late base would be ignored
        raise RecipeError(
            f"base cannot be overridden ({key}={redact(str(value))!r}): bases are read from the recipe files, "
            "before any override. Run that recipe by name with your overrides, or write a recipe file whose "
            "base: is it."
        )
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def list_section_hint(section: str) -> str:
    """How to change a list section (rewards, callbacks), for an override that reaches into one: it has no keys,
    and an item cannot be set by its index, since lists are replaced whole."""
    from recipes import schema

    if section not in schema.LIST_SECTIONS:
        return ""
    example = {"rewards": "[{name: correctness, weight: 2.0}, {name: format}]"}.get(
        section, "[{name: reward_table, every_steps: 10}]"
    )
    return (
        f" {section} is a list, replaced whole (never item by item): give all of it, e.g. '{section}={example}' "
        "(python recipes/run.py RECIPE --print shows the current one)."
    )


def parse_override(text: str) -> dict:
    """``trainer.learning_rate=1e-5`` -> ``{"trainer": {"learning_rate": 1e-5}}`` (the value parsed as YAML)."""
    key, sep, value = text.partition("=")
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", key):
        raise RecipeError(
            f"Malformed override {redact(text)!r}: expected section.key=value, e.g. trainer.learning_rate=1e-5."
            + list_section_hint(re.split(r"[.\[]", key)[0])
        )
    if SECRET_KEY.search(key):  # kept as text, refused by the recipe check: a YAML error would quote it
        return nested_value(key, value)
    try:
        parsed = parse_yaml(value, f"override {redact(text)!r}") if value.strip() else None
    except RecipeError:
        if sum(map(value.count, "[{")) == sum(map(value.count, "]}")):
            raise
        raise RecipeError(
            f"Override {redact(text)!r}: its brackets do not pair up. The shell splits an override at each space "
            f"unless it is quoted: put the whole override in single quotes, '{key}=...'."
        ) from None
    if value.count("#") > _hashes(parsed):  # ' #' starts a YAML comment: the rest of the value was dropped
        raise RecipeError(
            f"Override {redact(text)!r}: YAML reads ' #' as the start of a comment and would drop the rest of the "
            f"value. Put the value in double quotes to keep it: '{key}=\"{value}\"' (single quotes around the "
            "whole override for the shell)."
        )
    return nested_value(key, parsed)


def _hashes(value: Any) -> int:
    """How many '#' the strings (keys too) of a parsed YAML value hold."""
    if isinstance(value, dict):
        return sum(_hashes(k) + _hashes(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_hashes(v) for v in value)
    return value.count("#") if isinstance(value, str) else 0


def merge_layer(into: dict, layer: dict, source: str, origins: dict, prefix: str = "") -> None:
    """Deep-merge ``layer`` into ``into`` (lists replaced whole), recording ``source`` for each key it sets."""
    for key, value in layer.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge_layer(into[key], value, source, origins, path + ".")
        else:
            into[key] = value
            origins[path] = source
