"""The ``trainer:`` section: ``trl.GRPOConfig``'s fields, the types they accept and their defaults, and the old
names of renamed fields.

A recipe's ``trainer:`` keys are GRPOConfig's fields, checked against that dataclass, so a new TRL release needs
no change here. transformers reads ``gradient_checkpointing`` only when ``activation_checkpointing`` is unset, and
the base recipe sets it, so an old name would be ignored without a word: a recipe must use the new name, and a
resolved recipe shows only that one. A ``recipe.yaml`` written by an earlier version holds both, the old one at
GRPOConfig's default: it still loads as a recipe, and its run still continues.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any

RENAMED_TRAINER_KEYS = {
    "gradient_checkpointing": "activation_checkpointing",
    "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs",
    "use_transformers_paged": "use_transformers_continuous_batching",
    "vllm_importance_sampling_cap": "vllm_importance_sampling_clip_max",
}


def fold_renamed(trainer: dict) -> dict:
    """A ``trainer:`` section with each old name folded into its new one where that is unset, as GRPOConfig does,
    and left out. A TRL release without the old field has nothing to fold.

    >>> fold_renamed({"gradient_checkpointing": True, "activation_checkpointing": None, "beta": 0.0})
    {'activation_checkpointing': True, 'beta': 0.0}
    """
    folded = dict(trainer)
    for old, new in RENAMED_TRAINER_KEYS.items():
        if old in folded:
            value = folded.pop(old)
            if folded.get(new) is None:
                folded[new] = value
    return folded


def drop_written_old_names(layer: dict, old_defaults: dict) -> None:
    """Remove from a recipe file's ``trainer:`` section the old names an earlier version wrote into every resolved
    recipe: beside their new name, at GRPOConfig's default. Any other use of an old name is left to be refused."""
    trainer = layer.get("trainer")
    if not isinstance(trainer, dict):
        return
    for old, new in RENAMED_TRAINER_KEYS.items():
        if old in trainer and new in trainer and old in old_defaults and trainer[old] == old_defaults[old]:
            del trainer[old]


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
    """GRPOConfig's fields (not the old names of renamed ones) and the base types each accepts."""
    from trl import GRPOConfig

    fields = dataclasses.fields(GRPOConfig)
    return {
        f.name: _annotation_types(f.type) for f in fields if f.init and f.name not in RENAMED_TRAINER_KEYS
    }


def grpo_config_defaults() -> dict[str, Any]:
    """Every ``trl.GRPOConfig`` field with its default, old names of renamed fields too."""
    from trl import GRPOConfig

    return {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(GRPOConfig)
        if f.init
    }


def trainer_defaults() -> dict[str, Any]:
    """What a recipe's ``trainer:`` section is resolved over: GRPOConfig's defaults, a renamed field's under its
    new name (GRPOConfig turns activation checkpointing on through the old one)."""
    return fold_renamed(grpo_config_defaults())
