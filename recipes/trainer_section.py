"""The ``trainer:`` section: ``trl.GRPOConfig``'s fields, the types they accept and their defaults, and the old
names of renamed fields.

A recipe's ``trainer:`` keys are GRPOConfig's fields, checked against that dataclass, so a new TRL release needs
no change here. transformers reads ``gradient_checkpointing`` only when ``activation_checkpointing`` is unset, and
the base recipe sets it, so an old name would be ignored without a word: a recipe must use the new name, and a
resolved recipe shows only that one. A ``recipe.yaml`` written by an earlier version holds both, the old one at
GRPOConfig's default: it still loads as a recipe, and its run still continues.
"""

from __future__ import annotations

from typing import Any

from recipes.grpo_fields import grpo_fields

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


def trainer_fields() -> dict[str, tuple | None]:
    """GRPOConfig's fields (not the old names of renamed ones) and the base types each accepts."""
    return {name: f.types for name, f in grpo_fields().items() if name not in RENAMED_TRAINER_KEYS}


def grpo_config_defaults() -> dict[str, Any]:
    """Every ``trl.GRPOConfig`` field with its default, old names of renamed fields too."""
    return {name: f.default for name, f in grpo_fields().items()}


def trainer_defaults() -> dict[str, Any]:
    """What a recipe's ``trainer:`` section is resolved over: GRPOConfig's defaults, a renamed field's under its
    new name (GRPOConfig turns activation checkpointing on through the old one)."""
    return fold_renamed(grpo_config_defaults())
