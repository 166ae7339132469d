"""The two evaluations' generation settings: a comparison of two models must not also compare two decodings, two
prompts or two graders.

``recipes/evaluate.py`` writes ``temperature``, ``top_p``, ``max_new_tokens`` and ``prompt_sha`` (a short sha256
of ``data.system_prompt``) into every record. Greedy decoding, a longer token budget or another system prompt
alone moves accuracy by points, so a difference in them would be read as the training's effect. Files that do not
record a setting (records from other tools, or written before ``prompt_sha`` was recorded) are not checked on it.
Records also carry ``grader_version``: two files graded by different versions are refused (recipes/regrade.py
grades the older file again, evaluate.py's files and the held-out records of a training step alike);
evaluate.py's records without one were graded by version 1, and another tool's file without one gets a warning.
Two of evaluate.py's files that evaluated the same weights (model, adapter, training step) get a warning too.
"""

from __future__ import annotations

from stats.records import InputError, ModelRecords

DECODING_KEYS = ("temperature", "top_p", "max_new_tokens")
PROMPT_KEY = "prompt_sha"


def decoding_of(model: ModelRecords, key: str) -> set:
    """The values of one setting across a file's records (empty: the file does not record it)."""
    return {r[key] for r in model.records if r.get(key) is not None}


def _differences(baseline: ModelRecords, tuned: ModelRecords, keys: tuple[str, ...]) -> list[str]:
    differ = []
    for key in keys:
        before, after = decoding_of(baseline, key), decoding_of(tuned, key)
        if before and after and before != after:
            differ.append(f"{key} {_values(before)} vs {_values(after)}")
    return differ


def check_same_decoding(
    baseline: ModelRecords, tuned: ModelRecords, *, allow_different: bool = False
) -> list[str]:
    """Refuse (or, with ``allow_different``, return as warnings) the decoding settings and system prompt the two
    files differ in.

    Raises:
        InputError: A setting differs and ``allow_different`` is false; the message names each one.
    """
    decoding = _differences(baseline, tuned, DECODING_KEYS)
    prompt = _differences(baseline, tuned, (PROMPT_KEY,))
    if not decoding and not prompt:
        return []
    parts, causes = [], []
    if decoding:
        parts.append(f"different decoding ({'; '.join(decoding)})")
        causes.append("the decoding's")
    if prompt:
        parts.append(f"different system prompts ({prompt[0]}: data.system_prompt differs)")
        causes.append("the prompt's")
    what = f"{baseline.path} and {tuned.path} were generated with {' and '.join(parts)}"
    cause = " and ".join(causes)
    if allow_different:
        return [f"{what}: the difference below mixes the training's effect with {cause}."]
    raise InputError(
        f"{what}: a difference in accuracy would mix the training's effect with {cause}. Evaluate both models "
        "with the same settings (recipes/evaluate.py --temperature, --top-p, --max-new-tokens, and the same "
        "data.system_prompt), or pass --different-decoding to compare them anyway."
    )


def _values(values: set) -> str:
    return ", ".join(map(str, sorted(values)))


GRADER_KEY = "grader_version"
# Keys only recipes/evaluate.py's records carry (lm-eval's two grades): a file of them without a grader_version was
# graded before records carried one, by version 1, not by another tool.
_OURS = ("correct_strict", "correct_lenient")


def grader_versions(model: ModelRecords) -> set:
    """The grader versions a file's records were graded by: 1 for evaluate.py's records written before they carried
    one (``rewards.answers.GRADER_VERSION``'s first); empty for another tool's file that records none."""
    versions = decoding_of(model, GRADER_KEY)
    if not versions and any(key in r for r in model.records for key in _OURS):
        return {1}
    return versions


def check_same_grader(baseline: ModelRecords, tuned: ModelRecords) -> list[str]:
    """Refuse two files graded by different grader versions (``rewards.answers.GRADER_VERSION``): the same
    completion can be right by one and wrong by the other, which would read as the training's effect. Returns a
    warning when one file records no version and is not evaluate.py's (another tool's: its grader is unknown).

    Raises:
        InputError: Both files record versions and they differ; the message names the fix.
    """
    models = {model.path: model for model in (baseline, tuned)}
    versions = {path: grader_versions(model) for path, model in models.items()}
    if all(versions.values()) and versions[baseline.path] != versions[tuned.path]:
        # The file holding the oldest version: a file partly graded by an older grader needs its re-grade.
        older = min(versions, key=lambda path: min(versions[path]))
        raise InputError(
            f"{baseline.path} and {tuned.path} were graded by different grader versions "
            f"({_values(versions[baseline.path])} vs {_values(versions[tuned.path])}): the same answer can be "
            f"right by one and wrong by the other: " + _regrade_fix(models[older])
        )
    if any(versions.values()) and not all(versions.values()):
        unknown = next(path for path, found in versions.items() if not found)
        return [
            f"{unknown} records no grader version (written by another tool, or by an early evaluate.py), "
            "so its grades may come from another grader than the other file's. If grpo-recipes wrote it, "
            + _regrade_fix(models[unknown])
            + "; another tool's file is best evaluated again with recipes/evaluate.py"
        ]
    return []


def _regrade_fix(model: ModelRecords) -> str:
    """How to have ``model``'s file graded by this grader: recipes/regrade.py, from its saved completions."""
    return (
        f"grade it again with this grader, from its saved completions (no model, no generation): python "
        f"recipes/regrade.py {model.path}"
    )


def same_model_warning(baseline: ModelRecords, tuned: ModelRecords) -> str | None:
    """A warning when both files evaluated the same weights (the same model, adapter and training step): their
    difference is sampling noise alone, which is what a tuned evaluation run without ``--adapter`` gives."""

    def weights(model: ModelRecords) -> set:
        return {
            tuple(r.get(k) for k in ("model", "adapter_path", "adapter_sha", "step")) for r in model.records
        }

    recorded = all("adapter_path" in r for m in (baseline, tuned) for r in m.records)  # evaluate.py's files
    both = weights(baseline)
    if not recorded or len(both) != 1 or both != weights(tuned) or next(iter(both))[0] is None:
        return None
    model, path, sha, step = next(iter(both))
    what = f"{model} with the adapter {path}" if path or sha else f"{model} without an adapter"
    return (
        f"{baseline.path} and {tuned.path} both evaluated {what}{f' at step {step}' if step is not None else ''}: "
        "the difference below is sampling noise alone. Was --adapter left out of the tuned evaluation?"
    )
