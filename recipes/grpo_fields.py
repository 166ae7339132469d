"""``trl.GRPOConfig``'s fields, with the types each accepts and its default, read without importing TRL where it can be.

Importing GRPOConfig imports transformers' training arguments and through them peft, bitsandbytes and torch's
compiler: 10-15 s on a 2-core machine. A recipe with a typo, and every process an ``accelerate launch`` starts for
it, waited that long to say one line. So the fields are read once per installation and kept as JSON in
``$GRPO_RECIPES_CACHE/grpo-config-fields/``, under a digest of the Python, TRL, transformers, accelerate and torch
versions and of the source files that define the fields: a new release, or an edited editable install, makes a new
file, never a stale read. A cache that cannot be read or written costs only the import.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import json
import sys
import types
import typing
from enum import Enum
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

from recipes.atomic import write_text_atomically
from recipes.builtin import cache_dir

# What GRPOConfig's fields and defaults are made of. transformers picks its default optimizer by torch's version.
VERSIONS = ("trl", "transformers", "accelerate", "torch")
SOURCES = (
    ("trl", "trainer/grpo_config.py"),
    ("trl", "trainer/base_config.py"),
    ("transformers", "training_args.py"),
)
# The types a YAML value can have, by the names the cache stores them under.
PLAIN = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict, "null": None}


class Field(NamedTuple):
    types: tuple | None  # base types a value may have (None for null); None: too exotic to check
    default: Any


class _Named(type):
    """Stands for a class a field accepts that YAML cannot build (accelerate's ParallelismConfig), known by its
    import path: an instance of the real class passes, as it would against the class itself, without the import."""

    def __instancecheck__(cls, value) -> bool:
        return any(f"{k.__module__}.{k.__qualname__}" == cls.path for k in type(value).__mro__)


def _stand_in(path: str) -> type:
    return _Named(path.rsplit(".", 1)[-1], (), {"path": path})


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


def _imported() -> dict[str, Field]:
    from trl import GRPOConfig

    return {
        f.name: Field(
            _annotation_types(f.type),
            f.default if f.default is not dataclasses.MISSING else f.default_factory(),
        )
        for f in dataclasses.fields(GRPOConfig)
        if f.init
    }


def _type_name(t) -> str:
    if t is None:
        return "null"
    return t.__name__ if t in PLAIN.values() else f"{t.__module__}.{t.__qualname__}"


def _encode(fields: dict[str, Field]) -> str | None:
    """The fields as JSON, or None where a default would not come back the same (a tuple, an object)."""
    plain = {
        name: {"types": None if f.types is None else [_type_name(t) for t in f.types], "default": f.default}
        for name, f in fields.items()
    }
    try:
        text = json.dumps(plain, indent=1)
    except (TypeError, ValueError):
        return None
    back = _decode(json.loads(text))
    same = all(repr(back[name].default) == repr(f.default) for name, f in fields.items())
    return text if same else None


def _decode(plain: dict) -> dict[str, Field]:
    return {
        name: Field(
            None
            if f["types"] is None
            else tuple(PLAIN[t] if t in PLAIN else _stand_in(t) for t in f["types"]),
            f["default"],
        )
        for name, f in plain.items()
    }


def _key() -> str:
    """A digest of everything GRPOConfig's fields depend on; found without importing any of it."""
    parts = [sys.version, *(f"{name}=={metadata.version(name)}" for name in VERSIONS)]
    for package, file in SOURCES:
        source = Path(importlib.util.find_spec(package).origin).parent / file
        parts.append(hashlib.sha256(source.read_bytes()).hexdigest())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@cache
def _fields() -> dict[str, Field]:
    path = cache_dir() / "grpo-config-fields" / f"{_key()}.json"
    try:
        return _decode(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # not written yet, or damaged: import and write it again
    fields = _imported()
    text = _encode(fields)
    if text is not None:
        try:
            write_text_atomically(path, text)
        except OSError:
            pass  # a read-only cache folder: the next run imports again, nothing else changes
    return fields


def grpo_fields() -> dict[str, Field]:
    """Every field of ``trl.GRPOConfig`` that its constructor takes (old names of renamed fields too): the types it
    accepts and its default, a fresh copy per call (a default list or mapping can be changed by the caller)."""
    return {name: Field(f.types, copy.deepcopy(f.default)) for name, f in _fields().items()}
