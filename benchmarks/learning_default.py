"""Does the offline default learn, on every seed? Build, GRPO, evaluate base and adapter, compare; a table per seed.

    python benchmarks/learning_default.py                       # arith_tiny, GRPO seeds 42 1 2
    python benchmarks/learning_default.py --seeds 42 --questions 200 --samples 4 --out /tmp/learning
    python benchmarks/learning_default.py --samples 16 8     # a table per sample count, from the same adapters
    python benchmarks/learning_default.py --samples 8 trainer.max_steps=200   # any recipe override

Prints, per seed: seconds to build the model (first use only), seconds of GRPO, base and tuned accuracy, the
gain, and the primary paired test's p-value (the numbers README.md and tests/test_learning_default.py quote).
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from recipes.builtin import resolve_builtin
from recipes.evaluate import evaluate
from recipes.recipe import load_recipe
from stats.analysis import PRIMARY_TEST
from stats.compare import compare


def run_seed(
    recipe_name: str, seed: int, out: Path, questions: int, samples: list[int], extra: list[str]
) -> list[dict]:
    """One seed end to end; returns its row of the table for each sample count."""
    run_dir = out / f"seed-{seed}"
    overrides = [*extra, f"trainer.output_dir={run_dir}", f"trainer.seed={seed}"]
    start = time.perf_counter()
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--cpu"]
    subprocess.run(
        [*command, "recipes/run.py", recipe_name, *overrides], check=True, cwd=Path(__file__).parent.parent
    )
    grpo = time.perf_counter() - start
    recipe = load_recipe(recipe_name, overrides)
    rows = []
    for n in samples:
        draw = {"questions": questions, "samples": n, "seed": 0}
        base_file, tuned_file = out / f"base-x{n}.jsonl", run_dir / f"tuned-x{n}.jsonl"
        base = evaluate(recipe, base_file, **draw)  # the same file for every seed: generated once
        tuned = evaluate(recipe, tuned_file, adapter=run_dir, **draw)
        comparison = compare(base_file, tuned_file, plot=run_dir / f"comparison-x{n}.png")
        # pass@n, one of all n samples right: where the base model's wider search catches up
        widest = comparison.pass_at_k[-1] if comparison.pass_at_k else None
        rows.append({"seed": seed, "samples": n, "grpo_s": grpo, "base": base.accuracy, "tuned": tuned.accuracy,
                     "p": comparison.tests[PRIMARY_TEST].p_value, "widest": widest})  # fmt: skip
    return rows


def cpu_name() -> str:
    """The CPU's model name (Linux) and the vector kernels torch runs on it (AVX512, AVX2, ...)."""
    import torch

    try:
        info = Path("/proc/cpuinfo").read_text()
        name = next(
            line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")
        )
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, torch kernels {torch.backends.cpu.get_cpu_capability()}"


def _interval(ci95) -> str:
    return "" if ci95 is None else f"[{100 * ci95[0]:+.1f}, {100 * ci95[1]:+.1f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="arith_tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2], help="GRPO seeds (trainer.seed)")
    parser.add_argument("--questions", type=int, help="test questions (default: all 500)")
    parser.add_argument(
        "--samples",
        type=int,
        nargs="+",
        default=[16],
        help="samples per question, one table each (default 16)",
    )
    parser.add_argument("--out", type=Path, help="folder for runs and records (default: a temporary folder)")
    parser.add_argument(
        "overrides", nargs="*", help="recipe overrides for every GRPO run (section.key=value)"
    )
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="learning-default-"))
    start = time.perf_counter()
    resolve_builtin(load_recipe(args.recipe).config["model"]["name_or_path"])
    build = time.perf_counter() - start
    rows = [
        row
        for seed in args.seeds
        for row in run_seed(args.recipe, seed, out, args.questions, args.samples, args.overrides)
    ]
    print(
        f"\n{args.recipe} {' '.join(args.overrides)}: model build {build:.0f} s (0 when cached); runs in {out}"
    )
    # The figures are exact for one kind of CPU: its vector instructions round differently, so sampled tokens part.
    print(f"CPU: {cpu_name()}")
    for n in args.samples:
        print(f"\n{args.questions or 'all'} test questions x {n} samples")
        print(
            f"| GRPO seed | GRPO s | base | tuned | gain (points) | p (sign-flip) | pass@{n} base / tuned [95% CI] |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in (r for r in rows if r["samples"] == n):
            gain, widest = 100 * (r["tuned"] - r["base"]), r["widest"]
            at_n = f"{widest.baseline:.1%} / {widest.tuned:.1%} {_interval(widest.ci95)}" if widest else ""
            print(
                f"| {r['seed']} | {r['grpo_s']:.0f} | {r['base']:.1%} | {r['tuned']:.1%} | {gain:+.1f} "
                f"| {r['p']:.2g} | {at_n} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
