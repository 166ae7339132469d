"""What a resumed evaluation file must share with this run: the settings every record carries, and the checks.

evaluate.py appends to an ``--out`` file only when its records were made by this same evaluation: the same model
and adapter (by path and by contents), decoding, seed, split, data, prompt and answer style, and, for each id,
the same question.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.records import OUT_FIX, format_style

# Settings older evaluators did not record: a file without one is resumed (there is nothing to compare it with).
LATER_SETTINGS = ("prompt_sha", "answer_style", "adapter_sha")


def check_resumable(records: list[dict], settings: dict, path: Path) -> None:
    """Refuse to append to a file whose records were made with other settings, or by another policy: a held-out
    record (``step``) grades the policy at that training step, whatever its other settings say."""
    for record in records:
        if record.get("step") is not None:
            raise EvaluationError(
                f"{path} holds the held-out records of training step {record['step']} (that step's policy, not "
                "the model this run evaluates); refusing to append. Use a new --out file."
            )
        # The same weights found at another path (a moved run, RUN/best, a store's copy) are the same adapter.
        same_weights = (
            record.get("adapter_sha") is not None and record["adapter_sha"] == settings["adapter_sha"]
        )
        changed = [
            f"{k}: file has {record.get(k)!r}, this run {v!r}"
            for k, v in settings.items()
            if record.get(k) != v and (k in record or k not in LATER_SETTINGS)
            if not (k == "adapter_path" and same_weights)
        ]
        if changed:
            raise EvaluationError(
                f"{path} holds records made with other settings; refusing to append ("
                + "; ".join(changed)
                + f"){_adapter_change(record, settings)}. Use a new --out file, or rerun with the file's settings."
            )


def _adapter_change(record: dict, settings: dict) -> str:
    """What a changed adapter means, where the keys alone do not say it."""
    path, sha = record.get("adapter_path"), record.get("adapter_sha")
    if (path is None) != (settings["adapter_path"] is None):
        return f": the file evaluated {'the base model' if path is None else 'an adapter'}"
    if path == settings["adapter_path"] and sha not in (None, settings["adapter_sha"]):
        return (
            ": the folder holds another adapter than when the file was written (trained further, or replaced)"
        )
    return ""


def check_same_questions(records: list[dict], rows: list[dict], path: Path, source: str) -> None:
    """Refuse to resume a file whose records asked other questions under the ids the data gives now: the data
    changed since (a JSONL without an ``id`` column numbers its rows, so a reordered or edited file moves them)."""
    by_id = {row["id"]: row for row in rows}
    moved = [
        record
        for record in records
        if (row := by_id.get(record.get("id"))) is not None
        and any(key in record and record[key] != row[key] for key in ("question", "gold"))
    ]
    if moved:
        first, row = moved[0], by_id[moved[0]["id"]]
        raise EvaluationError(
            f"{path} holds {len(moved)} record(s) whose question or gold differs from what {source} gives under "
            f"the same id now (first: {first['id']!r}, file asks {first.get('question', '')[:60]!r} with gold "
            f"{first.get('gold')!r}; the data asks {row['question'][:60]!r} with gold {row['gold']!r}): the data "
            "changed since the file was written, and a JSONL without an `id` column numbers its rows. "
            f"{OUT_FIX} Give your rows an `id` column to keep ids stable across edits."
        )


def adapter_sha(folder: Path | None) -> str | None:
    """The first 16 hex digits of a sha256 over an adapter's config and weights: which adapter wrote a record.

    A run's output_dir holds a new adapter at the same path after more training, so the path alone cannot tell.
    """
    if folder is None:
        return None
    from callbacks.manifest import ADAPTER_WEIGHTS, sha256_file

    digest = hashlib.sha256()
    for name in ("adapter_config.json", *ADAPTER_WEIGHTS):
        if (file := Path(folder) / name).is_file():
            digest.update(f"{name}:{sha256_file(file)}\n".encode())
    return digest.hexdigest()[:16]


def record_settings(
    recipe, adapter_folder: Path | None, seed: int, split: str, source: str, decoding
) -> dict:
    """Settings every record of one evaluation shares (evaluate.py's files and the held-out ones alike).

    The adapter is identified by the folder it resolved to (a run prefix resolves to its newest checkpoint,
    RUN/best to its best), not by how it was written on the command line, and by its contents (``adapter_sha``).
    """
    return {
        "model": recipe.config["model"]["name_or_path"],
        "adapter_path": str(adapter_folder.resolve()) if adapter_folder else None,
        "adapter_sha": adapter_sha(adapter_folder),
        "seed": seed,
        "split": split,
        "source": source,
        "prompt_sha": prompt_sha(recipe.config["data"]["system_prompt"]),
        # What format_ok and lm-eval's strict grade were read in: recipes/regrade.py grades them again so.
        "answer_style": format_style(recipe.config["rewards"]),
        **dataclasses.asdict(decoding),
    }


def prompt_sha(system_prompt: str | None) -> str:
    """The first 12 hex digits of the system prompt's sha256: which prompt a record was asked with.

    recipes.data.load_split asks every question as [system: data.system_prompt, user: the question], so the system
    prompt is the one prompt setting (the question is in the record). It is hashed as written, not as the chat
    template renders it: that would need the tokenizer before a resumed file is checked, and the template belongs
    to the model, which the record names already. 48 bits tell prompts apart; the text would bloat every line.

    >>> prompt_sha("Solve the problem. End with '#### <number>'.")
    'e8eaaa3a8bef'
    """
    return hashlib.sha256((system_prompt or "").encode("utf-8")).hexdigest()[:12]
