"""What the distributed-engine tests share: the short gsm8k_tiny run they launch and the check of its adapters.

Nothing here needs the S3 test server: the GPU tests (tests/test_distributed_gpu.py) run on machines without it.
"""

from __future__ import annotations

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

COMMON = [
    "trainer.max_steps=4",
    "checkpoint.every_steps=2",
    "trainer.lr_scheduler_type=linear",
    "trainer.learning_rate=1e-2",
    "rewards=[{path: '_plugins:distinct_share'}]",  # varied rewards, so the adapter moves
]


def assert_full_trained_adapters(out, base_dir) -> None:
    """The final adapter and each checkpoint's load with peft onto the whole base, without FSDP or DeepSpeed; every
    LoRA matrix has its module's full shape, B has moved from zero, and the final adapter is checkpoint-4's."""
    final = load_file(out / "adapter_model.safetensors")
    for folder in (out / "checkpoint-2", out / "checkpoint-4", out):
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), folder)
        loaded = {n: p for n, p in model.named_parameters() if "lora_" in n}
        assert loaded and len(loaded) == len(final)
        for name, module in model.named_modules():
            if hasattr(module, "lora_A") and "default" in module.lora_A:
                assert module.lora_A["default"].weight.shape[1] == module.in_features, name
                assert module.lora_B["default"].weight.shape[0] == module.out_features, name
    saved = load_file(out / "checkpoint-4" / "adapter_model.safetensors")
    assert final.keys() == saved.keys() and all(torch.equal(final[k], saved[k]) for k in final)
    lora_b = [t for k, t in final.items() if "lora_B" in k]
    assert lora_b and all(t.abs().sum() > 0 for t in lora_b)


def failure_text(stderr: str) -> str:
    """What a failed launch said: its first traceback from the start (which names the call that failed; a GPU run's
    FSDP error showed only its last 4,000 characters, inside torch) and the end of the output."""
    start = stderr.find("Traceback")
    return stderr[-4000:] if start < 0 else f"{stderr[start : start + 3000]}\n...\n{stderr[-2000:]}"
