"""The model card saved with a trained adapter: base model, recipe, data and final metrics, and how to use it.

TRL's own card does not know the base model when it loads from a local folder ("fine-tuned version of [None]")
nor the recipe; ``run.py`` writes this one over it, in the output folder the run owns.
"""

from __future__ import annotations

from common.wording import questions_by_samples

# Logged metrics worth a line in the card, in order, with their labels; every reward's mean (a plug-in's too)
# comes after the total, as TRL logs it (rewards/<name>/mean, before its weight).
METRICS = {
    "reward": "mean total reward (weighted)",
    "completions/mean_length": "mean completion length (tokens)",
    "kl": "KL to the base",
}


def _label(key: str) -> str | None:
    if key in METRICS:
        return METRICS[key]
    name = key.removeprefix("rewards/").removesuffix("/mean")
    return f"mean {name} reward" if key == f"rewards/{name}/mean" else None


def final_metrics(log_history: list[dict]) -> tuple[int | None, dict]:
    """The step of the last logged training metrics, and their card lines (label: value), total reward first."""
    for entry in reversed(log_history):
        keys = [k for k in METRICS if k in entry]
        keys[1:1] = sorted(k for k in entry if k not in METRICS and _label(k))  # each reward after the total
        if keys:
            return entry.get("step"), {_label(k): entry[k] for k in keys}
    return None, {}


def alarm_and_stop_lines(history: dict) -> list[str]:
    """The alarms a run's held-out history records, and its early stops: in the adapter's card and a merged one's."""
    lines = []
    for alarm in history.get("alarms") or []:
        lines += [f"Alarm {alarm['kind']} at step {alarm['steps'][-1]}: {alarm.get('message', '')}", ""]
    for stop in history.get("resumed_stops") or []:
        lines += [
            f"The run was stopped at step {stop['step']} ({stop['reason']}) and then resumed past it.",
            "",
        ]
    if history.get("stopped"):
        stopped = history["stopped"]
        lines += [f"The run ended early at step {stopped['step']}: {stopped['reason']}.", ""]
    return lines


def heldout_lines(history: dict | None, output_dir: str) -> list[str]:
    """The held-out results of a run (callbacks/heldout.py's history): last and best accuracy, why it stopped
    early, and where the best checkpoint is when it is not this adapter (the last evaluation is the final step's:
    the held-out callback evaluates at the end)."""
    from common.ranking import accuracy_text, best_saved, best_text

    evaluations = (history or {}).get("evaluations") or []
    if not evaluations:
        return []
    last = evaluations[-1]
    best = best_saved(evaluations) or last
    # None: the grader settled no sample of the last evaluation, which measured nothing.
    ungraded = " (the grader settled none of its samples)" if last["accuracy"] is None else ""
    lines = [
        (
            f"Held-out accuracy ({questions_by_samples(last['questions'], last['samples'])}, never trained on): "
            f"{accuracy_text(last['accuracy'])} at step {last['step']}{ungraded}; {best_text(evaluations)}."
        ),
        "",
    ]
    lines += alarm_and_stop_lines(history)
    base = next((e for e in evaluations if e["step"] == 0 and e["accuracy"] is not None), None)
    if base and best["step"] != 0 and best["accuracy"] is not None and best["accuracy"] <= base["accuracy"]:
        lines += [
            (
                f"No checkpoint beat the model before training on held-out accuracy (step 0: {base['accuracy']:.1%}; "
                f"the best checkpoint, step {best['step']}: {best['accuracy']:.1%}): the base model did as well as or "
                "better than every adapter this run saved."
            ),
            "",
        ]
    elif best["step"] != last["step"]:
        lines += [
            (
                f"This adapter is the final one (step {last['step']}), not the best: `{output_dir}/best` names the "
                f"best saved checkpoint (step {best['step']}, {best['accuracy']:.1%}); evaluate or export that one "
                "for the best held-out accuracy."
            ),
            "",
        ]
    return lines


def model_card(recipe, log_history: list[dict], output_dir: str, history: dict | None = None) -> str:
    """The README.md of a trained adapter (Hugging Face model card front matter, then Markdown).

    ``history``: the run's held-out history, when it evaluated held-out accuracy.
    """
    model, data, trainer = recipe.config["model"], recipe.config["data"], recipe.config["trainer"]
    step, metrics = final_metrics(log_history)
    # max_steps -1: the run trains num_train_epochs instead, and has no step count of its own to show.
    planned = (
        f"of {trainer['max_steps']} steps"
        if trainer["max_steps"] > 0
        else f"steps (trainer.num_train_epochs {trainer['num_train_epochs']:g})"
    )
    rewards = ", ".join(spec.get("name") or spec.get("path") for spec in recipe.config["rewards"])
    from common.hub import card_front_matter

    lines = [
        *card_front_matter(
            model["name_or_path"], "library_name: peft", "tags: [grpo, lora, trl, grpo-recipes]"
        ),
        "",
        f"# {recipe.name}",
        "",
        (
            f"A LoRA adapter (rank {recipe.config['lora']['r']}) for **{model['name_or_path']}**, trained with GRPO "
            f"by the grpo-recipes recipe `{recipe.name}` (the resolved recipe is `recipe.yaml`, beside this card)."
        ),
        "",
        f"- Base model: `{model['name_or_path']}` ({model['dtype']}, quantization {model['quantization']})",
        f"- Data: task `{data['task']}`, source `{data['source']}`, split `{data['split']}`",
        f"- Rewards: {rewards}",
        (
            f"- Training: {step if step is not None else '?'} {planned}, learning rate "
            f"{trainer['learning_rate']:g}, {trainer['num_generations']} completions per prompt, "
            f"beta {trainer['beta']:g}"
        ),
        "",
    ]
    if metrics:
        lines += [f"Final training metrics (step {step}):", ""]
        # None: TRL's mean of a reward that applied to no completion of the step (it returned None for each).
        lines += [
            f"- {label}: " + ("none (it applied to no completion)" if value is None else f"{value:.4g}")
            for label, value in metrics.items()
        ]
        lines.append("")
    lines += heldout_lines(history, output_dir)
    lines += [
        "## Use",
        "",
        "```python",
        "from peft import AutoPeftModelForCausalLM",
        "# Where the run wrote this folder: give its new path if it moved, or its Hub id once pushed.",
        f"model = AutoPeftModelForCausalLM.from_pretrained({output_dir!r})",
        "```",
        "",
        "Evaluate it against the base with `python recipes/evaluate.py` and `python -m stats.compare`; merge it",
        f"into a plain transformers model with `python recipes/export.py {output_dir} --out MERGED_FOLDER`.",
        "",
    ]
    return "\n".join(lines)
