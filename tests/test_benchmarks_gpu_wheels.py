"""benchmarks/gpu_wheels.py: bitsandbytes' wheel loses the libraries a CUDA 13 machine cannot use, and pip still
installs it offline into a target folder, as the GPU machine's command does. (Downloading is not tested here.)"""

from __future__ import annotations

import subprocess
import sys
import zipfile

from benchmarks.gpu_wheels import CARRIED, pinned, trim_wheel

LIBS = ["cpu", "cuda118", "cuda128", "cuda130", "cuda132", "rocm72", "xpu"]


def make_wheel(folder) -> tuple:
    wheel = folder / "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"
    files = {"bitsandbytes/__init__.py": b"VERSION = 1\n"}
    files |= {f"bitsandbytes/libbitsandbytes_{lib}.so": lib.encode() * 100 for lib in LIBS}
    files |= {
        "bitsandbytes-0.50.2.dist-info/METADATA": b"Metadata-Version: 2.1\nName: bitsandbytes\nVersion: 0.50.2\n",
        "bitsandbytes-0.50.2.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-manylinux_2_24_x86_64\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "bitsandbytes-0.50.2.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as out:
        for name, data in files.items():
            out.writestr(name, data)
        out.writestr("bitsandbytes-0.50.2.dist-info/RECORD", record)
    return wheel, files


def test_bitsandbytes_keeps_its_cuda_13_and_cpu_libraries_and_installs_offline(tmp_path):
    wheel, files = make_wheel(tmp_path)
    dropped = trim_wheel(wheel)
    assert sorted(dropped) == sorted(f"bitsandbytes/libbitsandbytes_{lib}.so" for lib in LIBS[1:3] + LIBS[5:])
    with zipfile.ZipFile(wheel) as trimmed:
        record = trimmed.read("bitsandbytes-0.50.2.dist-info/RECORD").decode()
        assert (
            trimmed.read("bitsandbytes/libbitsandbytes_cuda130.so")
            == files["bitsandbytes/libbitsandbytes_cuda130.so"]
        )
        assert set(trimmed.namelist()) == (set(files) - set(dropped)) | {
            "bitsandbytes-0.50.2.dist-info/RECORD"
        }
    assert "cuda128" not in record and "libbitsandbytes_cuda132.so,," in record
    assert trim_wheel(wheel) == []  # a trimmed wheel is left as it is
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
         str(target), str(wheel)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (target / "bitsandbytes").glob("*.so")) == [
        "libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so", "libbitsandbytes_cuda132.so"
    ]  # fmt: skip


def test_every_carried_package_is_installed_here_so_its_version_can_be_pinned():
    """A misspelt or dropped name would stop the download after the machine was asked for."""
    pins = dict(p.split("==") for p in pinned())  # importlib.metadata raises for a package not installed
    assert list(pins) == list(CARRIED) and all(pins.values())
