"""What the notebooks in notebooks/ call besides the Python API: Colab secrets, a GPU check, steps that stop Run all.

    from recipes import colab
    from recipes.evaluate import evaluate
    from recipes.recipe import load_recipe
    print(colab.load_credentials("s3://bucket/runs/llama"))        # secrets -> environment, values never shown
    recipe = load_recipe("gsm8k_llama", values={"trainer.output_dir": "/content/outputs/llama"})
    print(colab.check_runtime(recipe, purpose="train"))            # what the recipe needs vs what the GPU has
    result = colab.run_step(evaluate, recipe, "base.jsonl", questions=20)

The notebooks hold no logic of their own: they call ``recipes.run.train``, ``recipes.evaluate.evaluate``,
``stats.compare.compare`` and ``stats.curves.plot_curves`` with values, through ``run_step``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from common.errors import UserError
from common.logs import log_to_stderr

# Colab secret (and environment variable) -> what it is for. AWS_* and HF_TOKEN are read by boto3 and
# huggingface_hub from the environment; S3_ENDPOINT_URL is ours (s3_endpoint).
SECRETS = {
    "AWS_ACCESS_KEY_ID": "S3 checkpoints",
    "AWS_SECRET_ACCESS_KEY": "S3 checkpoints",
    "AWS_DEFAULT_REGION": "S3 checkpoints (optional)",
    "S3_ENDPOINT_URL": "S3-compatible stores: MinIO, R2 (optional)",
    "HF_TOKEN": "gated Hub models such as meta-llama/Llama-3.1-8B-Instruct",
}
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
PLACEHOLDER = "YOUR-BUCKET"  # the notebooks' example bucket: a run must name a real one
DRIVE = Path("/content/drive")
GIB = 2**30


class ColabError(UserError):
    """A notebook step cannot go on; the message says why and what to change."""


def _colab_secret(name: str) -> tuple[str | None, str]:
    """(value, where) of a Colab secret; outside Colab, (None, "not set")."""
    try:
        from google.colab import userdata
    except ImportError:
        return None, "not set"
    try:
        return userdata.get(name), "Colab secret"
    except userdata.SecretNotFoundError:
        return None, "not set"
    except userdata.NotebookAccessError:
        return None, "Colab secret without notebook access (turn it on in the Secrets panel)"


def load_credentials(uri: str | os.PathLike | None = None) -> str:
    """Copy the Colab secrets in :data:`SECRETS` into environment variables; an environment variable already set wins.

    Args:
        uri: The checkpoint location the notebook will use. ``s3://`` makes the AWS key pair required.

    Returns:
        One line per secret: set or not, and where from. Values are never returned or printed.

    Raises:
        ColabError: ``uri`` still names the example bucket, or a required secret is missing.
    """
    if uri is not None and PLACEHOLDER in str(uri):
        raise ColabError(
            f"{uri} is the example location: set the URI in the parameters cell to your bucket "
            "(s3://BUCKET/PREFIX) or a Google Drive folder (/content/drive/MyDrive/...), then Run all again."
        )
    where = {}
    for name in SECRETS:
        if os.environ.get(name):
            where[name] = "set (environment)"
            continue
        value, where[name] = _colab_secret(name)
        if value:
            os.environ[name] = value
            where[name] = "set (Colab secret)"
    required = S3_KEYS if str(uri or "").startswith("s3://") else ()
    missing = [name for name in required if not where[name].startswith("set")]
    if missing:
        raise ColabError(
            f"{uri} needs {' and '.join(missing)}: add them as Colab secrets (the key icon in the left bar, with "
            "notebook access on) or set them as environment variables, then run this cell again."
        )
    width = max(map(len, SECRETS))
    lines = [f"  {name:<{width}}  {where[name]:<20}  {SECRETS[name]}" for name in SECRETS]
    return "\n".join(["Credentials (values are never shown):", *lines])


def s3_endpoint(endpoint_url: str | None = None) -> str | None:
    """The S3 endpoint to use: ``endpoint_url`` if given, else the S3_ENDPOINT_URL secret, else None (AWS)."""
    return endpoint_url or os.environ.get("S3_ENDPOINT_URL") or None


def checkpoint_values(uri: str | None, endpoint_url: str | None = None) -> dict:
    """Recipe values that sync checkpoints to ``uri`` (None: local checkpoints only) through the endpoint.

    With a ``uri``, ``checkpoint.require_upload`` too: a notebook's machine goes away with its disk, so a run whose
    checkpoints stop reaching the store ends at its next save and its cell fails, instead of training on.
    """
    values = {
        "checkpoint.uri": uri,
        "checkpoint.endpoint_url": s3_endpoint(endpoint_url),
        "checkpoint.require_upload": bool(uri),
    }
    return {key: value for key, value in values.items() if value}


def _gb(n: int) -> str:
    return f"{n / GIB:.1f} GB"


def check_runtime(recipe, *, purpose: str = "train") -> str:
    """Compare what a recipe needs with what this runtime has, before any weights download.

    Needs come from the memory planner (``python recipes/run.py RECIPE --plan``): the training peak, or for
    ``purpose="evaluate"`` the weights plus generating one batch.

    Returns:
        What the recipe needs and what the runtime has (no GPU is fine for CPU recipes such as gsm8k_tiny).

    Raises:
        ColabError: No GPU and the recipe needs one, or the GPU is too small; the message says what to change.
    """
    import torch

    from recipes.checks import check_environment
    from recipes.planner.fit import fitting_overrides
    from recipes.planner.memory import plan_memory
    from recipes.planner.on_card import FP16_OVERRIDES, bf16_problem
    from recipes.planner.shapes import load_model_config
    from recipes.recipe import RecipeError

    if purpose not in ("train", "evaluate"):
        raise ValueError(f"purpose must be 'train' or 'evaluate', got {purpose!r}")
    model_config = load_model_config(recipe.config["model"])
    plan = plan_memory(recipe.config, model_config=model_config)
    estimate = f"an estimate: python recipes/run.py {recipe.name} --plan"

    def need(card: int) -> int:
        if purpose == "train":
            return plan.peak(card)
        return plan.overhead + plan.weights + plan.kv_cache + plan.generation_workspace

    if not torch.cuda.is_available():
        on_gpu = f"on a GPU it would need about {_gb(need(80 * GIB))} to {purpose}"
        try:
            check_environment(recipe, model_config, cuda_available=False)
        except RecipeError as e:
            raise ColabError(
                f"This runtime has no GPU, and {recipe.name} needs one ({on_gpu}; {estimate}). In Colab: Runtime > "
                f"Change runtime type > A100 GPU, then Run all again.\n{e}"
            ) from None
        return f"No GPU in this runtime: {recipe.name} runs on the CPU ({on_gpu}). Continuing."
    card = torch.cuda.get_device_properties(0)
    if problem := bf16_problem(recipe, card):
        overrides = ", ".join(f'"{o}"' for o in FP16_OVERRIDES)
        raise ColabError(
            f"{problem}. Add {overrides} to overrides in the parameters cell, or choose an A100 or L4 GPU (Runtime > "
            "Change runtime type)."
        )
    needed = need(card.total_memory)
    has = f"this runtime has {card.name} with {_gb(card.total_memory)}"
    fits = plan.fits(card.total_memory) if purpose == "train" else needed <= card.total_memory
    if not fits:
        refit = (
            fitting_overrides(recipe.config, card.total_memory, model_config=model_config)
            if purpose == "train"
            else None
        )
        # The notebooks take recipe changes in the parameters cell's `overrides` list (their `values` are not the
        # user's to edit), so the fix names that list and the strings to add to it.
        quoted = ", ".join(f'"{o}"' for o in refit or ())
        smaller = (
            f"Add {quoted} to overrides in the parameters cell (they keep the effective batch and the generation "
            "batch), or c"
            if refit
            else "C"
        )
        raise ColabError(
            f"{recipe.name} needs about {_gb(needed)} of GPU memory to {purpose} ({estimate}), but {has}. "
            f"{smaller}hoose a larger GPU (Runtime > Change runtime type)."
        )
    return f"{recipe.name} needs about {_gb(needed)} of GPU memory to {purpose} ({estimate}); {has}. It fits."


def mount_drive(*paths) -> None:
    """Mount Google Drive at /content/drive when one of ``paths`` lies on it (asks for access once per runtime).

    Raises:
        ColabError: A Drive path outside Colab.
    """
    on_drive = [p for p in paths if p is not None and Path(p).is_relative_to(DRIVE)]
    if not on_drive or (DRIVE / "MyDrive").is_dir():
        return
    try:
        from google.colab import drive
    except ImportError:
        raise ColabError(
            f"{on_drive[0]} is on Google Drive, which only Colab mounts; choose a local folder here."
        ) from None
    drive.mount(str(DRIVE))


def prepare_folder(path: str | os.PathLike) -> Path:
    """The folder ``path``, created (and Google Drive mounted first when it lies there)."""
    mount_drive(path)
    folder = Path(path).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_step(step, *args, **kwargs):
    """Run one API call of the project (train, evaluate, compare, plot) and return its result; a user error
    raises ColabError so that Run all stops there, with the message and no traceback of the project's code.

    Args:
        step: e.g. ``recipes.run.train`` or ``recipes.evaluate.evaluate``.
        *args, **kwargs: Its arguments.

    Raises:
        ColabError: The step refused its input or could not go on (its message says why and what to change).
    """
    name = f"{step.__module__}.{step.__name__}"
    print(f"> {name}", flush=True)
    # What the command-line tools log (resuming from, checkpoints synced) shows in the notebook too.
    log_to_stderr(level=None)
    for package in ("recipes", "callbacks", "stats"):
        logging.getLogger(package).setLevel(logging.INFO)
    try:
        return step(*args, **kwargs)
    except UserError as e:
        raise ColabError(f"{name} stopped: {e}") from None
