"""What a run refuses at its start that ``run.py --print`` and ``--plan`` refuse too, with the same messages.

A run meets these only once the model's config is fetched or the checkpoint store opened: tracker names in
trainer.report_to (``recipes.checks.check_environment``), and checkpoint.uri and checkpoint.resume
(``callbacks.checkpoint_sync.prepare_checkpointing``). Here they are checked without a model, a write or the
network, so a recipe --print passes is not one the run then refuses for them.
"""

from __future__ import annotations

from recipes.checks import unknown_trackers
from recipes.recipe import Recipe, RecipeError


def check_start(recipe: Recipe) -> None:
    """Raise RecipeError, one line per problem, for what the run would refuse at its start (see the module)."""
    from callbacks.checkpoint_sync import offline_refusals

    errors = unknown_trackers(recipe) + offline_refusals(recipe.config["checkpoint"])
    if errors:
        raise RecipeError("\n".join(errors))
