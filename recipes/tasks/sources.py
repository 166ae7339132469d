"""Reading a task's raw rows: a Hub dataset id, or local JSONL/Parquet files (one file, or a folder of splits).

A local folder whose README.md declares ``configs:`` in its YAML header (a Hub dataset repository cloned or
downloaded with ``hf download --repo-type dataset``) is read exactly as its Hub id is: ``datasets.load_dataset``
with the config and split, so a config selects its files as on the Hub.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from common.errors import UserError
from common.hub import hub_load
from common.suggestions import closest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DataError(UserError):
    """A dataset that does not have the task's shape; the message names the file and row."""


_SHARD = re.compile(r"-\d+-of-\d+(-[0-9a-f]+)?$")  # train-00000-of-00002, and -<fingerprint> from push_to_hub


def _split_files(folder: Path, split: str) -> list[Path]:
    """The data files of ``split`` in a folder: one file, or the shards of one (``train-00000-of-00002``).

    Raises:
        DataError: Several files match (``test.jsonl`` beside ``test_small.jsonl`` or ``old/test.jsonl``): read
            together, they would repeat questions without a word.
    """
    word = split_word(split)
    files = sorted(f for f in folder.rglob("*") if f.suffix in SUFFIXES and word.search(f.stem))
    sets = {(f.parent, _SHARD.sub("", f.stem)) for f in files}
    if len(sets) > 1:
        names = ", ".join(str(f.relative_to(folder)) for f in files[:6]) + (" ..." if len(files) > 6 else "")
        raise DataError(
            f"{folder}: {len(files)} files hold a {split} split ({names}), and they are not shards of one "
            f"file. Keep one {split} file (or one set of shards) in the folder, or name the file as data.source."
        )
    return files


def split_word(split: str) -> re.Pattern:
    """The split as a whole word of a file name: test.jsonl, test-00000-of-00001.parquet, gsm8k_test_sample.jsonl."""
    return re.compile(rf"(^|[-_.]){re.escape(split)}([-_.]|$)")


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
            others = [
                f.name for f in sorted(source.rglob("*")) if f.is_file() and split_word(split).search(f.stem)
            ]
            raise DataError(
                f"No {split} split in {source}: expected .jsonl or .parquet files with '{split}' as a word of their "
                f"name (e.g. {split}.jsonl, {split}-00000-of-00001.parquet)."
                + (f" Found {', '.join(others[:3])}: {conversion(source / others[0])}." if others else "")
            )
    if source.is_file() and source.suffix not in SUFFIXES:
        raise DataError(
            f"data.source {source} is not a .jsonl or .parquet file: {conversion(source)}, then set data.source "
            f"to {source.with_suffix('.jsonl')}."
        )
    kinds = {SUFFIXES.get(f.suffix) for f in files}
    if None in kinds or len(kinds) > 1:
        raise DataError(
            f"{source}: expected .jsonl or .parquet files (one kind), got {[f.name for f in files]}."
        )
    return kinds.pop(), [str(f) for f in files]


def conversion(file: Path) -> str:
    """How to convert a data file of another format to JSON Lines, as a command to run beside it."""
    # dtype=str: pandas would read an answer "007" as 7 and an id "1e3" as 1000.0.
    read = {".csv": "read_csv", ".tsv": "read_csv", ".xlsx": "read_excel", ".xls": "read_excel"}.get(
        file.suffix
    )
    if read is None:
        return (
            "convert it to JSON Lines, one object per line with question and answer fields (pandas' to_json("
            "path, orient='records', lines=True) writes them)"
        )
    sep = ", sep='\\t'" if file.suffix == ".tsv" else ""
    return (
        f"convert it to JSON Lines, e.g. python -c \"import pandas as p; p.{read}('{file.name}', dtype=str{sep})"
        f".to_json('{file.stem}.jsonl', orient='records', lines=True)\""
    )


def resolve_source(source: str) -> str:
    """``samples/...`` names a file bundled with the package; anything else is a path (``~`` is the home folder) or
    a Hub id."""
    return (
        str(SAMPLES / source.removeprefix("samples/"))
        if source.startswith("samples/")
        else os.path.expanduser(source)
    )


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
    where = str(path) if path.exists() else source
    with hub_load(source, "data.source", "dataset", where):
        return list(get_dataset_config_names(where))


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
            from recipes.tasks.jsonl_check import check_jsonl  # it raises this module's DataError

            for file in files:
                check_jsonl(Path(file))
        return load_dataset(builder, data_files={split: files}, split=split)
    if problem := missing_path(source, "data.source"):
        raise DataError(problem)
    with hub_load(source, "data.source", "dataset"):
        return load_dataset(source, config, split=split)


def _locate(source: str, split: str, index: int) -> tuple[Path, int] | None:
    """(file, line or row number from 1) of row ``index`` of a local split, or None for a Hub dataset."""
    path = Path(resolve_source(source))
    if not path.exists() or hub_layout(path):
        return None
    first = 0  # the split's rows run through its files in order
    for file in map(Path, _local_files(path, split)[1]):
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            numbers = range(1, pq.ParquetFile(file).metadata.num_rows + 1)
        else:
            with open(file, encoding="utf-8", errors="replace") as handle:
                numbers = [number for number, line in enumerate(handle, start=1) if line.strip()]
        if index - first < len(numbers):
            return file, numbers[index - first]
        first += len(numbers)
    return None


