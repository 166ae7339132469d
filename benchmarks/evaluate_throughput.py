"""Evaluation throughput (samples per second): batched generation against one prompt per generate call.

    python benchmarks/evaluate_throughput.py                       # gsm8k_tiny on CPU, about a minute
    python benchmarks/evaluate_throughput.py gsm8k_qwen_small --questions 32 --samples 4 --max-new-tokens 256 \\
        --batch-sizes 1,16,64,128 --engines hf,vllm
    python benchmarks/evaluate_throughput.py arith_tiny --adapter outputs/arith_tiny --batch-sizes 64  # tuned

Every row generates the same questions x samples (drawn as recipes/evaluate.py draws them, same seeds) with
one engine and batch size; batch size 1 is the loop common tutorials write, one prompt per ``generate``
call. Completions stop at EOS, so rows can differ in tokens generated: the table shows tokens per second
too. vLLM rows need vLLM installed (default engines: hf, plus vllm when it is installed). Timing excludes
model loading and one warm-up batch per engine. With ``--adapter`` the tuned model is measured, generating as
evaluate.py does (merged when ``lora.merged_generation`` says so; compare with ``lora.merged_generation=false``).
With ``model.compiled_generation=true`` each batch size is first compiled on the longest prompts, outside the
timing; a last, smaller batch still compiles inside it (choose questions x samples a multiple of the batch size).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.errors import exit_status
from recipes.compiled_generation import use_compiled_generation
from recipes.data import load_split
from recipes.evaluation.generation import Decoding, derive_seed, load_generator, prompt_token_ids
from recipes.evaluation.questions import eval_data, select_questions
from recipes.merged_lora import use_merged_generation
from recipes.recipe import load_recipe


def time_engine(
    generator, prompts: list[list[int]], ids: list[str], samples: int, batch_size: int, seed: int
):
    """(seconds, completions, tokens generated) for every question x sample in batches of ``batch_size``."""
    from tqdm import tqdm

    units = [(q, k) for q in range(len(prompts)) for k in range(samples)]
    tokens = 0
    start = time.perf_counter()
    for i in tqdm(range(0, len(units), batch_size), desc=f"batch size {batch_size}", leave=False):
        batch = units[i : i + batch_size]
        completions = generator.generate(
            [prompts[q] for q, _ in batch], [derive_seed(seed, ids[q], k) for q, k in batch]
        )
        tokens += sum(c.n_tokens for c in completions)
    return time.perf_counter() - start, len(units), tokens


def release(generator) -> None:
    """Free an engine's GPU memory before the next one loads (vLLM reserves most of the GPU)."""
    import torch

    del generator
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run(args) -> list[dict]:
    """One result row per engine and batch size."""
    recipe = load_recipe(args.recipe, args.overrides)
    data = eval_data(recipe.config["data"], args.split)
    rows = load_split(data, split=args.split)
    rows = rows.select(select_questions(rows["id"], args.questions, args.seed)).to_dict()
    decoding = Decoding(args.temperature, 1.0, args.max_new_tokens)
    results = []
    for engine in args.engines:
        merged = engine == "hf" and args.adapter is not None and use_merged_generation(recipe)
        compiled = engine == "hf" and use_compiled_generation(recipe)
        generator, tokenizer = load_generator(
            engine,
            recipe.config["model"],
            args.adapter,
            decoding,
            seed=args.seed,
            merged=merged,
            compiled=compiled,
        )
        prompts = prompt_token_ids(tokenizer, rows["prompt"])
        if engine == "hf":
            generator.size_cache(prompts)
        if not compiled:  # compiled, each batch size gets its own warm-up below
            generator.generate(prompts[:2], [0, 1])  # warm-up: kernels, caches, lazy allocations
        for batch_size in args.batch_sizes:
            if compiled:  # compile this batch size with the longest cache first, outside the timing
                generator.generate([max(prompts, key=len)] * batch_size, list(range(batch_size)))
            seconds, completions, tokens = time_engine(
                generator, prompts, rows["id"], args.samples, batch_size, args.seed
            )
            results.append(
                {
                    "engine": engine,
                    "batch_size": batch_size,
                    "completions": completions,
                    "seconds": seconds,
                    "tokens": tokens,
                }
            )
        release(generator)
    return results


def format_table(results: list[dict]) -> str:
    """The results as a text table, with speed-ups against the first row (one prompt at a time, when asked)."""
    reference = results[0]["completions"] / results[0]["seconds"]
    lines = [
        f"{'engine':<7}{'batch':>6}{'samples':>9}{'seconds':>9}{'samples/s':>11}{'tokens/s':>10}{'speed-up':>10}"
    ]
    for r in results:
        rate = r["completions"] / r["seconds"]
        lines.append(
            f"{r['engine']:<7}{r['batch_size']:>6}{r['completions']:>9}{r['seconds']:>9.2f}{rate:>11.2f}"
            f"{r['tokens'] / r['seconds']:>10.1f}{rate / reference:>9.1f}x"
        )
    return "\n".join(lines)


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return sizes


def _engines(text: str) -> list[str]:
    engines = [part.strip() for part in text.split(",") if part.strip()]
    unknown = set(engines) - {"hf", "vllm"}
    if not engines or unknown:
        raise argparse.ArgumentTypeError(f"engines are hf and vllm, got {text!r}")
    return engines


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    default_engines = "hf,vllm" if importlib.util.find_spec("vllm") else "hf"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "recipe", nargs="?", default="gsm8k_tiny", help="recipe name or YAML path (default: gsm8k_tiny)"
    )
    p.add_argument("overrides", nargs="*", help="section.key=value recipe overrides")
    p.add_argument("--split", default="test")
    p.add_argument("--questions", type=int, default=8)
    p.add_argument("--samples", type=int, default=4, help="completions per question")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--adapter", type=Path, help="a local LoRA adapter folder: measure the tuned model")
    p.add_argument("--batch-sizes", type=_sizes, default=[1, 8, 32], help="comma-separated (default: 1,8,32)")
    p.add_argument(
        "--engines", type=_engines, default=_engines(default_engines), help=f"default: {default_engines}"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    args = build_parser().parse_intermixed_args(argv)
    return exit_status(lambda: print(format_table(run(args))))


if __name__ == "__main__":
    sys.exit(main())
