"""The two evaluations' decoding settings: a comparison of two models must not also compare two decodings.

``recipes/evaluate.py`` writes ``temperature``, ``top_p`` and ``max_new_tokens`` into every record. Greedy
decoding or a longer token budget alone moves accuracy by points, so a difference in them would be read as the
training's effect. Files that do not record a setting (records from other tools) are not checked on it.
"""

from __future__ import annotations

from stats.records import InputError, ModelRecords

DECODING_KEYS = ("temperature", "top_p", "max_new_tokens")


def decoding_of(model: ModelRecords, key: str) -> set:
    """The values of one decoding setting across a file's records (empty: the file does not record it)."""
    return {r[key] for r in model.records if r.get(key) is not None}


def check_same_decoding(
    baseline: ModelRecords, tuned: ModelRecords, *, allow_different: bool = False
) -> list[str]:
    """Refuse (or, with ``allow_different``, return as warnings) the decoding settings the two files differ in.

    Raises:
        InputError: A setting differs and ``allow_different`` is false; the message names each one.
    """
    differ = []
    for key in DECODING_KEYS:
        before, after = decoding_of(baseline, key), decoding_of(tuned, key)
        if before and after and before != after:
            differ.append(f"{key} {_values(before)} vs {_values(after)}")
    if not differ:
        return []
    what = f"{baseline.path} and {tuned.path} were generated with different decoding ({'; '.join(differ)})"
    if allow_different:
        return [f"{what}: the difference below mixes the training's effect with the decoding's."]
    raise InputError(
        f"{what}: a difference in accuracy would mix the training's effect with the decoding's. Evaluate both "
        "models with the same settings (recipes/evaluate.py --temperature, --top-p, --max-new-tokens), or pass "
        "--different-decoding to compare them anyway."
    )


def _values(values: set) -> str:
    return ", ".join(map(str, sorted(values)))
