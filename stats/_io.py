"""Atomic output files: write to a temporary file next to the target, then `os.replace` it into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from common.files import usual_permissions
from stats.records import InputError

IMAGE_SUFFIXES = (".png", ".pdf", ".svg")
# Every file these commands write carries this mark (a figure's metadata, a Markdown comment): a file without it
# is someone else's, and is never written over.
MARK = "grpo-recipes stats"


def check_output_path(
    path: str | Path, option: str, suffixes: tuple[str, ...], inputs: tuple[str | Path, ...] = ()
) -> Path:
    """Fail before any work when an output path cannot be written.

    Args:
        path: The path the user gave.
        option: The command-line option, for the message (e.g. ``"--plot"``).
        suffixes: Accepted file suffixes, lower case.
        inputs: The command's input files, which an output must never replace.

    Returns:
        The path as a `Path`.

    Raises:
        InputError: Wrong suffix, missing or read-only folder, a folder or read-only file in the way, or an input.
    """
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise InputError(f"{option} {path}: expected a file ending in {', '.join(suffixes)}.")
    if any(Path(i).resolve() == path.resolve() for i in inputs):
        raise InputError(f"{option} {path} is one of the input files; choose another output path.")
    if not path.parent.is_dir():
        raise InputError(f"{option} {path}: folder {path.parent} does not exist; create it first.")
    if path.is_dir():
        raise InputError(
            f"{option} {path} is a folder; give a file path, e.g. {path / ('out' + suffixes[0])}."
        )
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{option} {path} cannot be written (no permission); choose another output path.")
    if _foreign(path):
        raise InputError(
            f"{option} {path} exists and was not written by this command (it has no grpo-recipes mark; neither "
            "have files written by versions before the mark), so it is not replaced: choose another output path, or "
            "move that file away first."
        )
    return path


def _foreign(path: Path) -> bool:
    """A file there that these commands did not write: ``MARK`` is in neither its first nor its last 64 KB (a
    PNG's text chunk comes first, a PDF's information dictionary last)."""
    if not path.is_file():
        return False
    with path.open("rb") as f:
        head = f.read(1 << 16)
        f.seek(max(0, path.stat().st_size - (1 << 16)))
        return MARK.encode() not in head + f.read()


def _write_atomic(path: Path, write: Callable[[str], None]) -> None:
    if _foreign(path):  # also for callers that skipped check_output_path (the notebooks call plot_curves)
        raise InputError(f"{path} exists and was not written by grpo-recipes' stats; choose another path.")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        usual_permissions(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write UTF-8 text so that readers see either the old file or the whole new one."""
    _write_atomic(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def save_figure_atomic(fig, path: str | Path) -> None:
    """Save a matplotlib figure atomically; the format follows the file suffix."""
    path = Path(path)
    kind = path.suffix.lstrip(".").lower()
    mark = {"Software": MARK} if kind == "png" else {"Creator": MARK}  # PDF and SVG name a creator
    _write_atomic(path, lambda tmp: fig.savefig(tmp, format=kind, dpi=120, metadata=mark))
