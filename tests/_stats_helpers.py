"""Fixtures for the stats tests: evaluation records and trainer states written to temporary files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_records(
    path: Path, outcomes: dict[str, list[bool]], *, model: str = "m", extra: dict | None = None
) -> Path:
    """Write one JSONL record per sample: ``outcomes[qid][k]`` is whether sample k of question qid is right.

    ``extra``: more keys for every record (decoding settings, say).
    """
    lines = []
    for i, (qid, samples) in enumerate(outcomes.items()):
        for k, correct in enumerate(samples):
            pred = str(i) if correct else str(-i - 1)
            lines.append(
                json.dumps(
                    {
                        "id": qid,
                        "sample": k,
                        "correct": correct,
                        "format_ok": True,
                        "pred": pred,
                        "gold": str(i),
                        "question": f"Question {qid}: what is {i}?",
                        "completion": f"{model} sample {k} of {qid}: the answer is {pred}",
                        "model": model,
                        **(extra or {}),
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def outcomes_from_counts(
    counts: list[int], samples: int | list[int], prefix: str = "q"
) -> dict[str, list[bool]]:
    """Question ``q00``, ``q01``, ... with ``counts[i]`` correct out of ``samples`` (first ones correct)."""
    sizes = samples if isinstance(samples, list) else [samples] * len(counts)
    return {f"{prefix}{i:02d}": [k < c for k in range(n)] for i, (c, n) in enumerate(zip(counts, sizes))}


def run_compare(capsys, *argv) -> tuple[int, str, str]:
    """Call ``stats.compare``'s main in this process: exit status, stdout, stderr."""
    from stats.compare import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(module: str, *args: str | Path) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` from the repository root and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_trainer_state(
    path: Path, steps: list[int], *, global_step: int | None = None, kl: bool = True
) -> Path:
    """A GRPO-like trainer_state.json with NaN and None gaps; ``kl=False`` leaves KL out entirely."""
    history = []
    for step in steps:
        entry = {
            "step": step,
            "epoch": step / 100,
            "loss": 0.01 * step,
            "reward": 1.0 + step / 10,
            "reward_std": 0.5,
            "rewards/correctness/mean": step / 10,
            "rewards/format/mean": 1.0,
            "completions/mean_length": 100.0 + step,
            "completions/min_length": 50.0,
            "completions/max_length": 200.0 + step,
            "completions/clipped_ratio": 0.1,
        }
        if kl:
            entry["kl"] = 0.001 * step
        history.append(entry)
    history[1]["reward"] = math.nan  # json writes NaN; TRL writes None for all-NaN metrics
    history[2]["rewards/format/mean"] = None
    del history[0]["completions/clipped_ratio"]
    history.append({"step": steps[-1], "train_runtime": 12.5, "train_loss": 0.3})
    state = {"global_step": global_step if global_step is not None else steps[-1], "log_history": history}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state), encoding="utf-8")
    return path


def clustered_wilson(count: float, n: float, questions: int, confidence: float = 0.95) -> tuple[float, float]:
    """statsmodels' Wilson interval at Student's t critical value with questions - 1 degrees of freedom (what
    stats.intervals uses with several samples per question): Wilson at the normal level whose quantile is that t's."""
    from scipy import stats as sps
    from statsmodels.stats.proportion import proportion_confint

    alpha = 2 * sps.norm.sf(sps.t.ppf(0.5 + confidence / 2, questions - 1))
    return proportion_confint(count, n, alpha=alpha, method="wilson")
