"""The command lines the docs write name real scripts, real recipes and options the scripts accept.

Docs drift as code changes under them: an option renamed, a recipe removed, a script moved. Each command line in
the README, docs/, notebooks/README.md, the recipes' headers, the runnable files' docstrings and the GPU table
script is read here, and its script, its recipe and every `--option` after the script are checked against the
script's own `--help` (run once per script) and the recipe list. Nothing is trained: running them is an audit's job.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache

import pytest
from conftest import REPO

# `python recipes/evaluate.py`, `python -m stats.compare`, `accelerate launch ... recipes/run.py`: the script is
# what follows `python` or the last `.py` path of a launch line.
SCRIPT = re.compile(
    r"(?:^|[\s`(])(?:python (-m (?:recipes|rewards|stats)[\w.]*)|(?:python |\S*?/?)((?:recipes|benchmarks|stats)/\w+\.py))"
)
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
RECIPES = sorted(p.stem for p in (REPO / "recipes").glob("*.yaml") if not p.stem.startswith("_"))


def _documents() -> list:
    docs = [REPO / "README.md", REPO / "notebooks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    docs += sorted((REPO / "recipes").glob("*.yaml")) + sorted((REPO / "benchmarks").glob("*.sh"))
    for folder in ("recipes", "benchmarks", "stats"):
        docs += sorted((REPO / folder).glob("*.py"))
    return docs


def _command_lines() -> list[tuple[str, str]]:
    """(where, the command) for every line naming a script, backslash continuations joined; in prose, the
    `code span` holding it (the rest of the line is about the command, not part of it)."""
    found = []
    for path in _documents():
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")
        for number, line in enumerate(text.splitlines(), 1):
            line = line.lstrip("# ").split("  #")[0].replace("``", "`")  # RST spans as Markdown ones
            match = SCRIPT.search(line)
            if not match:
                continue
            at = match.start(match.lastindex)
            if line.count("`", 0, at) % 2 == 1:  # in a code span: the command ends with it
                start = line.rfind("`", 0, at) + 1
                line = ("python " if start == at else "") + line[start:].split("`")[0]
            found.append((f"{path.relative_to(REPO)}:{number}", line))
    return found


def _script(line: str) -> tuple[str, str | None]:
    """The script as `python` runs it (a module or a path), and the rest of the line after it where the line runs
    it (`python SCRIPT`, `accelerate launch ... SCRIPT`), None where prose only names it."""
    match = list(SCRIPT.finditer(line))[-1]
    before = line[: match.start(match.lastindex)]
    runs = before.endswith("python ") or "accelerate launch" in before
    return match.group(match.lastindex), (line[match.end() :] if runs else None)


@cache
def _help(script: str) -> str:
    args = script.split() if script.startswith("-m ") else [script]
    result = subprocess.run(
        [sys.executable, *args, "--help"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{script} --help failed: {result.stderr[-2000:]}"
    return result.stdout


COMMANDS = _command_lines()


def test_the_docs_hold_command_lines_to_check():
    """A pattern that stopped matching would pass every check below on nothing."""
    scripts = {_script(line)[0] for _, line in COMMANDS}
    assert {"recipes/run.py", "recipes/evaluate.py", "-m stats.compare", "benchmarks/grpo_step.py"} <= scripts


@pytest.mark.parametrize(("where", "line"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_names_a_real_script_recipe_and_options(where, line):
    script, rest = _script(line)
    if not script.startswith("-m "):
        assert (REPO / script).is_file(), f"{where}: {script} does not exist: {line}"
    if rest is None:
        return
    words = rest.replace("`", " ").split()
    # The recipe is the first word after the script when it names one (a file path or an option is not one).
    if script in ("recipes/run.py", "recipes/evaluate.py") and words and re.fullmatch(r"[a-z]\w*", words[0]):
        assert words[0] in RECIPES or words[0] in ("RECIPE", "NAME"), (
            f"{where}: no recipe {words[0]!r}: {line}"
        )
    options = OPTION.findall(rest)
    accepted = set(OPTION.findall(_help(script))) if options else set()
    unknown = [option for option in options if option not in accepted]
    assert not unknown, (
        f"{where}: {script} does not accept {unknown} (its --help lists {sorted(accepted)}): {line}"
    )
