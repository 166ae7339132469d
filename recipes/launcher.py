"""What `accelerate launch` decided, checked against the recipe before anything is built.

    accelerate launch -q --config_file recipes/accelerate/deepspeed_zero2_offload.yaml recipes/run.py gsm8k_tiny

accelerate hands its config to the script as environment variables (ACCELERATE_MIXED_PRECISION,
ACCELERATE_USE_FSDP, FSDP_STATE_DICT_TYPE, ...). Where they disagree with the recipe or with this machine, a run
would fail deep inside DeepSpeed, or quietly do something else (FSDP turning into DDP, no adapter saved); here it
is reconciled and said, or refused with the fix. And a run ends with the launcher that started it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from recipes.layers import RecipeError

logger = logging.getLogger(__name__)


def first_process() -> bool:
    """Whether this is a launch's first process (``RANK`` 0, or no launcher): the one that says a thing once per run
    where every process decides it."""
    return os.environ.get("RANK", "0") == "0"


def recipe_precision(trainer: dict) -> str:
    """The mixed precision a recipe trains in, in accelerate's words: ``bf16``, ``fp16`` or ``no``."""
    return "bf16" if trainer["bf16"] else "fp16" if trainer["fp16"] else "no"


def reconcile_precision(recipe) -> None:
    """Make accelerate's mixed precision the recipe's (``trainer.bf16`` / ``trainer.fp16``), and say so.

    An accelerate config is shared by many recipes, so its ``mixed_precision`` cannot know that a recipe trains
    in float32 (every CPU recipe); DeepSpeed would then refuse the run ("ds bf16.enabled=True vs hf bf16=False").
    The recipe is the finer-grained choice, so it wins. Call before any accelerate state or GRPOConfig exists.
    """
    launched = os.environ.get("ACCELERATE_MIXED_PRECISION")
    wanted = recipe_precision(recipe.config["trainer"])
    if launched is None or launched == wanted:
        return
    trainer = recipe.config["trainer"]
    # Once per run, not per rank; and not for accelerate's default "no" (a plain `accelerate launch`), which the
    # Trainer itself overrides with the recipe's bf16/fp16 (DeepSpeed alone would refuse it).
    chose = launched != "no" and first_process()
    say = logger.warning if chose else logger.debug
    say(
        "The accelerate config asks for mixed_precision=%s, but recipe %s has trainer.bf16=%s trainer.fp16=%s: "
        "training with mixed_precision=%s (the recipe's). To train in %s, set it in the recipe instead.",
        launched, recipe.name, str(trainer["bf16"]).lower(), str(trainer["fp16"]).lower(), wanted, launched,
    )  # fmt: skip
    os.environ["ACCELERATE_MIXED_PRECISION"] = wanted


def sharding_engine(trainer: dict) -> str | None:
    """The engine that holds only shards of every weight on each process: ``"FSDP"`` (the accelerate config or
    ``trainer.fsdp``), ``"DeepSpeed ZeRO-3"``, or None. Merged and compiled generation need weights held whole."""
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" or trainer.get("fsdp"):
        return "FSDP"
    return "DeepSpeed ZeRO-3" if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3" else None


def check_local_processes(gpus: int, cpus: int) -> None:
    """Refuse more processes on this machine than it has GPUs (each would fail to find its own card deep in
    CUDA); say it when a CPU launch starts more processes than the machine has cores (it runs, but slowly).

    Raises:
        RecipeError: a GPU machine, and the launcher started more processes here than it has GPUs.
    """
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if gpus == 1 and local > 1 and visible.strip() and "," not in visible:
        # A scheduler may give each process its own card (SLURM's --gpus-per-task=1); nothing here tells that
        # from every process being given the same one.
        if first_process():
            logger.warning(
                "This launch starts %d processes on this machine and each sees one GPU (CUDA_VISIBLE_DEVICES=%s): "
                "right when a scheduler gave each its own; if they share one card, launch with --num_processes 1.",
                local, visible,
            )  # fmt: skip
        return
    if gpus and local > gpus:
        raise RecipeError(
            f"This launch starts {local} processes on this machine, which has {gpus} GPU{'s' * (gpus > 1)}: one "
            f"process per GPU. Launch with --num_processes {gpus} (it overrides the accelerate config's "
            "num_processes), or set CUDA_VISIBLE_DEVICES to the GPUs you mean."
        )
    if not gpus and local > cpus and first_process():
        logger.warning(
            "This launch starts %d CPU processes on a machine with %d cores: they share the cores, so each step "
            "is slower than with --num_processes %d.",
            local, cpus, cpus,
        )  # fmt: skip


