"""The other side of a comparison: after a tuned model's evaluation, the command that evaluates the base model on the
same questions with the same decoding (and vice versa), for ``recipes/evaluate.py``'s closing lines."""

from __future__ import annotations

from pathlib import Path

from recipes.evaluation.generation import Decoding


def counterpart_out(out: str, tuned: bool) -> str:
    """The other side's file beside ``out``: ``tuned`` <-> ``base`` in its name, else a ``-base``/``-tuned`` suffix.

    >>> counterpart_out("runs/tuned.jsonl", True), counterpart_out("heldout-base.jsonl", False)
    ('runs/base.jsonl', 'heldout-tuned.jsonl')
    >>> counterpart_out("step-300.jsonl", True)
    'step-300-base.jsonl'
    """
    path = Path(out)
    mine, other = ("tuned", "base") if tuned else ("base", "tuned")
    name = path.name.replace(mine, other) if mine in path.stem else f"{path.stem}-{other}{path.suffix}"
    return str(path.with_name(name))


def counterpart_command(
    args, decoding: Decoding, questions: int, merged_from: str | None = None
) -> list[str]:
    """This command for the other side of the comparison: the base model for a tuned run, and vice versa.

    ``merged_from``: the base of the merged export this run evaluated (``recipes.export.merged_base``), which is
    a tuned model without ``--adapter``: the other side loads that base instead.
    """
    overrides = list(args.overrides)
    if merged_from:
        overrides = [o for o in overrides if not o.startswith("model.name_or_path=")]
        overrides.append(f"model.name_or_path={merged_from}")
    tuned = bool(args.adapter or merged_from)
    out = counterpart_out(str(args.out), tuned=tuned)
    other = {"--out": out} if tuned else {"--out": out, "--adapter": "ADAPTER"}
    options = {**other, "--split": args.split, "--questions": questions, "--samples": args.samples,
               "--seed": args.seed, "--temperature": f"{decoding.temperature:g}", "--top-p": f"{decoding.top_p:g}",
               "--max-new-tokens": decoding.max_new_tokens, "--engine": args.engine}  # fmt: skip
    return ["python", "recipes/evaluate.py", args.recipe, *overrides,
            *(str(part) for option in options.items() for part in option)]  # fmt: skip
