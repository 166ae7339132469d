"""Checkpoint manifests and completeness rules.

A manifest lists every file of a checkpoint with its size and SHA-256, plus the step, recipe, run id and library
versions. It is written last, so its presence is the proof that a checkpoint is complete; its hashes (not S3
ETags, which are not checksums for multipart uploads) prove that a copy is intact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import socket
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from callbacks.errors import CheckpointError
from callbacks.heldout_history import HISTORY_NAME, read_history

MANIFEST_NAME = "manifest.json"
FORMAT = "grpo-recipes-checkpoint/1"
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
FULL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_HELDOUT_FIELDS = ("step", "accuracy", "low", "high", "questions", "samples")
_VERSIONED = ("grpo-recipes", "torch", "transformers", "trl", "peft", "accelerate", "deepspeed")
_CHUNK = 8 << 20


def checkpoint_step(name: str) -> int | None:
    """The step of a ``checkpoint-N`` folder name, or None for any other name."""
    match = CHECKPOINT_RE.match(name)
    return int(match.group(1)) if match else None


def weight_problems(files: Iterable[str]) -> list[str]:
    """Why a checkpoint with these relative file names holds no loadable weights (empty list: it does)."""
    names = set(files)
    if any(w in names for w in ADAPTER_WEIGHTS):
        return [] if "adapter_config.json" in names else ["adapter_config.json is missing"]
    if any(w in names for w in FULL_WEIGHTS):
        return []
    return [f"no model weights ({' or '.join(ADAPTER_WEIGHTS)})"]


def training_state_problems(files: Iterable[str], *, world_size: int | None = None) -> list[str]:
    """Why a checkpoint with these relative file names cannot be resumed exactly (empty list: it can).

    Hugging Face's Trainer resumes silently without ``optimizer.pt`` or ``scheduler.pt``, restarting Adam's
    moments and the learning-rate schedule; we refuse such checkpoints instead.

    Args:
        files: Relative POSIX paths of the checkpoint's files.
        world_size: Processes that wrote it, when known (from a manifest): every rank's RNG state must be there.
    """
    names = set(files)
    problems = weight_problems(names)
    deepspeed = "latest" in names and any(re.match(r"global_step\d+/.*optim_states\.pt$", n) for n in names)
    fsdp = any(n.startswith("optimizer_0/") for n in names) or "optimizer.bin" in names
    if not ("optimizer.pt" in names or deepspeed or fsdp):
        problems.append("optimizer.pt is missing (resuming would restart Adam's moments)")
    if "scheduler.pt" not in names and not deepspeed:
        problems.append("scheduler.pt is missing (resuming would restart the learning-rate schedule)")
    if "trainer_state.json" not in names:
        problems.append("trainer_state.json is missing")
    if world_size is not None and world_size > 1:
        missing = [f"rng_state_{i}.pth" for i in range(world_size) if f"rng_state_{i}.pth" not in names]
        if missing:
            problems.append(f"RNG state of {world_size} processes expected, missing {', '.join(missing)}")
        if deepspeed:  # every rank's ZeRO optimizer shard, written on its own machine
            shards = {
                m.group(1)
                for n in names
                if (m := re.match(r"global_step\d+/(?:\w+_)?zero_pp_rank_(\d+)_", n))
            }
            if lost := [str(r) for r in range(world_size) if str(r) not in shards]:
                problems.append(
                    f"ZeRO optimizer shards of {world_size} ranks expected, missing rank {', '.join(lost)}"
                )
    elif world_size == 1 and "rng_state.pth" not in names:
        problems.append("rng_state.pth is missing")
    elif not any(re.fullmatch(r"rng_state(_\d+)?\.pth", n) for n in names):
        problems.append("no RNG state (rng_state*.pth)")
    return problems


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def list_files(folder: Path) -> list[str]:
    """Relative POSIX paths of every file under ``folder`` except the manifest, sorted."""
    return sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_NAME
    )


def file_entries(folder: Path) -> dict[str, dict]:
    """Relative path -> ``{"size", "sha256"}`` of every file under ``folder`` but the manifest."""
    return {
        rel: {"size": (folder / rel).stat().st_size, "sha256": sha256_file(folder / rel)}
        for rel in list_files(folder)
    }


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries whose formats a checkpoint depends on."""
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def heldout_at(folder: Path, step: int) -> dict | None:
    """The held-out evaluation at ``step`` from the folder's heldout.json, as the manifest's ``heldout`` field.

    Returns:
        ``{"step", "accuracy", "low", "high", "questions", "samples"}`` (``accuracy`` null when nothing was
        graded), or None when the folder has no heldout.json or its history has no evaluation at ``step``.

    Raises:
        CheckpointError: heldout.json is not a held-out history (``{"format": 1, "evaluations": [...]}``).
    """
    path = folder / HISTORY_NAME
    history = read_history(path)
    if history is None:
        return None
    found = next((e for e in history["evaluations"] if e["step"] == step), None)
    if found is None:
        return None
    fix = "It is written by the held-out evaluation (recipe section heldout); delete it to save without one."
    summary = {key: found.get(key) for key in _HELDOUT_FIELDS}
    if not (
        # null: the grader settled none of the step's samples (callbacks/heldout.py); never the best checkpoint
        (_is_number(summary["accuracy"]) or ("accuracy" in found and found["accuracy"] is None))
        and all(summary[k] is None or _is_number(summary[k]) for k in ("low", "high"))
        and all(type(summary[k]) is int for k in ("questions", "samples"))
    ):
        raise CheckpointError(
            f"{path}: the evaluation at step {step} needs a numeric accuracy (null when the grader settled none of "
            "its samples), numeric or null low and high, and integer questions and samples; it has "
            f"{json.dumps(summary)}. {fix}"
        )
    return summary


