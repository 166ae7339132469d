"""The Python packages a lent GPU machine lacks, as wheels for its Python 3.12, into .whl/ (git-ignored):

    python benchmarks/gpu_wheels.py            # here, where pip reaches the package registry (about a minute)

The GPU machine has torch, accelerate's dependencies, pytest and no network; it lacks TRL, datasets,
math-verify and DeepSpeed and holds older transformers and peft. This downloads the versions this environment
runs (the ones the test suite passed with), builds DeepSpeed's wheel from its source release, and keeps only the
CUDA 13 and CPU libraries of bitsandbytes (its wheel carries every CUDA and ROCm build: 43 MB of the 64 MiB a
device call may carry). On the GPU machine the command then starts with (docs/PERFORMANCE.md)

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / ".whl"
# What the project imports that the machine's image lacks or holds at another version, with what those need.
CARRIED = (
    "trl", "transformers", "peft", "accelerate", "datasets", "dill", "multiprocess", "math-verify",
    "latex2sympy2_extended", "antlr4-python3-runtime", "bitsandbytes", "deepspeed", "hjson", "pydantic",
    "pydantic-core", "annotated-types", "typing-inspection",
)  # fmt: skip
BUILT_HERE = ("deepspeed",)  # a source release only: pip builds its (pure-Python) wheel
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"] + [
    f"--platform={tag}"
    for tag in (
        "manylinux_2_28_x86_64",
        "manylinux_2_24_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
    )
]
# bitsandbytes' native libraries; the machine runs CUDA 13 (torch +cu130), and the CPU library is its fallback.
NATIVE = re.compile(r"libbitsandbytes_\w+\.so$")
KEPT_NATIVE = re.compile(r"libbitsandbytes_(cuda13\d|cpu)\.so$")
# A device call carries the working tree and its carried paths, 64 MiB in all; leave the tree room.
LIMIT_BYTES = 56 << 20


def trim_wheel(wheel: Path) -> list[str]:
    """Rewrite ``wheel`` without the bitsandbytes libraries the machine cannot use; returns the dropped names.

    Their RECORD lines go too, so that pip installs what the wheel says it holds.
    """
    with zipfile.ZipFile(wheel) as source:
        names = source.namelist()
        dropped = [n for n in names if NATIVE.search(n) and not KEPT_NATIVE.search(n)]
        if not dropped:
            return []
        trimmed = wheel.with_name(wheel.name + ".trimmed")
        with zipfile.ZipFile(trimmed, "w", zipfile.ZIP_DEFLATED) as out:
            for name in names:
                if name in dropped:
                    continue
                data = source.read(name)
                if name.endswith(".dist-info/RECORD"):
                    lines = data.decode().splitlines(keepends=True)
                    data = "".join(line for line in lines if line.split(",")[0] not in dropped).encode()
                out.writestr(source.getinfo(name), data)
    trimmed.replace(wheel)
    return dropped


def pinned() -> list[str]:
    """``name==version`` for every carried package, at the version this environment runs."""
    return [f"{name}=={version(name)}" for name in CARRIED]


def fetch(folder: Path) -> None:
    """Download (or build) every carried wheel into ``folder``."""
    pip = [sys.executable, "-m", "pip"]
    wanted = [p for p in pinned() if p.split("==")[0] not in BUILT_HERE]
    built = [p for p in pinned() if p.split("==")[0] in BUILT_HERE]
    subprocess.run([*pip, "download", "-q", "--no-deps", *PLATFORM, "-d", str(folder), *wanted], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(folder), *built], check=True)


def tree_bytes() -> int:
    """Bytes of the files git tracks: what a device call carries besides .whl."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return sum((REPO / n).stat().st_size for n in listed.decode().split("\0") if n and (REPO / n).is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    if FOLDER.exists() and any(not p.name.endswith(".whl") for p in FOLDER.iterdir()):
        print(f"error: {FOLDER} holds files other than wheels; move them away first.", file=sys.stderr)
        return 2
    partial = FOLDER.with_name(".whl.partial")  # the old .whl stays until the new one is complete
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    fetch(partial)
    for wheel in partial.glob("bitsandbytes-*.whl"):
        print(f"{wheel.name}: dropped {len(trim_wheel(wheel))} libraries for other CUDA and ROCm versions")
    wheels = sorted(partial.glob("*.whl"))
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:>7.2f} MiB  {wheel.name}")
    total, tree = sum(w.stat().st_size for w in wheels), tree_bytes()
    print(f"{total / 2**20:>7.2f} MiB  in {len(wheels)} wheels, beside a {tree / 2**20:.1f} MiB working tree")
    if total + tree > LIMIT_BYTES:
        print(
            f"error: over {LIMIT_BYTES >> 20} MiB with the tree: a device call would refuse it",
            file=sys.stderr,
        )
        return 1
    shutil.rmtree(FOLDER, ignore_errors=True)
    partial.rename(FOLDER)
    print(f"{FOLDER}: carry it (carry: ['.whl']) and install it first thing (docs/PERFORMANCE.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
