"""Recipe dicts and meta-device models for the memory planner tests."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

GIB = 2**30


def recipe_config(name: str = "Qwen/Qwen2.5-7B-Instruct", *, model=None, lora=None, trainer=None, prompt=256):
    """A recipe's nested dict as the loader returns it, with a GSM8K-like shape unless overridden."""
    return {
        "model": {"name_or_path": name, "dtype": "bfloat16", "quantization": "none", **(model or {})},
        "lora": {"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear", **(lora or {})},
        "data": {"max_prompt_tokens": prompt},
        "trainer": {
            "per_device_train_batch_size": 6,
            "num_generations": 6,
            "gradient_accumulation_steps": 4,
            "max_completion_length": 512,
            **(trainer or {}),
        },
    }


def meta_model(config, dtype=torch.bfloat16):
    """The model ``config`` describes, built on the meta device: real shapes, no memory."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)
