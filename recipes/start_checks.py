"""What a run refuses at its start that ``run.py --print`` and ``--plan`` refuse too, with the same messages.

A run meets these only once the model's config is fetched or the checkpoint store opened: tracker names in
trainer.report_to (``recipes.checks.check_environment``), and checkpoint.uri and checkpoint.resume
(``callbacks.checkpoint_sync.prepare_checkpointing``). Here they are checked without a model, a write or the
network, so a recipe --print passes is not one the run then refuses for them.
"""

from __future__ import annotations

from urllib.parse import urlparse

from callbacks.best import best_run, names_best_pointer
from callbacks.explicit import missing_resume
from callbacks.remote import source_uri
from callbacks.stores import is_remote, open_store, run_prefix_problem, uri_problem
from recipes.checks import unknown_trackers
from recipes.recipe import Recipe, RecipeError


def check_start(recipe: Recipe) -> None:
    """Raise RecipeError, one line per problem, for what the run would refuse at its start (see the module)."""
    errors = unknown_trackers(recipe) + offline_refusals(recipe.config["checkpoint"])
    if errors:
        raise RecipeError("\n".join(errors))


def offline_refusals(checkpoint: dict) -> list[str]:
    """What ``prepare_checkpointing`` would refuse in a ``checkpoint:`` section, found without the network or a write
    (``run.py --print`` and ``--plan`` say them too), with its messages: a malformed ``uri`` or ``resume`` URI, a
    folder ``uri`` under a file or on an unmounted Drive, a ``resume`` path that is not there. An S3 bucket and its
    credentials, a best pointer and what a checkpoint holds need the store read: the run's to find."""
    uri, resume, endpoint = checkpoint["uri"], checkpoint["resume"], checkpoint["endpoint_url"]
    refusals = []
    if uri:
        # Opening a folder store only names it; opening an S3 one would make a client, for the network.
        folder = urlparse(uri).scheme != "s3"
        refusals.append(
            uri_problem(uri, endpoint)
            or run_prefix_problem(uri)
            or (open_store(uri).unusable() if folder else None)
        )
    if resume not in ("latest", "never") and is_remote(resume):
        # The store it is in (callbacks/explicit.py): a best pointer's run, a checkpoint-N's run, or the run.
        base = best_run(resume) if names_best_pointer(resume) else source_uri(resume)[0]
        refusals.append(uri_problem(base, endpoint if resume.startswith("s3://") else None))
    elif resume not in ("latest", "never") and not names_best_pointer(resume):
        refusals.append(missing_resume(resume))
    return [refusal for refusal in refusals if refusal]
