"""What held-out evaluation costs a run: the arithmetic for every shipped recipe, and the measurement of real runs.

    python benchmarks/heldout_cost.py                       # the arithmetic, one row per shipped recipe
    python benchmarks/heldout_cost.py outputs/arith_tiny    # measured: each evaluation's seconds vs the run's

The arithmetic: decoding is memory-bound, so a ``generate`` call costs about the same whatever its batch (up to
the batch where compute binds) and its length is set by the longest completion. An evaluation makes
ceil(questions x samples / batch_size) calls; training makes (gradient_accumulation_steps / (steps_per_generation
x num_iterations)) generation rounds per optimizer step, one call each, and evaluations come every
``every_steps`` steps, plus one at step 0 (the model before training). So held-out evaluation adds at most
calls x evaluations / (max_steps x rounds per step) to the run's generation time, and less to its whole time
(training also runs the policy's forward and backward passes).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)


def arithmetic_rows() -> list[tuple]:
    """(recipe, questions x samples, calls per evaluation, every_steps, evaluations, rounds per step, bound) per
    recipe."""
    from recipes.checks import generation_schedule
    from recipes.recipe import available, load_recipe

    rows = []
    for name in available():
        recipe = load_recipe(name)
        heldout, trainer = recipe.config["heldout"], recipe.config["trainer"]
        if not heldout["enabled"]:
            rows.append((name, "off", "", "", "", "", ""))
            continue
        calls = math.ceil(heldout["questions"] * heldout["samples"] / heldout["batch_size"])
        every = heldout["every_steps"] or recipe.config["checkpoint"]["every_steps"]
        evaluations = math.ceil(trainer["max_steps"] / every) + 1  # and step 0, the model before training
        _, steps_per_generation = generation_schedule(trainer, processes=1)
        rounds = trainer["gradient_accumulation_steps"] / (steps_per_generation * trainer["num_iterations"])
        rows.append(
            (name, f"{heldout['questions']} x {heldout['samples']}", calls, every, evaluations, f"{rounds:g}",
             f"{calls * evaluations / (trainer['max_steps'] * rounds):.1%}")
        )  # fmt: skip
    return rows


def measured_row(output_dir: Path) -> tuple:
    """(run, evaluations, held-out seconds, run seconds, share) from a finished run's files."""
    history = json.loads((output_dir / "heldout" / "history.json").read_text())
    state = json.loads((output_dir / "trainer_state.json").read_text())
    runtime = next(e["train_runtime"] for e in reversed(state["log_history"]) if "train_runtime" in e)
    seconds = sum(e["seconds"] for e in history["evaluations"])
    return (
        str(output_dir),
        len(history["evaluations"]),
        f"{seconds:.1f}",
        f"{runtime:.1f}",
        f"{seconds / runtime:.1%}",
    )


def print_table(header: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    for row in (header, *rows):
        print("  ".join(f"{c!s:<{w}}" for c, w in zip(row, widths)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="*", type=Path, help="finished training output folders to measure")
    args = parser.parse_args(argv)
    if args.runs:
        print_table(
            ("run", "evaluations", "held-out s", "train s", "share"), [measured_row(r) for r in args.runs]
        )
    else:
        header = (
            "recipe",
            "questions x samples",
            "calls/eval",
            "every_steps",
            "evaluations",
            "rounds/step",
            "bound",
        )
        print_table(header, arithmetic_rows())
    return 0


if __name__ == "__main__":
    sys.exit(main())
