"""Evaluate a recipe's base model, or a trained adapter, on its task: one graded JSONL record per sample.

    python recipes/evaluate.py gsm8k_tiny --out base.jsonl --questions 20 --samples 5
    python recipes/evaluate.py gsm8k_tiny --out tuned.jsonl --questions 20 --samples 5 --adapter outputs/gsm8k_tiny
    python recipes/evaluate.py gsm8k_llama --out tuned.jsonl --adapter s3://bucket/runs/llama --engine vllm
    python recipes/evaluate.py gsm8k_llama --out best.jsonl --adapter s3://bucket/runs/llama/best
    python recipes/evaluate.py gsm8k_qwen --out greedy.jsonl --samples 1 --temperature 0 data.source=/data/gsm8k
    python -m stats.compare base.jsonl tuned.jsonl

Questions: a seeded draw of row indices from the split; it depends only on --seed, --split and --questions
(a larger --questions keeps the smaller draw's questions), never on the model or batch size, so a baseline
and a tuned model see the same questions. Questions come from data.eval_source when the recipe sets it (MATH
trains on EleutherAI/hendrycks_math and is evaluated on HuggingFaceH4/MATH-500), else from data.source. A source
that is one file of another split (the bundled samples/gsm8k_train_sample.jsonl) is evaluated on its sibling file
for --split (samples/gsm8k_test_sample.jsonl); --split heldout reads the training data (recipes/tasks/heldout.py).
data.limit and data.max_prompt_tokens are training settings and do not apply here. Records keep the rows' subject
and level when the task has them (MATH). Evaluated questions also in the training split are warned about
(recipes/evaluation/overlap.py).

Decoding defaults to the recipe's training sampling (trainer.temperature, top_p, max_completion_length).
Grading uses rewards.answers, the training grader: each sample is correct, well-formatted but wrong, or has
no well-formed final answer (format_ok, in the style of the recipe's format reward).

Resuming: records are appended and fsync'd batch by batch; re-running the same command skips the finished
(id, sample) pairs, drops a half-written last line, and grades again from its saved completion a sample whose
grade the grader could not settle in time ("unsettled", see records.py). A file written with other settings
(model, adapter, seed, split, data source, decoding) is refused. Reproducibility: vLLM seeds every request from (--seed, id,
sample), so its draws are independent of batching. With --engine hf a batch is seeded from its requests,
and batches are cut the same way on every run, so a resumed run draws what an uninterrupted one would, given
the same --questions, --samples, --batch-size, hardware and library versions; GPU kernels may still differ
in the last bits between runs. Greedy decoding (--temperature 0) does not depend on seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.cli import positive
from common.errors import exit_status
from common.logs import log_to_stderr
from recipes.evaluation import generation
from recipes.evaluation.counterpart import counterpart_command
from recipes.evaluation.generation import Decoding, EvaluationError
from recipes.evaluation.out_lock import hold
from recipes.evaluation.overlap import warn_if_trained_on
from recipes.evaluation.questions import eval_data, select_questions
from recipes.evaluation.records import (
    append_records,
    check_writable,
    format_style,
    make_record,
    read_records,
    regrade,
    repair_end,
)
from recipes.evaluation.resume import check_resumable, check_same_questions, record_settings
from recipes.evaluation.summary import summary
from recipes.evaluation.trained_on import warn_if_other_data
from recipes.export import merged_base
from recipes.recipe import load_recipe

logger = logging.getLogger("recipes.evaluate")


@dataclasses.dataclass
class Evaluation:
    """What ``evaluate`` returns: every graded record of the run, in plan order, and how they were drawn."""

    out: Path
    records: list[dict]
    questions: int
    decoding: Decoding

    @property
    def accuracy(self) -> float:
        """Share of correct samples."""
        return sum(r["correct"] for r in self.records) / len(self.records)

    def summary(self) -> str:
        """Accuracy, the three-way split of the samples, and lm-eval's strict and flexible figures."""
        return summary(self.records, self.questions, self.out)


