"""Shared test setup: offline Hugging Face libraries, a private model cache, the real GSM8K and MATH files."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Nothing in the suite may reach the Hub; a test that tries fails fast instead of hanging on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRPO_RECIPES_CACHE", str(Path(tempfile.gettempdir()) / "grpo-recipes-test-cache"))
# The suite is CI's CPU suite on every machine: its launched runs pin CPU processes (two on a one-GPU machine would
# share the card) and its numbers are the CPU's. On a machine with a CUDA GPU, `GRPO_RECIPES_GPU_TESTS=1 python -m
# pytest -m gpu` runs the GPU tests instead, with the GPUs visible. Set before anything asks torch about CUDA.
# Under pytest-xdist (the README's `-n 2`), one thread per worker and per process it launches: two workers of torch's
# default thread count on 2 cores thrash, and a launched run would otherwise take accelerate's 2 threads per process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
GPU_TESTS = os.environ.get("GRPO_RECIPES_GPU_TESTS") == "1"
if not GPU_TESTS:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def pytest_configure(config):
    # pytest-xdist hands out files with the most tests first by default, so the files of one long test (the learning
    # default's 5 minutes) went last and one worker ran them alone at the end: 1,026 s where the same tests in the
    # order below take 896 s (the measured file times, scheduled as xdist does). See pytest_collection_modifyitems.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Files with slow tests first, so the many short files even out the two workers at the end. Skip, with the
    reason, the tests of the other kind: GPU tests in the CPU suite, CPU tests in a GPU run."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file's order is kept
    if GPU_TESTS:
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(
                "GRPO_RECIPES_GPU_TESTS=1, but torch sees no CUDA GPU; unset it for the CPU suite"
            )
    for item in items:
        gpu = item.get_closest_marker("gpu") is not None
        if gpu and not GPU_TESTS:
            item.add_marker(
                pytest.mark.skip(reason="a GPU test: GRPO_RECIPES_GPU_TESTS=1 python -m pytest -m gpu")
            )
        elif GPU_TESTS and not gpu:
            item.add_marker(pytest.mark.skip(reason="GRPO_RECIPES_GPU_TESTS=1 runs the GPU tests alone"))


@pytest.fixture(scope="session")
def gsm8k_dir() -> Path:
    """The real GSM8K train/test JSONL folder (``$GSM8K_DATA_DIR``, default ``../shared/data/gsm8k``)."""
    folder = Path(os.environ.get("GSM8K_DATA_DIR", REPO.parent / "shared" / "data" / "gsm8k"))
    if not (folder / "test.jsonl").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"GSM8K data missing at {folder}: CI must provide ../shared/data/gsm8k or GSM8K_DATA_DIR"
            )
        pytest.skip(f"GSM8K data not found at {folder}; set GSM8K_DATA_DIR to the folder holding test.jsonl")
    return folder


@pytest.fixture(scope="session")
def math_dir() -> Path:
    """The real MATH files (``$MATH_DATA_DIR``, default ``math/`` beside the GSM8K folder): MATH-500 and a train sample."""
    gsm8k = Path(os.environ.get("GSM8K_DATA_DIR", REPO.parent / "shared" / "data" / "gsm8k"))
    folder = Path(os.environ.get("MATH_DATA_DIR", gsm8k.parent / "math"))
    if not (folder / "math500_test.jsonl").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"MATH data missing at {folder}: CI must provide ../shared/data/math or MATH_DATA_DIR"
            )
        pytest.skip(
            f"MATH data not found at {folder}; set MATH_DATA_DIR to the folder holding math500_test.jsonl"
        )
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """Folder of the built-in tiny Llama (built once per cache)."""
    from recipes.builtin import resolve_builtin

    return Path(resolve_builtin("builtin:tiny-llama"))


def plugin_env(**extra: str) -> dict[str, str]:
    """``os.environ`` plus ``extra``, with tests/ on PYTHONPATH: a launched run can load the test plug-ins
    (``_plugins``, ``_callbacks_helpers``) by recipe path."""
    path = os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, **extra, "PYTHONPATH": path}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now: a rendezvous port no parallel run collides on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def require_optional(module: str, install: str) -> None:
    """Skip without an optional package, except in CI, which installs every extra the tests need."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed: {install}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI installs it: .ci/run)")
        pytest.skip(message)


def accelerate_launcher(processes: int) -> list[str]:
    """``accelerate launch`` for N CPU processes, on a free rendezvous port so parallel runs never collide.

    accelerate's ``--cpu`` launcher starts one process unless MPI is set up; ``--multi_gpu`` starts N with
    torchrun, and on a machine without a GPU ``recipes/run.py`` joins them as CPU processes over gloo.
    """
    mode = ["--cpu"] if processes == 1 else ["--multi_gpu", "--main_process_port", str(free_port())]
    return [sys.executable, "-m", "accelerate.commands.launch", *mode, "--num_processes", str(processes),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip


@pytest.fixture(params=["s3", "folder"])
def target(request, monkeypatch, tmp_path):
    """(uri, endpoint_url, store) of an empty checkpoint location: a bucket prefix, or a folder (a mounted drive).

    Shared by the resume and lease tests.
    """
    from _callbacks_helpers import s3_bucket

    from callbacks.s3_store import S3Store
    from callbacks.stores import FolderStore

    if request.param == "folder":
        return str(tmp_path / "drive" / "run"), None, FolderStore(tmp_path / "drive" / "run")
    s3 = s3_bucket(monkeypatch)
    return s3.uri("run"), s3.endpoint, S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)


@pytest.fixture
def busy(monkeypatch):
    """A test's grader process busy (``busy_grader``'s state), its remembered answers forgotten before and after."""
    from _rewards_helpers import busy_grader, forget_grader_answers

    from rewards import _symbolic

    forget_grader_answers(monkeypatch)
    yield busy_grader(monkeypatch)
    _symbolic._answer.cache_clear()
