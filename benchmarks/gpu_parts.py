"""What benchmarks/gpu_tables.py measures: its parts, each a list of rows (commands) with a rough time.

    from benchmarks.gpu_parts import PARTS, command

The GRPO rows run 3 optimizer steps (the table's mean is steps 2-3: step 1 pays one-off costs) of a shipped GPU
recipe on random weights of its real shape, built once per command into a folder the rows share (``{model}``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LLAMA, QWEN_SMALL = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"
TRAIN_DATA, TEST_DATA = "samples/gsm8k_train_sample.jsonl", "samples/gsm8k_test_sample.jsonl"
BRANCH = ("lora.merged_generation=false",)  # peft's LoRA branch, the shipped default for bf16 and 4-bit
MERGED = ("lora.merged_generation=true",)
COMPILED = (*MERGED, "model.compiled_generation=true")
# transformers does not compile bitsandbytes models: the 4-bit recipes get a bf16 row to compile.
UNQUANTIZED = ("model.quantization=none", *COMPILED)


@dataclass(frozen=True)
class Row:
    """One command of a part: ``argv`` after ``python``, with ``{model}`` standing for the random-weight folder of
    ``shape`` (built before the row's first use); ``estimate_s`` is a guess on an H100, for ``--list``."""

    label: str
    argv: tuple[str, ...]
    estimate_s: int
    shape: str | None = None
    env: dict = field(default_factory=dict)


def grpo(recipe: str, shape: str, settings: tuple[str, ...], estimate_s: int, steps: int = 3) -> Row:
    """A GRPO benchmark row: ``steps`` optimizer steps; the table's mean row is that of steps 2 to ``steps``."""
    argv = ("benchmarks/grpo_step.py", recipe, "model.name_or_path={model}", f"data.source={TRAIN_DATA}",
            *settings, "--steps", str(steps))  # fmt: skip
    return Row(f"{recipe}, {' '.join(settings)}", argv, estimate_s, shape)


def evaluate(settings: tuple[str, ...], estimate_s: int) -> Row:
    """Evaluation throughput of the Qwen 1.5B shape in bf16 at two batch sizes."""
    argv = ("benchmarks/evaluate_throughput.py", "gsm8k_qwen_small", "model.name_or_path={model}",
            "model.quantization=none", f"data.eval_source={TEST_DATA}", *settings, "--questions", "64",
            "--samples", "4", "--max-new-tokens", "256", "--batch-sizes", "64,256", "--engines", "hf")  # fmt: skip
    return Row(f"evaluate.py, gsm8k_qwen_small bf16 {' '.join(settings) or '(plain generate)'}", argv, estimate_s,
               QWEN_SMALL)  # fmt: skip


def gpu_test_files() -> list[str]:
    """The test files holding GPU tests (marked ``gpu``, or parametrized over the devices)."""
    return [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "tests").glob("test_*.py"))
        if "pytest.mark.gpu" in (text := p.read_text(encoding="utf-8")) or "ON_EACH_DEVICE" in text
    ]


PARTS: dict[str, list[Row]] = {
    # peft's branch, the baseline: 285 s on an H200 (2026-11-28), the 8B shape's build included.
    "llama": [grpo("gsm8k_llama", LLAMA, BRANCH, 285)],
    "llama_fast": [grpo("gsm8k_llama", LLAMA, MERGED, 200), grpo("gsm8k_llama", LLAMA, COMPILED, 250)],
    "qlora": [grpo("gsm8k_llama_qlora", LLAMA, BRANCH, 190), grpo("gsm8k_llama_qlora", LLAMA, MERGED, 130)],
    "qwen_small": [
        grpo("gsm8k_qwen_small", QWEN_SMALL, BRANCH, 60),
        grpo("gsm8k_qwen_small", QWEN_SMALL, MERGED, 50),
        grpo("gsm8k_qwen_small", QWEN_SMALL, UNQUANTIZED, 90),
    ],
    "decode": [
        Row(
            "decode step, gsm8k_llama shape, batch 24, plain and compiled",
            (
                "benchmarks/decode_ops.py",
                "gsm8k_llama",
                "model.name_or_path={model}",
                "--batch",
                "24",
                "--steps",
                "32",
                "--compiled",
            ),
            120,
            LLAMA,
        ),
    ],
    "evaluate": [evaluate((), 60), evaluate(("model.compiled_generation=true",), 90)],
    # CUDA graphs replay fixed addresses and transformers allocates a new static cache per generate call: a
    # re-record every step would slow a run as it goes (docs/PERFORMANCE.md). 150 steps of the tiny model show it.
    "rerecord": [
        Row(
            "150 compiled GRPO steps of gsm8k_tiny, TORCH_LOGS=cudagraphs",
            ("benchmarks/grpo_step.py", "gsm8k_tiny", *COMPILED, "--steps", "150", "--decode-steps", "0"),
            120,
            env={"TORCH_LOGS": "cudagraphs"},
        ),
    ],
    "tests": [
        Row(
            "GPU tests: same tokens on the GPU, FSDP and ZeRO-2 offload on its GPUs",
            ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "{gpu_tests}"),
            240,
            env={"GRPO_RECIPES_GPU_TESTS": "1"},
        ),
    ],
}


def build_command(shape: str, folder: Path) -> list[str]:
    """A process that saves a random-weight bf16 model of ``shape`` to ``folder`` (benchmarks/step_timer.py)."""
    code = (
        "import sys; from pathlib import Path; from benchmarks.step_timer import build_random_model; "
        "from recipes.planner.shapes import config_for; "
        "build_random_model(config_for(sys.argv[1]), Path(sys.argv[2]), 'bfloat16')"
    )
    return [sys.executable, "-c", code, shape, str(folder)]


def command(argv: tuple[str, ...], model: Path | None) -> list[str]:
    """``python`` and ``argv`` with ``{model}`` filled in and ``{gpu_tests}`` replaced by the GPU test files."""
    out = [sys.executable]
    for arg in argv:
        out += gpu_test_files() if arg == "{gpu_tests}" else [arg.replace("{model}", str(model))]
    return out