def evaluate(
    recipe,
    out: str | Path,
    *,
    adapter: str | Path | None = None,
    split: str = "test",
    questions: int | None = None,
    samples: int = 1,
    seed: int = 0,
    temperature: float | None = None,
    top_p: float | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 32,
    engine: str = "hf",
) -> Evaluation:
    """Generate and grade every pending sample; the Python API under ``python recipes/evaluate.py``.

    Args:
        recipe: A loaded recipe (``recipes.recipe.load_recipe``): its model, data and decoding defaults.
        out: JSONL file of graded samples; resumed when it holds records of this same run.
        adapter: A LoRA adapter folder (output_dir or checkpoint-N) or a checkpoint URI; a run's path or URI
            plus ``/best`` is its checkpoint with the highest held-out accuracy; None: the base model.
        split: Dataset split to draw questions from.
        questions: Questions drawn by ``seed`` from the split (None: all).
        samples: Completions per question.
        seed: Seeds the question draw and the sampling.
        temperature: 0 is greedy; None: the recipe's ``trainer.temperature``.
        top_p: None: the recipe's ``trainer.top_p``.
        max_new_tokens: None: the recipe's ``trainer.max_completion_length``.
        batch_size: Completions per generate call.
        engine: ``hf`` (transformers generate) or ``vllm``.

    Raises:
        UserError: Bad settings, data, adapter, or an ``out`` file written by another run.
    """
    from tqdm import tqdm

    from callbacks.checkpoint_sync import fetch_checkpoint
    from recipes.data import load_split

    if engine == "vllm":
        from recipes.evaluation.vllm_engine import require_vllm

        require_vllm()
    decoding = generation.decoding_for(
        recipe.config["trainer"], temperature, top_p, max_new_tokens, samples=samples
    )
    out = Path(out)  # checked before any download or model load
    with hold(out):
        existing, repair = read_records(out)
        check_writable(out)
        folder = None
        if adapter:
            folder = fetch_checkpoint(str(adapter), endpoint_url=recipe.config["checkpoint"]["endpoint_url"])
            generation.adapter_rank(folder)
            warn_if_other_data(Path(folder), recipe.config["data"])
        data = eval_data(recipe.config["data"], split)
        rows = load_split(data, split=split)
        rows = rows.select(select_questions(rows["id"], questions, seed)).to_list()
        warn_if_trained_on(recipe.config["data"], data, split, rows)
        ids = [row["id"] for row in rows]
        settings = record_settings(recipe, folder, seed, split, data["source"], decoding)
        check_resumable(existing, settings, out)
        check_same_questions(existing, rows, out, data["source"])
        done = {(r.get("id"), r.get("sample")): r for r in existing}
        batches = generation.plan_batches(len(ids), samples, batch_size)
        units = [unit for batch in batches for unit in batch]
        if beyond := set(done) - {(ids[q], k) for q, k in units}:
            held = len({qid for qid, _ in done})
            raise EvaluationError(
                f"{out} holds {len(done)} samples ({held} questions, up to {1 + max(k for _, k in done)} samples "
                f"each), {len(beyond)} of them beyond what this run asks for (--questions {len(ids)} --samples "
                f"{samples}): its summary would leave them out, and stats.compare would not. Rerun with the file's "
                "--questions and --samples, or use a new --out file."
            )
        style = format_style(recipe.config["rewards"])
        repair = regrade(out, existing, repair, style)
        pending = [batch for batch in batches if any((ids[q], k) not in done for q, k in batch)]
        finished = sum((ids[q], k) in done for q, k in units)
        logger.info(
            "%d of %d samples already in %s; %d to generate.",
            finished,
            len(units),
            out,
            len(units) - finished,
        )
        if pending:
            from recipes.compiled_generation import use_compiled_generation
            from recipes.merged_lora import use_merged_generation
            from recipes.model import load_tokenizer

            # Measured with the tokenizer alone, so a refused --max-new-tokens costs no model load (minutes for 8B).
            prompts = generation.prompt_token_ids(
                load_tokenizer(recipe.config["model"]), [row["prompt"] for row in rows]
            )
            ids = [row["id"] for row in rows]
            generation.check_context(recipe.config["model"], prompts, decoding.max_new_tokens, ids)
            generator, _ = generation.load_generator(
                engine,
                recipe.config["model"],
                folder,
                decoding,
                seed=seed,
                merged=engine == "hf" and folder is not None and use_merged_generation(recipe),
                compiled=engine == "hf" and use_compiled_generation(recipe),
            )
            if engine == "hf":
                generator.size_cache(prompts)
            out.parent.mkdir(parents=True, exist_ok=True)
            repair_end(out, repair)
            with (
                open(out, "a", encoding="utf-8") as handle,
                tqdm(total=len(units), initial=finished, unit="sample", desc="evaluate") as progress,
            ):
                for batch in pending:
                    seeds = [generation.derive_seed(seed, ids[q], k) for q, k in batch]
                    completions = generator.generate([prompts[q] for q, _ in batch], seeds)
                    new = [
                        make_record(
                            rows[q],
                            k,
                            completion,
                            style,
                            settings,
                            adapter=adapter and str(adapter),
                            engine=engine,
                            # What this run set out to write: stats.compare tells a finished file from a fragment.
                            planned_questions=len(ids),
                            planned_samples=samples,
                        )
                        for (q, k), completion in zip(batch, completions)
                        if (ids[q], k) not in done
                    ]
                    append_records(handle, new)
                    done.update({(r["id"], r["sample"]): r for r in new})
                    progress.update(len(new))
        return Evaluation(out, [done[(ids[q], k)] for q, k in units], len(ids), decoding)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="recipe name (python recipes/run.py --list) or a recipe YAML file")
    p.add_argument(
        "overrides", nargs="*", default=[], help="section.key=value recipe overrides, e.g. data.source=DIR"
    )
    p.add_argument("--out", required=True, help="JSONL file of graded samples (resumed if it exists)")
    p.add_argument(
        "--adapter",
        help="LoRA adapter: output_dir or checkpoint-N folder, or s3:// URI; RUN/best (a run folder or URI "
        "plus /best) is the run's checkpoint with the highest held-out accuracy",
    )
    p.add_argument("--split", default="test", help="dataset split (default: test)")
    p.add_argument("--questions", type=positive, help="questions drawn from the split (default: all)")
    p.add_argument("--samples", type=positive, default=1, help="completions per question (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seeds the question draw and sampling (default: 0)")
    p.add_argument("--temperature", type=float, help="0 is greedy (default: trainer.temperature)")
    p.add_argument("--top-p", type=float, help="nucleus sampling (default: trainer.top_p)")
    p.add_argument("--max-new-tokens", type=positive, help="default: trainer.max_completion_length")
    p.add_argument("--batch-size", type=positive, default=32, help="completions per generate call")
    p.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="transformers generate or vLLM")
    return p


def evaluate_and_report(args: argparse.Namespace) -> None:
    """The command line's work: evaluate, then print the summary and the command for the counterpart file."""
    recipe = load_recipe(args.recipe, args.overrides)
    merged_from = None if args.adapter else merged_base(recipe.config["model"]["name_or_path"])
    result = evaluate(
        recipe,
        args.out,
        adapter=args.adapter,
        split=args.split,
        questions=args.questions,
        samples=args.samples,
        seed=args.seed,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        engine=args.engine,
    )
    command = counterpart_command(args, result.decoding, result.questions, merged_from)
    print(summary(result.records, result.questions, result.out, command))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    args = build_parser().parse_intermixed_args(argv)
    log_to_stderr()
    return exit_status(
        lambda: evaluate_and_report(args),
        interrupted=f"finished batches are saved in {args.out}; rerun the same command to resume.",
    )


if __name__ == "__main__":
    sys.exit(main())
