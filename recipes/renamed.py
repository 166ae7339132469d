"""GRPOConfig fields kept only as old names of newer ones, and the recipes written before they were left out.

transformers reads ``gradient_checkpointing`` only when ``activation_checkpointing`` is unset, and the base recipe
sets it, so the old name would be ignored without a word: a recipe must use the new name, and a resolved recipe
shows only that one. A ``recipe.yaml`` written by an earlier version holds both, the old one at GRPOConfig's
default: it still loads as a recipe, and its run still continues.
"""

from __future__ import annotations

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
