"""Reading a task's raw rows: a Hub dataset id, or local JSONL/Parquet files (one file, or a folder of splits).

A local folder whose README.md declares ``configs:`` in its YAML header (a Hub dataset repository cloned or
downloaded with ``hf download --repo-type dataset``) is read exactly as its Hub id is: ``datasets.load_dataset``
with the config and split, so a config selects its files as on the Hub.
"""

from __future__ import annotations

import re
from pathlib import Path

from common.errors import UserError
from common.hub import hub_errors

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DataError(UserError):
    """A dataset that does not have the task's shape; the message names the file and row."""


def _split_files(folder: Path, split: str) -> list[Path]:
    """The data files of ``split`` in a folder."""
    # The split is a whole word of the file name: test.jsonl, test-00000-of-00001.parquet, gsm8k_test_sample.jsonl.
    word = re.compile(rf"(^|[-_.]){re.escape(split)}([-_.]|$)")
    return sorted(f for f in folder.rglob("*") if f.suffix in SUFFIXES and word.search(f.stem))


def has_split_files(source: str, split: str) -> bool:
    """Whether ``source`` is a local folder (not in the Hub layout) holding data files of ``split``."""
    path = Path(resolve_source(source))
    return path.is_dir() and not hub_layout(path) and bool(_split_files(path, split))


def _local_files(source: Path, split: str) -> tuple[str, list[str]]:
    """(datasets builder name, files) for a local file, or a folder holding ``<split>*.jsonl|parquet``."""
    if source.is_file():
        files = [source]
    else:
        files = _split_files(source, split)
        if not files:
            raise DataError(
                f"No {split} split in {source}: expected .jsonl or .parquet files with '{split}' as a word of their "
                f"name (e.g. {split}.jsonl, {split}-00000-of-00001.parquet)."
            )
    kinds = {SUFFIXES.get(f.suffix) for f in files}
    if None in kinds or len(kinds) > 1:
        raise DataError(
            f"{source}: expected .jsonl or .parquet files (one kind), got {[f.name for f in files]}."
        )
    return kinds.pop(), [str(f) for f in files]


def check_jsonl(file: Path) -> None:
    """A DataError naming the file and line when a JSONL file is empty or a line is not a JSON object.

    ``datasets`` reports both as a traceback without the line; reading the file once first costs little.
    """
    import json

    empty = True
    with open(file, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            empty = False
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(
                    f"{file} line {number} is not valid JSON ({e.msg}): {line.strip()[:80]!r}"
                ) from None
            if not isinstance(row, dict):
                raise DataError(
                    f"{file} line {number} is not a JSON object with named fields: {line.strip()[:80]!r}"
                )
    if empty:
        raise DataError(f"{file} is empty: a JSONL data file holds one JSON object per line.")


def resolve_source(source: str) -> str:
    """``samples/...`` names a file bundled with the package; anything else is a path or a Hub id."""
    return str(SAMPLES / source.removeprefix("samples/")) if source.startswith("samples/") else source


def hub_layout(path: Path) -> bool:
    """Whether ``path`` is a folder laid out as a Hub dataset repository: a README.md with a ``configs:`` header."""
    import yaml

    readme = path / "README.md"
    if not (path.is_dir() and readme.is_file()):
        return False
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return False
    header = text[3:].partition("\n---")[0]
    try:
        card = yaml.safe_load(header)
    except yaml.YAMLError:
        return False
    return isinstance(card, dict) and isinstance(card.get("configs"), list)


def config_names(source: str) -> list[str] | None:
    """The configs of a Hub id or of a folder in the Hub layout; None for local data files (they have none)."""
    from datasets import get_dataset_config_names

    path = Path(resolve_source(source))
    if path.exists() and not hub_layout(path):
        return None
    with hub_errors(source, "data.source", "dataset"):
        return list(get_dataset_config_names(str(path) if path.exists() else source))


def read_raw(source: str, split: str, config: str | None = None):
    """Raw rows of ``split`` from a Hub id or a local path, as a ``datasets.Dataset``."""
    from datasets import load_dataset

    path = Path(resolve_source(source))
    if path.exists() and hub_layout(path):
        try:
            return load_dataset(str(path), config, split=split)
        except ValueError as e:  # a config or split the README does not declare: datasets names the choices
            raise DataError(f"data.source {source} (config {config}, split {split}): {e}") from None
    if path.exists():
        builder, files = _local_files(path, split)
        if builder == "json":
            for file in files:
                check_jsonl(Path(file))
        return load_dataset(builder, data_files={split: files}, split=split)
    if path.suffix in SUFFIXES or source.startswith((".", "/")):
        raise DataError(f"data.source {source!r}: no such file or folder.")
    with hub_errors(source, "data.source", "dataset"):
        return load_dataset(source, config, split=split)


def require_columns(raw, columns: tuple[str, ...], source: str) -> None:
    """A DataError naming the source and the missing columns, if any."""
    missing = set(columns) - set(raw.column_names)
    if missing:
        raise DataError(
            f"{source}: rows need {' and '.join(columns)} fields; missing {sorted(missing)}. "
            f"Found: {', '.join(raw.column_names) or 'no columns (an empty file?)'}."
        )
