"""The held-out evaluation a recipe's ``heldout:`` section asks for, as a trainer callback (callbacks/heldout.py).

Questions are drawn from the task's held-out split like evaluate.py draws them (a seeded order of ids, so a
larger ``questions`` keeps the smaller draw's questions), prompts and grading are evaluate.py's, and decoding is
the training sampling. The split is disjoint from the training rows and from the test split (recipes/data.py).
"""

from __future__ import annotations

from pathlib import Path

from callbacks.alarms import AlarmSettings
from callbacks.heldout import HeldoutCallback
from callbacks.heldout_history import HISTORY_NAME, read_history, resume_past_stop
from common.wording import counted
from recipes.evaluation.generation import decoding_for
from recipes.evaluation.live import HeldoutPlan
from recipes.evaluation.records import format_style
from recipes.evaluation.resume import record_settings
from recipes.tasks.sources import DataError


def heldout_plan(recipe) -> HeldoutPlan:
    """The questions, samples, seeds and decoding of every held-out evaluation of this recipe's run."""
    from recipes.data import load_split
    from recipes.evaluation.questions import eval_data, select_questions

    data, heldout = recipe.config["data"], recipe.config["heldout"]
    rows = load_split(
        eval_data(data, heldout["split"]), split=heldout["split"]
    )  # as evaluate --split heldout
    if heldout["questions"] > len(rows):
        raise DataError(
            f"heldout.questions is {heldout['questions']} but the {heldout['split']} split of {data['source']} has "
            f"{counted(len(rows), 'question')}; set heldout.questions={len(rows)} or fewer."
        )
    rows = rows.select(select_questions(rows["id"], heldout["questions"], heldout["seed"])).to_list()
    decoding = decoding_for(recipe.config["trainer"], None, None, None, samples=heldout["samples"])
    return HeldoutPlan(
        rows=rows,
        samples=heldout["samples"],
        seed=heldout["seed"],
        batch_size=heldout["batch_size"],
        decoding=decoding,
        style=format_style(recipe.config["rewards"]),
        settings=record_settings(recipe, None, heldout["seed"], heldout["split"], data["source"], decoding),
    )


def heldout_callback(
    recipe, questions: HeldoutPlan | None, resume_from: str | None
) -> HeldoutCallback | None:
    """The callback for ``heldout_plan(recipe)`` (None when ``heldout.enabled`` is false), with the resumed
    checkpoint's history."""
    heldout = recipe.config["heldout"]
    if not heldout["enabled"]:
        return None
    # The checkpoint's own copy: the evaluations up to its step, whatever a crashed later launch wrote.
    history = read_history(Path(resume_from) / HISTORY_NAME) if resume_from else None
    return HeldoutCallback(
        questions,
        recipe.config["trainer"]["output_dir"],
        heldout["every_steps"] or recipe.config["checkpoint"]["every_steps"],
        AlarmSettings(
            alpha=heldout["alarm_alpha"],
            length_collapse=heldout["length_collapse"],
            cap_share=heldout["cap_share"],
            kl_spike=heldout["kl_spike"],
        ),
        stop_on_alarm=heldout["stop_on_alarm"],
        patience=heldout["patience"],
        history=resume_past_stop(history) if history else None,
        records_from=resume_from,
    )
