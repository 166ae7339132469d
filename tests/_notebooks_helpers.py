"""Shared pieces of the notebook tests: reading notebooks, a kernel on this interpreter, papermill runs, S3."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
from conftest import REPO

NOTEBOOKS = REPO / "notebooks"
NAMES = ("1_baseline", "2_train", "3_evaluate_checkpoint", "4_compare")
REPO_URL = "https://github.com/grpo-recipes/grpo-recipes"
KERNEL = "grpo-recipes-tests"


def read(name: str):
    """The notebook ``notebooks/<name>.ipynb``."""
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def code_cells(nb) -> list:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def install_kernelspec(folder: Path) -> Path:
    """A kernelspec named :data:`KERNEL` running ipykernel on this interpreter; returns the JUPYTER_PATH entry.

    The kernel then imports the packages of the environment running the tests, whatever ``python3`` kernel
    (or ``python`` on PATH) the machine has.
    """
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    return folder


def papermill_command(name: str, output: Path, parameters: dict, cwd: Path) -> list[str]:
    """``python -m papermill`` executing a notebook with parameters, as CI or a user would run it."""
    return [
        sys.executable, "-m", "papermill", str(NOTEBOOKS / f"{name}.ipynb"), str(output),
        "--kernel", KERNEL, "--cwd", str(cwd), "--no-progress-bar", "-y", json.dumps(parameters),
    ]  # fmt: skip


def execute(name: str, output: Path, parameters: dict, cwd: Path):
    """Execute a notebook top to bottom in a fresh kernel; returns the executed notebook."""
    import papermill

    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(output),
        parameters=parameters,
        kernel_name=KERNEL,
        cwd=str(cwd),
        progress_bar=False,
        execution_timeout=600,
    )
    return nbformat.read(output, as_version=4)


def text_of(nb) -> str:
    """Everything the notebook's cells printed (stdout, stderr, plain-text results), in order."""
    parts = []
    for cell in code_cells(nb):
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif "data" in out:
                parts.append(str(out.data.get("text/plain", "")))
            elif out.output_type == "error":
                parts.append("\n".join(out.traceback))
    return "\n".join(parts)


def displayed(nb, mime: str) -> list:
    """The ``mime`` payloads (e.g. image/png) the notebook displayed."""
    return [
        out.data[mime]
        for cell in code_cells(nb)
        for out in cell.get("outputs", [])
        if mime in out.get("data", {})
    ]
