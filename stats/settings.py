"""The two evaluations' generation settings: a comparison of two models must not also compare two decodings, or
two prompts.

``recipes/evaluate.py`` writes ``temperature``, ``top_p``, ``max_new_tokens`` and ``prompt_sha`` (a short sha256
of ``data.system_prompt``) into every record. Greedy decoding, a longer token budget or another system prompt
alone moves accuracy by points, so a difference in them would be read as the training's effect. Files that do not
record a setting (records from other tools, or written before ``prompt_sha`` was recorded) are not checked on it.
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