def check_engine(cuda_available: bool) -> None:
    """Refuse an FSDP launch that could not save an adapter, or that would silently train as DDP.

    Raises:
        RecipeError: FSDP on a machine without a GPU, or FSDP with a sharded state dict.
    """
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true":
        return
    if not cuda_available:
        raise RecipeError(
            "FSDP needs GPUs: accelerate turns FSDP on only for GPU processes, so on this CPU machine the run "
            "would train as plain DDP. Launch without the FSDP config (accelerate launch --multi_gpu "
            "--num_processes N recipes/run.py ... runs N CPU processes over gloo), or run on GPUs."
        )
    state_dict = os.environ.get("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT")
    if state_dict != "FULL_STATE_DICT":
        raise RecipeError(
            f"fsdp_state_dict_type: {state_dict} in the accelerate config saves no adapter (transformers writes "
            "only per-rank model shards, and the final adapter folder would be empty). Set "
            "fsdp_state_dict_type: FULL_STATE_DICT, as recipes/accelerate/fsdp.yaml does: a LoRA adapter is "
            "small, and it is gathered on the main process only."
        )


def say_deepspeed_build() -> None:
    """Say, once per run, that DeepSpeed is about to compile its C++ ops when this machine has not built them yet.

    DeepSpeed builds CPU Adam (the optimizer offload's) and its CPU communication op on first use, one to two
    minutes on a small machine without a line of output, then caches them under ``TORCH_EXTENSIONS_DIR``
    (default ``~/.cache/torch_extensions``). An install built with them (``DS_BUILD_CPU_ADAM=1``) skips it.
    """
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() != "true" or not first_process():
        return
    import torch

    # CPU Adam serves optimizer offload; on a CPU machine DeepSpeed builds its ops in any case.
    offload = os.environ.get("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none") == "cpu"
    if not offload and torch.cuda.is_available():
        return
    from deepspeed.git_version_info import installed_ops
    from torch.utils.cpp_extension import include_paths

    cache = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    # A build made from another environment's torch is rebuilt (ninja sees other include paths): two virtual
    # environments sharing the cache rebuild it at each other's every launch.
    here = include_paths()[0]
    built = [p for p in cache.glob("*/cpu_adam/cpu_adam*.so") if here in _read(p.parent / "build.ninja")]
    if installed_ops.get("cpu_adam") or built:
        return
    others = any(cache.glob("*/cpu_adam/cpu_adam*.so"))
    logger.info(
        "DeepSpeed compiles its C++ ops (CPU Adam, the CPU communication op) %s: one to two minutes without "
        "output, then cached in %s.%s",
        "again, for this environment's torch" if others else "on this machine's first run",
        cache,
        " Another environment's build is there: give each its own TORCH_EXTENSIONS_DIR to keep both."
        if others
        else "",
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def warn_if_launcher_started_one_process() -> None:
    """Say so when ``accelerate launch --cpu --num_processes N`` started one process instead of N.

    accelerate's CPU launcher only starts several processes through MPI (``--mpirun_hostfile``); otherwise it
    runs the script once and passes no process count, so the only place N is visible is the launcher's command.
    """
    import psutil

    if os.environ.get("ACCELERATE_USE_CPU", "").lower() != "true" or "WORLD_SIZE" in os.environ:
        return
    launcher = psutil.Process().parent().cmdline()
    for flag in ("--num_processes", "--num-processes"):
        asked = launcher[launcher.index(flag) + 1] if flag in launcher[:-1] else "1"
        if asked not in ("0", "1"):
            logger.warning(
                f"accelerate launch --cpu started ONE process, not {asked} (its CPU launcher needs MPI for more). "
                f"For {asked} CPU processes use: accelerate launch --multi_gpu --num_processes {asked} recipes/run.py ..."
            )


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _is_accelerate(cmdline: list[str]) -> bool:
    """Whether a command line is ``accelerate launch``: its console scripts (``accelerate launch``,
    ``accelerate-launch``), or ``python -m accelerate.commands...``."""
    for i, part in enumerate(cmdline[:3]):
        if Path(part).name == "accelerate" and cmdline[i + 1 : i + 2] == ["launch"]:
            return True
        if Path(part).name == "accelerate-launch":
            return True
        if part.startswith("accelerate.commands") and cmdline[i - 1 : i] == ["-m"]:
            return True
    return False


def end_with_launcher() -> None:
    """Have Linux send this process SIGTERM when the ``accelerate launch`` that started it dies first.

    accelerate's one-process launcher waits on its child and passes no signal on: a ``kill`` of the launcher left
    run.py training as an orphan, holding the output folder's lock, so a relaunch was refused until it ended.
    Several processes go through torchrun, which passes SIGTERM on itself. Only under accelerate: a run started
    with ``nohup python recipes/run.py`` must outlive its shell.
    """
    import psutil

    parent = psutil.Process().parent()
    if not sys.platform.startswith("linux") or "WORLD_SIZE" in os.environ or parent is None:
        return
    try:
        if not _is_accelerate(parent.cmdline()):
            return
    except psutil.Error:  # the launcher is already gone, or not ours to read
        return
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        logger.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    elif os.getppid() != parent.pid:  # the launcher died before the line above took effect
        os.kill(os.getpid(), signal.SIGTERM)
