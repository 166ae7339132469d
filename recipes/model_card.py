"""The model card saved with a trained adapter: base model, recipe, data and final metrics, and how to use it.

TRL's own card does not know the base model when it loads from a local folder ("fine-tuned version of [None]")
nor the recipe; ``run.py`` writes this one over it, in the output folder the run owns.
"""

from __future__ import annotations

# Logged metrics worth a line in the card, in order, with their labels.
METRICS = {
    "reward": "mean total reward",
    "rewards/correctness/mean": "mean correctness reward",
    "rewards/format/mean": "mean format reward",
    "completions/mean_length": "mean completion length (tokens)",
    "kl": "KL to the base",
}


def final_metrics(log_history: list[dict]) -> tuple[int | None, dict]:
    """The step of the last logged training metrics, and those of METRICS it has."""
    for entry in reversed(log_history):
        found = {key: entry[key] for key in METRICS if key in entry}
        if found:
            return entry.get("step"), found
    return None, {}


def model_card(recipe, log_history: list[dict], output_dir: str) -> str:
    """The README.md of a trained adapter (Hugging Face model card front matter, then Markdown)."""
    model, data, trainer = recipe.config["model"], recipe.config["data"], recipe.config["trainer"]
    step, metrics = final_metrics(log_history)
    rewards = ", ".join(spec.get("name") or spec.get("path") for spec in recipe.config["rewards"])
    lines = [
        "---",
        f"base_model: {model['name_or_path']}",
        "library_name: peft",
        "tags: [grpo, lora, trl, grpo-recipes]",
        "---",
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
            f"- Training: {step if step is not None else '?'} of {trainer['max_steps']} steps, learning rate "
            f"{trainer['learning_rate']:g}, {trainer['num_generations']} completions per prompt, "
            f"beta {trainer['beta']:g}"
        ),
        "",
    ]
    if metrics:
        lines += [f"Final training metrics (step {step}):", ""]
        lines += [f"- {METRICS[key]}: {value:.4g}" for key, value in metrics.items()]
        lines.append("")
    lines += [
        "## Use",
        "",
        "```python",
        "from peft import AutoPeftModelForCausalLM",
        f"model = AutoPeftModelForCausalLM.from_pretrained({output_dir!r})",
        "```",
        "",
        "Evaluate it against the base with `python recipes/evaluate.py` and `python -m stats.compare`; merge it",
        f"into a plain transformers model with `python recipes/export.py {output_dir} --out MERGED_FOLDER`.",
        "",
    ]
    return "\n".join(lines)
