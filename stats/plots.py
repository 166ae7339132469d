"""The comparison figure: both accuracies with 95% intervals, the per-question differences, both models' pass@k
(several samples per question) and, for records that carry subject or level, a forest plot of the paired difference
per group."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from stats._io import save_figure_atomic
from stats.analysis import PRIMARY_TEST, Comparison
from stats.groups import GroupBreakdown
from stats.verdict import format_p

_COLORS = {"improved": "tab:green", "regressed": "tab:red", "unchanged": "tab:gray"}


def _accuracy_panel(ax, c: Comparison) -> None:
    for x, (label, m) in enumerate((("baseline", c.baseline), ("tuned", c.tuned))):
        acc = 100 * m.accuracy
        if m.ci95 is None:
            ax.plot([x], [acc], "o", color="tab:blue")
            note = "CI undefined"
        else:
            err = [[acc - 100 * m.ci95[0]], [100 * m.ci95[1] - acc]]
            ax.errorbar([x], [acc], yerr=err, fmt="o", capsize=8, color="tab:blue")
            note = f"[{100 * m.ci95[0]:.1f}, {100 * m.ci95[1]:.1f}]"
        # Below the point, unless that would put the note on the axis labels (an accuracy near 0%).
        below = acc > 10
        ax.annotate(
            f"{acc:.1f}%\n{note}", (x, acc), textcoords="offset points", xytext=(14, -10 if below else 4),
            va="top" if below else "bottom", fontsize=8,
        )  # fmt: skip
    ax.set_xticks(
        [0, 1],
        [
            f"baseline\n{c.baseline.correct}/{c.baseline.samples}",
            f"tuned\n{c.tuned.correct}/{c.tuned.samples}",
        ],
    )
    ax.set_xlim(-0.5, 1.8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("accuracy (%), 95% CI over questions")
    ax.set_title(f"Accuracy on {len(c.ids)} questions")


def _difference_panel(ax, c: Comparison) -> None:
    order = sorted(range(len(c.diffs)), key=lambda i: (c.diffs[i], c.ids[i]))
    values = [100 * float(c.diffs[i]) for i in order]
    colors = [_COLORS["improved" if v > 0 else "regressed" if v < 0 else "unchanged"] for v in values]
    ax.bar(range(len(values)), values, color=colors, width=0.8)
    ax.scatter(range(len(values)), values, color=colors, s=12, zorder=3)  # makes zero bars visible
    ax.axhline(0, color="black", linewidth=0.8)
    mean = 100 * c.difference
    ax.axhline(mean, color="tab:blue", linestyle="--", label=f"mean {mean:+.1f} points")
    if c.difference_ci95 is not None:
        lo, hi = (100 * v for v in c.difference_ci95)
        ax.axhspan(lo, hi, color="tab:blue", alpha=0.15, label=f"paired 95% CI [{lo:+.1f}, {hi:+.1f}]")
    primary = c.tests[PRIMARY_TEST]
    p = format_p(primary.p_value if primary else None)
    # With other sample counts per file, questions read as changed by noise alone (stats.samples).
    caveat = " (misleading: other --samples per file)" if c.mismatched_samples else ""
    ax.set_title(
        f"Per-question difference: {c.improved} improved, {c.regressed} regressed, {c.unchanged} unchanged"
        f"{caveat}\n{PRIMARY_TEST} p = {p}" + (" (approximate)" if c.mismatched_samples else ""),
        fontsize=10,
    )
    ax.set_xlabel("question (sorted by difference)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # questions are counted: no tick at question 1.5
    ax.set_ylabel("tuned - baseline accuracy (points)")
    ax.set_ylim(-105, 105)
    ax.legend(loc="upper left", fontsize=8)


def _forest_panel(ax, b: GroupBreakdown, overall: float) -> None:
    """One row per group: the difference with its 95% interval; a blank row between subjects and levels."""
    rows, y = [], 0
    for key in ("subject", "level"):
        groups = b.by(key)
        if rows and groups:
            y += 1
        for g in groups:
            rows.append((y, g))
            y += 1
    for y, g in rows:
        diff, ci = 100 * g.comparison.difference, g.comparison.difference_ci95
        if ci is None:  # too few questions or no spread: the point alone, hollow
            ax.plot([diff], [y], "o", mfc="white", color="tab:gray")
        else:
            lo, hi = 100 * ci[0], 100 * ci[1]
            color = "tab:green" if lo > 0 else "tab:red" if hi < 0 else "tab:gray"
            ax.errorbar([diff], [y], xerr=[[diff - lo], [hi - diff]], fmt="o", capsize=4, color=color)
        p = f"p_holm {format_p(g.p_holm)}" if g.p_value is not None else "no p-value"
        ax.annotate(p, (1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=8)
    ax.set_yticks([y for y, _ in rows], [f"{g.label} (n={g.questions})" for _, g in rows])
    ax.set_ylim(rows[-1][0] + 0.5, -0.5)  # first group on top
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvline(100 * overall, color="tab:blue", linestyle="--", label=f"overall {100 * overall:+.1f} points")
    low, high = ax.get_xlim()  # at least +-5 points: all-zero differences would otherwise span +-0.05
    ax.set_xlim(min(low, -5), max(high, 5))
    ax.set_xlabel("tuned - baseline accuracy (points), 95% CI over the group's questions")
    adjusted = (
        f"p_holm = {PRIMARY_TEST} p, Holm-adjusted over the {b.corrected} groups that have one"
        if b.corrected
        else "no group has a p-value (no difference, or too few questions)"
    )
    ax.set_title(f"Per group: paired difference; {adjusted}", fontsize=10)
    ax.legend(loc="best", fontsize=8)


def _pass_at_k_panel(ax, c: Comparison) -> None:
    ks = [r.k for r in c.pass_at_k]
    for label, color, values in (
        ("baseline", "tab:gray", [r.baseline for r in c.pass_at_k]),
        ("tuned", "tab:blue", [r.tuned for r in c.pass_at_k]),
    ):
        ax.plot(ks, [100 * v for v in values], "o-", color=color, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(0, 105)
    ax.set_xlabel("k (samples per question)")
    ax.set_ylabel("pass@k (%)")
    ax.set_title("pass@k: one of k samples right", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)


def draw_comparison(c: Comparison) -> Figure:
    """The comparison figure: accuracies with 95% CIs (left), per-question differences (middle), both models' pass@k
    (right, with several samples per question) and, when the comparison has per-group results, their forest plot
    below them."""
    rows = 0 if c.groups is None else len(c.groups.results)
    widths = [1, 2.2] + ([1.3] if c.pass_at_k else [])
    width = 11 + (3.5 if c.pass_at_k else 0)
    if not rows:
        fig = Figure(figsize=(width, 4.5))
        FigureCanvasAgg(fig)
        top = fig.subplots(1, len(widths), gridspec_kw={"width_ratios": widths})
    else:
        forest_height = 1.2 + 0.3 * (rows + 1)
        fig = Figure(figsize=(width, 4.5 + forest_height))
        FigureCanvasAgg(fig)
        grid = fig.add_gridspec(2, len(widths), width_ratios=widths, height_ratios=[4.5, forest_height])
        top = [fig.add_subplot(grid[0, i]) for i in range(len(widths))]
        _forest_panel(fig.add_subplot(grid[1, :]), c.groups, c.difference)
    _accuracy_panel(top[0], c)
    _difference_panel(top[1], c)
    if c.pass_at_k:
        _pass_at_k_panel(top[2], c)
    fig.tight_layout()
    return fig


def plot_comparison(c: Comparison, path: str | Path) -> None:
    """Draw the comparison figure and write it atomically to ``path`` (format from the suffix).

    Args:
        c: The comparison to draw.
        path: Output image file.
    """
    save_figure_atomic(draw_comparison(c), path)
