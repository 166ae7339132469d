"""Third-party noise held back: bitsandbytes' CPU 4-bit kernel hint unless a 4-bit model is loaded on a CPU, and
TRL's read of a deprecated transformers flag."""

from __future__ import annotations

import logging
import subprocess
import sys
from functools import partial

import pytest

from common.quiet import HeldBack

HINT = "gemm_4bit_forward"


def test_held_back_drops_only_its_marker_and_keeps_the_message(caplog):
    log = logging.getLogger("test.quiet")
    held = HeldBack(HINT)
    log.addFilter(held)
    try:
        with caplog.at_level(logging.WARNING, logger="test.quiet"):
            log.warning("Failed to load CPU %s: %s", HINT, "no kernels")
            log.warning("something else")
    finally:
        log.removeFilter(held)
    assert [r.getMessage() for r in caplog.records] == ["something else"]
    assert held.message == f"Failed to load CPU {HINT}: no kernels"


def _stderr(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    ).stderr


def test_importing_peft_after_common_prints_no_kernel_hint_and_a_4bit_load_on_cpu_shows_it():
    raw = _stderr("import bitsandbytes")  # whether this CPU gets the hint: peft imports it, 5 s sooner alone
    quiet = _stderr(
        "import logging, common, peft\n"
        "from common.quiet import BNB_CPU_4BIT_KERNEL as held\n"
        "print('held' if held.message else 'none', file=__import__('sys').stderr)\n"
        "logging.basicConfig()\n"
        "from recipes.model import quantization_config\n"
        "quantization_config({'quantization': 'none', 'dtype': 'float32'})\n"
        "print('4bit', file=__import__('sys').stderr)\n"
        "quantization_config({'quantization': '4bit', 'dtype': 'float32'})\n"
    )
    before_4bit, after_4bit = quiet.split("4bit\n")
    assert HINT not in before_4bit
    if HINT in raw:  # this CPU has AVX512-BF16: bitsandbytes logs the hint on import
        assert before_4bit.strip().endswith("held") and HINT in after_4bit
    else:
        assert before_4bit.strip().endswith("none") and HINT not in after_4bit


def test_deepspeeds_cpu_accelerator_notice_is_held_back():
    pytest.importorskip("deepspeed")
    code = "from deepspeed.accelerator import get_accelerator; print(get_accelerator().device_name())"
    run = partial(subprocess.run, check=False, capture_output=True, text=True, timeout=120)
    raw, quiet = run([sys.executable, "-c", code]), run([sys.executable, "-c", f"import common; {code}"])
    assert "Setting accelerator to CPU" in raw.stdout and raw.stdout.endswith("cpu\n")  # the suite hides GPUs
    assert quiet.stdout == "cpu\n", quiet.stdout


def test_trls_read_of_the_deprecated_checkpointing_flag_is_not_shown_and_other_future_warnings_are():
    code = (
        "import common, warnings\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=8,"
        " num_hidden_layers=1, num_attention_heads=2))\n"
        "model.is_gradient_checkpointing\n"  # what TRL reads when it unwraps the model
        "warnings.warn('another deprecation', FutureWarning)\n"
    )
    stderr = _stderr(code)
    assert "is_gradient_checkpointing" not in stderr and "another deprecation" in stderr
    assert "is_gradient_checkpointing" in _stderr(code.replace("import common, warnings", "import warnings"))


def test_hub_and_datasets_log_lines_print_once_under_the_command_lines_logging():
    """huggingface_hub and datasets keep their own handler; under basicConfig alone each line printed twice."""
    code = (
        "import logging, datasets, huggingface_hub\n"
        "from common.logs import log_to_stderr\n"
        "log_to_stderr()\n"
        "logging.getLogger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].')\n"
        "logging.getLogger('datasets.load').warning('Using the latest cached version')\n"
        "logging.getLogger('recipes.run').info('a line of ours')\n"
    )
    stderr = _stderr(code)
    assert stderr.count("Retrying in 1s") == 1 and stderr.count("Using the latest cached version") == 1
    assert stderr.count("INFO recipes.run: a line of ours") == 1
    twice = _stderr(
        code.replace("from common.logs import log_to_stderr\nlog_to_stderr()", "logging.basicConfig()")
    )
    assert twice.count("Retrying in 1s") == 2


def test_the_trainers_missing_best_checkpoint_warning_of_a_resume_on_a_new_machine_is_held_back():
    """On every resume from the store on a new machine, transformers warned that the best checkpoint "does not exist
    anymore", read as a loss: it is in the store, where the run's best pointer names it."""
    from transformers.utils import logging as transformers_logging

    import common  # noqa: F401 - installs the filters

    trainer_logger = transformers_logging.get_logger("transformers.trainer")  # what trainer.py logs with
    assert trainer_logger is logging.getLogger("transformers.trainer")

    def shown(message: str) -> bool:
        return trainer_logger.filter(
            trainer_logger.makeRecord("t", logging.WARNING, "f", 1, message, None, None)
        )

    assert not shown(
        "The best checkpoint out/checkpoint-4 recorded in the resumed state does not exist anymore. Ignoring it for "
        "this run."
    )
    assert shown("another warning")
