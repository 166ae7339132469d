"""The GPU measurements of docs/PERFORMANCE.md, inside a time budget, a part at a time:

    python benchmarks/gpu_tables.py OUT_DIR --budget 530 tests llama_fast   # a lent GPU session's first command
    python benchmarks/gpu_tables.py OUT_DIR qlora qwen_small tests           # several parts, no budget
    python benchmarks/gpu_tables.py --list                                   # the parts, their rows, estimates

A lent GPU machine runs one command of at most 10 minutes, out of 15 minutes of device time a session (starts
included), so the measurements come in parts that fit, run in the order given. Each part keeps its output in
OUT_DIR/PART.txt and echoes it; OUT_DIR/summary.txt gives the machine and package versions, each row's status
and seconds, and the command that runs what the budget left out. A row that would start with less than
``MIN_ROW_S`` left is not started; one still running when the budget ends is stopped (with its process group),
its output so far kept. Random weights of the real shapes, each built once per command and shared by the
part's rows: nothing is downloaded, and every completion runs to its full length, the case the floor describes.

Exit status: 0 when every row that ran passed (rows left out by the budget included), 1 when a row failed,
2 on bad arguments or no CUDA GPU.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks.gpu_parts import PARTS, REPO, Row, build_command, command

# Under this many seconds left a row is not started: loading an 8B model alone takes about as long.
MIN_ROW_S = 45


def run_streamed(argv: list[str], env: dict, log, seconds: float) -> tuple[int | None, float]:
    """Run ``argv``, copying its output to ``log`` and stdout as it comes; stop its whole process group after
    ``seconds``. Returns (exit code, or None when stopped; seconds it ran)."""
    start = time.monotonic()
    # A session of its own: a launcher's or pytest's children are stopped with it.
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )

    def copy() -> None:
        for line in iter(process.stdout.readline, b""):
            text = line.decode(errors="replace")
            log.write(text)
            sys.stdout.write(text)
        log.flush()

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    try:
        code = process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        code = None
    reader.join(timeout=10)
    return code, time.monotonic() - start


class Session:
    """The rows of one command: their order, the budget, the random-weight folders, and the summary kept in
    ``out/summary.txt`` after every row (a command killed from outside still leaves what it measured)."""

    def __init__(
        self, out: Path, budget: float | None, work: Path, header: list[str], min_row_s: float = MIN_ROW_S
    ):
        self.out, self.budget, self.work, self.header = out, budget, work, header
        self.min_row_s = min_row_s
        self.start = time.monotonic()
        self.lines: list[str] = []
        self.left_out: list[str] = []
        self.failed = False
        self.models: dict[str, Path] = {}

    def remaining(self) -> float:
        return float("inf") if self.budget is None else self.budget - (time.monotonic() - self.start)

    def run_part(self, part: str, rows: list[Row]) -> None:
        with open(self.out / f"{part}.txt", "a", encoding="utf-8") as log:
            for row in rows:
                if self.remaining() < self.min_row_s:
                    self._leave_out(part)
                    self._note(part, row.label, "not started: the budget is spent", 0.0)
                    continue
                banner = f"== {row.label}\n"
                log.write(banner)
                sys.stdout.write(banner)
                self._run_row(part, row, log)

    def _run_row(self, part: str, row: Row, log) -> None:
        spent = 0.0
        if row.shape and row.shape not in self.models:
            folder = self.work / row.shape.replace("/", "--")
            code, spent = run_streamed(
                build_command(row.shape, folder), dict(os.environ), log, self.remaining()
            )
            if code != 0:
                return self._end(part, row.label, code, spent, f"building {row.shape}")
            self.models[row.shape] = folder
        argv = command(row.argv, self.models.get(row.shape))
        log.write(f"$ {shlex.join(argv)}\n")
        code, seconds = run_streamed(argv, os.environ | row.env, log, self.remaining())
        self._end(part, row.label, code, spent + seconds, None)

    def _end(self, part: str, label: str, code: int | None, seconds: float, doing: str | None) -> None:
        if code is None:
            status = f"stopped at the budget{' while ' + doing if doing else ''}"
            self._leave_out(part)
        elif code:
            status, self.failed = f"failed (exit {code}{', ' + doing if doing else ''})", True
        else:
            status = "done"
        self._note(part, label, status, seconds)

    def _leave_out(self, part: str) -> None:
        if part not in self.left_out:
            self.left_out.append(part)

    def _note(self, part: str, label: str, status: str, seconds: float) -> None:
        self.lines.append(f"{part:<11} {seconds:>7.0f} s  {status:<34} {label}")
        self.write_summary()

    def write_summary(self) -> None:
        from recipes.atomic import write_text_atomically

        text = [*self.header, "", f"{'part':<11} {'seconds':>9}  {'status':<34} row", *self.lines]
        if self.left_out:
            text += [
                "",
                f"left out by the budget: python benchmarks/gpu_tables.py OUT_DIR {' '.join(self.left_out)}",
            ]
        write_text_atomically(self.out / "summary.txt", "\n".join(text) + "\n")


def environment() -> list[str]:
    """The machine and the versions that produced the tables."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def have(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} missing"

    names = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes", "deepspeed")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA GPU"
    return [
        f"GPU: {gpu}; Python {sys.version.split()[0]}; CUDA {torch.version.cuda}",
        ", ".join(map(have, names)),
    ]


def listing() -> str:
    lines = []
    for part, rows in PARTS.items():
        lines.append(f"{part} (about {sum(r.estimate_s for r in rows) / 60:.0f} min on an H100):")
        lines += [f"  ~{r.estimate_s:>3} s  {r.label}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", help="a new or empty folder for PART.txt and summary.txt")
    parser.add_argument(
        "parts", nargs="*", help=f"parts to run, in this order (default: all): {' '.join(PARTS)}"
    )
    parser.add_argument(
        "--budget", type=float, help="seconds for the whole command; rows that do not fit wait"
    )
    parser.add_argument("--list", action="store_true", help="list the parts and their rows, and exit")
    args = parser.parse_intermixed_args(argv)  # OUT_DIR --budget 480 llama: options between positionals
    if args.list:
        print(listing())
        return 0
    if not args.out_dir:
        parser.error("name an OUT_DIR (or --list)")
    from common.suggestions import did_you_mean

    for part in args.parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}.{did_you_mean(part, PARTS)} The parts: {' '.join(PARTS)}")
    if args.budget is not None and args.budget < MIN_ROW_S:
        parser.error(f"--budget {args.budget:g}: expected at least {MIN_ROW_S} seconds, one row's start")
    out = Path(args.out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        parser.error(f"{out} is not a new or empty folder: name another, or move its files away")
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible: these are GPU measurements", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu_tables_") as work:
        session = Session(out, args.budget, Path(work), environment())
        for part in args.parts or list(PARTS):
            session.run_part(part, PARTS[part])
    print((out / "summary.txt").read_text(encoding="utf-8"))
    return 1 if session.failed else 0


if __name__ == "__main__":
    sys.exit(main())