def build_manifest(
    folder: Path, *, step: int, recipe_name: str, run_id: str, world_size: int, rank: int
) -> dict:
    """Describe every file of a checkpoint folder (sizes and SHA-256) as a manifest dictionary.

    Its ``heldout`` field is the held-out evaluation at this step (:func:`heldout_at`), or None.

    Raises:
        CheckpointError: The folder's heldout.json is not a held-out history.
    """
    files = file_entries(folder)
    return {
        "format": FORMAT,
        "step": step,
        "recipe_name": recipe_name,
        "run_id": run_id,
        "world_size": world_size,
        "uploader": {"rank": rank, "host": socket.gethostname()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": library_versions(),
        "files": files,
        "heldout": heldout_at(folder, step),
    }


def seal_checkpoint(folder: Path, *, step: int, recipe_name: str, run_id: str, world_size: int) -> None:
    """Write the manifest of a just-saved local checkpoint into it (atomically), so a later launch verifies
    the local copy file by file, as it verifies a download."""
    manifest = build_manifest(
        folder, step=step, recipe_name=recipe_name, run_id=run_id, world_size=world_size, rank=0
    )
    tmp = folder.parent / f".{folder.name}.{MANIFEST_NAME}.tmp"
    tmp.write_bytes(manifest_bytes(manifest))
    os.replace(tmp, folder / MANIFEST_NAME)


def manifest_bytes(manifest: dict) -> bytes:
    """The manifest as stored: indented, key-sorted JSON."""
    return json.dumps(manifest, indent=1, sort_keys=True).encode()


def parse_manifest(data: bytes, where: str) -> tuple[dict | None, str | None]:
    """Parse manifest bytes; returns ``(manifest, None)`` or ``(None, reason it is unusable)``."""
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{where} is not valid JSON ({e})"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, f"{where} is not a {FORMAT} manifest"
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("size"), int) and isinstance(v.get("sha256"), str)
        for v in files.values()
    ):
        return None, f"{where} has no valid file list"
    return manifest, None


def same_contents(a: dict, b: dict) -> bool:
    """Whether two manifests describe the same checkpoint of the same run (creation time aside)."""
    return all(a.get(k) == b.get(k) for k in ("step", "run_id", "files"))


def manifest_problems(manifest: dict, step: int) -> list[str]:
    """Why a manifest's checkpoint cannot be resumed, judged from its file list alone."""
    problems = (
        [] if manifest.get("step") == step else [f"manifest says step {manifest.get('step')}, not {step}"]
    )
    return problems + training_state_problems(manifest["files"], world_size=manifest.get("world_size"))


def listing_problems(manifest: dict, listing: dict[str, int]) -> list[str]:
    """Compare a manifest with a storage listing (relative path -> size): missing or truncated objects."""
    return list(listing_mismatches(manifest, listing).values())


def listing_mismatches(manifest: dict, listing: dict[str, int]) -> dict[str, str]:
    """:func:`listing_problems` by file: relative path -> what is wrong with its object."""
    problems = {}
    for rel, entry in manifest["files"].items():
        if rel not in listing:
            problems[rel] = f"{rel} is listed in the manifest but missing"
        elif listing[rel] != entry["size"]:
            problems[rel] = f"{rel} has {listing[rel]} bytes, the manifest says {entry['size']}"
    return problems


def verify_folder(folder: Path, manifest: dict) -> list[str]:
    """Check every file of a local copy against the manifest's sizes and SHA-256 hashes."""
    on_disk = {rel: (folder / rel).stat().st_size for rel in list_files(folder)}
    problems = listing_problems(manifest, on_disk)
    for rel, entry in manifest["files"].items():
        if on_disk.get(rel) == entry["size"] and sha256_file(folder / rel) != entry["sha256"]:
            problems.append(f"{rel} does not match its SHA-256 in the manifest (altered or corrupt)")
    return problems


def read_local_manifest(folder: Path) -> tuple[dict | None, str | None]:
    """The manifest in a local checkpoint folder: ``(manifest, None)``, ``(None, None)`` if absent, or a reason."""
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None, None
    return parse_manifest(path.read_bytes(), str(path))


def local_checkpoint_problems(folder: Path) -> list[str]:
    """Why a local ``checkpoint-N`` folder cannot be resumed exactly (empty list: it can).

    With a manifest inside (a verified download), every file is checked against it; without one, the folder
    must hold weights, optimizer, scheduler, trainer state and RNG state, and its trainer state must be at step N.
    """
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    step = checkpoint_step(folder.name)
    if step is None:
        return [f"{folder.name} is not named checkpoint-<step>"]
    manifest, reason = read_local_manifest(folder)
    if reason:
        return [reason]
    if manifest is not None:
        return manifest_problems(manifest, step) + verify_folder(folder, manifest)
    problems = training_state_problems(list_files(folder))
    state_file = folder / "trainer_state.json"
    if state_file.is_file():
        try:
            global_step = json.loads(state_file.read_text()).get("global_step")
        except json.JSONDecodeError:
            return problems + ["trainer_state.json is not valid JSON (interrupted write?)"]
        if global_step != step:
            problems.append(f"trainer_state.json is at step {global_step}, not {step}")
    return problems