def missing_path(source: str, key: str) -> str | None:
    """What is wrong with ``source`` (the value of recipe key ``key``) when it names a local file or folder that is
    not there (a data suffix, or a path starting with ``.``, ``/`` or ``~``); None for anything else, a Hub id too."""
    path = Path(resolve_source(source))
    if path.exists() or not (path.suffix in SUFFIXES or source.startswith((".", "/", "~"))):
        return None
    if not path.parent.is_dir():
        return f"{key} {source!r}: no such file or folder ({path.parent} does not exist either)."
    # Stems, not names: "nowhere.jsonl" is not a typo of "nu_one.jsonl" because both end in .jsonl. Only what can
    # hold data: the recipe mytask.yaml beside the folder mytask is no answer to "mytsk".
    stems = {
        (p.name if p.is_dir() else p.stem): p.name
        for p in sorted(path.parent.iterdir())
        if p.is_dir() or p.suffix in SUFFIXES
    }
    near = stems.get(closest(path.stem, stems))
    return f"{key} {source!r}: no such file or folder." + (
        f" Did you mean {path.parent / near}?" if near else ""
    )


def row_place(source: str, split: str, index: int) -> str:
    """Where row ``index`` (from 0) of a split was read: ``<file> line N`` for local JSONL (blank lines are not
    rows), ``<file> row N`` for Parquet, ``<source> (<split> row N)`` for the Hub. Only called for an error."""
    if (found := _locate(source, split, index)) is None:
        return f"{source} ({split} row {index + 1})"
    file, number = found
    return f"{file} {'row' if file.suffix == '.parquet' else 'line'} {number}"


def no_value(source: str, split: str, index: int, field: str) -> str:
    """Why a row's ``field`` reads as None, from its JSONL line: written as null, or absent (with the row's key
    that is likely a misspelling of it). Reading makes both None, and the fixes differ."""
    found = _locate(source, split, index)
    if found is None or found[0].suffix == ".parquet":
        return f"the {field!r} field is null"  # a column of Parquet (or the Hub) is in every row, null or not
    file, number = found
    with open(file, encoding="utf-8-sig" if number == 1 else "utf-8", errors="replace") as handle:
        line = next(text for n, text in enumerate(handle, start=1) if n == number)
    row = json.loads(line)
    if field in row:
        return f"the {field!r} field is null"
    near = closest(field, [key for key in row if isinstance(key, str) and key != field])
    return f"no {field!r} field" + (f" (it has {near!r}: rename it to {field!r})" if near else "")


def checked_gold(answer, field: str, source: str, split: str, index: int) -> str:
    """A row's gold answer as text, once the grader can read it; else a DataError naming the file and line.

    Checked while loading, so a bad answer stops the run before training, not at the batch that draws it.
    """
    from rewards.answers import read_gold

    if answer is None:
        raise DataError(
            f"{row_place(source, split, index)}: {no_value(source, split, index, field)}; every row needs one."
        )
    if isinstance(answer, (bool, list, dict)):
        raise DataError(
            f"{row_place(source, split, index)}: the {field!r} field is {type(answer).__name__} {answer!r}; a gold "
            'answer is a number or a text such as "42" or "\\\\frac{3}{4}".'
        )
    text = str(answer).strip()
    if not text:
        raise DataError(f"{row_place(source, split, index)}: the {field!r} field is empty.")
    try:
        gold = read_gold(text)
    except ValueError as e:
        raise DataError(f"{row_place(source, split, index)}: {field!r}: {e}") from None
    # A number as the grader reads it: beside one float, datasets reads a column's 5 as 5.0, which records would show.
    return gold.answer if isinstance(answer, (int, float)) else text


def checked_question(question, field: str, source: str, split: str, index: int) -> str:
    """A row's question, once it is text that is not blank; else a DataError naming the file and line."""
    if question is None:
        raise DataError(
            f"{row_place(source, split, index)}: {no_value(source, split, index, field)}; every row needs one."
        )
    if not isinstance(question, str) or not question.strip():
        found = "blank" if isinstance(question, str) else repr(question)
        raise DataError(
            f"{row_place(source, split, index)}: the {field!r} field is {found}; every row needs one."
        )
    return question


# What other datasets call these fields, preferred over a spelling match: "solution" is spelt like "question" but is
# a worked solution, and renamed so, the run would train on the solutions as its questions.
ALIASES = {
    "question": ("problem", "prompt", "query", "input", "instruction"),
    "answer": ("final_answer", "target", "label", "gold", "output"),
}


def _rename_from(name: str, columns: list[str]) -> str | None:
    """The column a user likely meant as ``name``: a known alias, else a near spelling that is not a worked solution."""
    alias = next((c for c in columns if c.lower() in ALIASES.get(name, ())), None)
    return alias or closest(name, [c for c in columns if c.lower() != "solution"])


def require_columns(raw, columns: tuple[str, ...], source: str) -> None:
    """A DataError naming the source and the missing columns, if any, and the renames that would fix them."""
    missing = sorted(set(columns) - set(raw.column_names))
    if missing:
        renames = [
            f"{found} -> {name}" for name in missing if (found := _rename_from(name, raw.column_names))
        ]
        math_style = {"problem", "solution"} <= {c.lower() for c in raw.column_names}
        raise DataError(
            f"{source}: rows need {' and '.join(columns)} fields; missing {missing}. "
            f"Found: {', '.join(raw.column_names) or 'no columns (an empty file?)'}."
            + (f" Did you mean to name them {', '.join(renames)}?" if renames else "")
            + (
                " Or, for MATH-style rows (a problem, and a solution ending in \\boxed{answer}), set "
                "data.task=math, which reads them as they are."
                if math_style
                else ""
            )
        )
