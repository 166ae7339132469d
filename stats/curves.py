"""Plot GRPO training curves from a training output folder's trainer_state.json.

    python -m stats.curves OUTPUT_DIR [--out curves.png]
    python -m stats.curves s3://BUCKET/PREFIX/RUN [--endpoint-url URL] [--out curves.png]

Panels: reward mean with a mean +- std band (TRL logs a per-step reward std, not a min/max), held-out
accuracy with its 95% interval beside the training reward (best step, alarms and an early stop marked; see
stats.heldout_history for where it is read), each reward's mean, loss, KL, completion length (mean with the
min-max band TRL logs) and the share of completions clipped at max_completion_length. Vertical lines mark
the checkpoint-<step> folders found in OUTPUT_DIR. A metric that was never logged (KL with beta = 0, say)
leaves its panel saying "not logged". The held-out evaluations are also printed as a table. A run URI
(``s3://``, ``file://``; a run prefix, one of its checkpoint-N, or ``/best``) is fetched first: its newest
complete checkpoint holds the whole log up to its step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from common.errors import exit_status
from stats._io import IMAGE_SUFFIXES, check_output_path, save_figure_atomic
from stats.heldout_curves import draw_heldout
from stats.heldout_history import HeldoutHistory, heldout_table, load_heldout
from stats.records import InputError
from stats.run_source import run_source
from stats.trainer_state import (
    checkpoint_steps,
    load_trainer_state,
    metric_series,
    reward_names,
)


def _not_logged(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"{what}\nnot logged", ha="center", va="center", transform=ax.transAxes, color="gray")


def _line(ax, series: dict[int, float], label: str, **style) -> bool:
    """Plot one series; returns False (plotting nothing) when it is empty."""
    if not series:
        return False
    steps = sorted(series)
    ax.plot(steps, [series[s] for s in steps], marker=".", label=label, **style)
    return True


def _band(ax, low: dict[int, float], high: dict[int, float], label: str, color: str) -> None:
    """Shade between two series at the steps where both were logged."""
    steps = sorted(set(low) & set(high))
    if steps:
        ax.fill_between(
            steps, [low[s] for s in steps], [high[s] for s in steps], alpha=0.2, color=color, label=label
        )


def _panels(history: list[dict], heldout: HeldoutHistory | None) -> list[tuple[str, Callable]]:
    """(title, draw function) per panel; each draw returns the keys it found nothing for."""

    def reward(ax) -> list[str]:
        mean, std = metric_series(history, "reward"), metric_series(history, "reward_std")
        if not _line(ax, mean, "reward mean" + ("" if std else " (reward_std not logged)"), color="tab:blue"):
            return ["reward"]
        both = set(mean) & set(std)
        _band(
            ax,
            {s: mean[s] - std[s] for s in both},
            {s: mean[s] + std[s] for s in both},
            "mean ± std over the step's completions (TRL logs no per-step min/max)",
            "tab:blue",
        )
        return [] if std else ["reward_std"]

    def per_reward(ax) -> list[str]:
        names = reward_names(history)
        drawn = [_line(ax, metric_series(history, f"rewards/{n}/mean"), n) for n in names]
        return [] if any(drawn) else ["rewards/<name>/mean"]

    def single(key: str, label: str):
        return lambda ax: [] if _line(ax, metric_series(history, key), label) else [key]

    def share(key: str, label: str):
        def draw(ax) -> list[str]:
            if not _line(ax, metric_series(history, key), label):
                return [key]
            ax.set_ylim(0, min(1.0, max(0.05, ax.get_ylim()[1])))  # a share from 0: 0.2% -> 0.5% is no surge
            return []

        return draw

    def length(ax) -> list[str]:
        mean = metric_series(history, "completions/mean_length")
        if not _line(ax, mean, "mean", color="tab:purple"):
            return ["completions/mean_length"]
        low, high = (
            metric_series(history, "completions/min_length"),
            metric_series(history, "completions/max_length"),
        )
        # TRL averages each logged metric over the steps since the last log: a band of per-step extremes.
        _band(ax, low, high, "min-max of a step's completions (averaged per log)", "tab:purple")
        return []

    return [
        ("Reward", reward),
        ("Held-out accuracy", lambda ax: draw_heldout(ax, heldout, metric_series(history, "reward"))),
        ("Reward by function (mean, before weights)", per_reward),
        ("Loss", single("loss", "loss")),
        ("KL to the reference model", single("kl", "kl")),
        ("Completion length (tokens)", length),
        ("Share of completions clipped at max length", share("completions/clipped_ratio", "clipped share")),
    ]


def draw_curves(
    history: list[dict], checkpoints: list[int], title: str, heldout: HeldoutHistory | None = None
) -> tuple[Figure, list[str]]:
    """Draw the seven training-curve panels.

    Args:
        history: ``trainer_state["log_history"]``.
        checkpoints: Steps to mark with vertical lines.
        title: Figure title.
        heldout: The run's held-out evaluations; None: that panel says how to turn them on.

    Returns:
        The figure and the keys that had no finite value (their panels say "not logged").
    """
    fig = Figure(figsize=(20, 8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 4, sharex=True).ravel()
    fig.delaxes(axes[-1])  # seven panels in a 2 x 4 grid: the one above the gap needs its own step axis
    axes = axes[:-1]
    axes[3].tick_params(labelbottom=True)
    missing: list[str] = []
    for ax, (panel_title, draw) in zip(axes, _panels(history, heldout)):
        ax.set_title(panel_title, fontsize=10)
        absent = draw(ax)
        missing += absent
        if ax.lines:
            for i, step in enumerate(checkpoints):
                ax.axvline(
                    step, color="gray", linestyle=":", linewidth=1, label="checkpoint" if i == 0 else None
                )
            ax.legend(fontsize=7)
        elif not ax.texts:  # the held-out panel writes its own message
            _not_logged(ax, ", ".join(absent))
    for ax in axes[3:]:
        ax.set_xlabel("step")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig, missing


def plot_curves(
    output_dir: str | Path,
    out: str | Path,
    *,
    label: str | None = None,
    checkpoints: tuple[int, ...] | None = None,
) -> dict:
    """Draw the training curves of one run and write the image atomically.

    Args:
        output_dir: The training output folder.
        out: Output image path (.png, .pdf or .svg).
        label: How to name the run in the title and ``source`` (a run URI fetched into ``output_dir``).
        checkpoints: The steps to mark (a store's checkpoints); default: the checkpoint-N folders in ``output_dir``.

    Returns:
        A summary: ``source`` (the trainer_state.json read), ``entries`` (log_history length),
        ``checkpoints`` (steps), ``missing`` (keys with no finite value; their panels say "not logged"),
        ``heldout`` (the `HeldoutHistory`, or None when no held-out evaluation was logged).

    Raises:
        InputError: No usable trainer_state.json, a log_history without any logged step, or a malformed
            held-out history file.
    """
    source, state = load_trainer_state(output_dir)
    history = [e for e in state["log_history"] if isinstance(e, dict)]
    if not any(isinstance(e.get("step"), int) for e in history):
        raise InputError(
            f"{source}: log_history has no logged step yet (is logging_steps larger than the run?)."
        )
    checkpoints = list(checkpoint_steps(output_dir) if checkpoints is None else checkpoints)
    if label:  # the URI, and the file of the fetched checkpoint that was read
        source = f"{label}: {source.relative_to(Path(output_dir).parent)}"
    heldout = load_heldout(output_dir, history, str(source))
    fig, missing = draw_curves(history, checkpoints, f"Training curves: {source}", heldout)
    save_figure_atomic(fig, out)
    return {
        "source": str(source),
        "entries": len(history),
        "checkpoints": checkpoints,
        "missing": missing,
        "heldout": heldout,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (2 on bad input, 1 when the image cannot be written)."""
    parser = argparse.ArgumentParser(prog="python -m stats.curves", description=__doc__.splitlines()[0])
    parser.add_argument(
        "output_dir",
        help="training output folder (holds checkpoint-*/ or trainer_state.json), or a run's s3:// or file:// URI",
    )
    parser.add_argument(
        "--out",
        help="image to write (.png, .pdf, .svg; default OUTPUT_DIR/curves.png, for a checkpoint-N folder "
        "curves-checkpoint-N.png beside it, for a URI curves-<run>[-checkpoint-N|-best].png in the current folder)",
    )
    parser.add_argument("--endpoint-url", help="S3-compatible endpoint for an s3:// URI (MinIO, R2)")
    args = parser.parse_args(argv)
    out = args.out
    try:
        source = run_source(args.output_dir, args.endpoint_url)
        out = check_output_path(args.out, "--out", IMAGE_SUFFIXES) if args.out else source.default_out
        summary = plot_curves(source.folder, out, label=source.label, checkpoints=source.checkpoints)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write {out}: {err}", file=sys.stderr)
        return 1
    # exit_status: a reader that stops early (``| head``) ends the command quietly, not in a traceback.
    return exit_status(lambda: _say(summary, out))


def _say(summary: dict, out: Path) -> None:
    marks = ", ".join(map(str, summary["checkpoints"])) or "none found"
    print(f"read {summary['source']} ({summary['entries']} log entries); checkpoints at steps: {marks}")
    if summary["missing"]:
        print(f"not logged (panels say so): {', '.join(summary['missing'])}")
    print(heldout_table(summary["heldout"]))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
