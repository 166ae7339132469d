"""The base model and tokenizer a recipe names, and the LoRA config it trains.

Training and evaluation load through here, so both see the same dtype, quantization and padding.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

from common.hub import hub_load
from common.quiet import BNB_CPU_4BIT_KERNEL
from recipes.builtin import resolve_builtin

logger = logging.getLogger(__name__)
# Dedicated padding tokens some chat models ship but do not declare as pad_token (Llama 3.1 reserves the first).
PAD_CANDIDATES = ("<|finetune_right_pad_id|>", "<|pad|>", "<pad>")


def model_path(model: dict) -> str:
    """Hub id or local folder of the recipe's model (``builtin:`` names are built on first use)."""
    return resolve_builtin(model["name_or_path"])


@contextmanager
def _from_hub(model: dict, what: str) -> Iterator[str]:
    """The model's path, for a load whose Hub failures are said as a ``HubError`` naming model.name_or_path, and
    that reads the local cache alone, failing at once, when the Hub cannot be reached (``common.hub``)."""
    path = model_path(model)
    with hub_load(model["name_or_path"], "model.name_or_path", what, path):
        yield path


def load_config(model: dict):
    """The model's config only (a small JSON file): enough for load-time checks and memory planning."""
    with _from_hub(model, "config") as path:
        return AutoConfig.from_pretrained(
            path, revision=model.get("revision"), trust_remote_code=model["trust_remote_code"]
        )


def load_tokenizer(model: dict):
    """Tokenizer padded on the left (generation appends on the right) with a pad token distinct from EOS if any."""
    with _from_hub(model, "tokenizer") as path:
        tokenizer = AutoTokenizer.from_pretrained(
            path, revision=model.get("revision"), trust_remote_code=model["trust_remote_code"]
        )
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = next((t for t in PAD_CANDIDATES if t in vocab), tokenizer.eos_token)
        logger.info("Tokenizer has no pad token; padding with %s.", tokenizer.pad_token)
    return tokenizer


def quantization_config(model: dict) -> BitsAndBytesConfig | None:
    """bitsandbytes settings for ``model.quantization`` (NF4 with double quantization for 4-bit: QLoRA's)."""
    if model["quantization"] == "4bit":
        if BNB_CPU_4BIT_KERNEL.message and not torch.cuda.is_available():
            logger.warning(BNB_CPU_4BIT_KERNEL.message)  # the fast CPU kernel applies to this run
        compute = torch.float32 if model["dtype"] in ("float32", "auto") else getattr(torch, model["dtype"])
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute,
        )
    if model["quantization"] == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return None


def load_model(model: dict, *, device_index: int | None = None):
    """The base model (no adapter) at the recipe's dtype and quantization.

    Args:
        model: The recipe's ``model:`` section.
        device_index: GPU of this process; quantized weights must be placed at load time.
    """
    kwargs = {
        "dtype": model["dtype"] if model["dtype"] == "auto" else getattr(torch, model["dtype"]),
        "attn_implementation": model["attn_implementation"],
        "revision": model.get("revision"),
        "trust_remote_code": model["trust_remote_code"],
        "quantization_config": quantization_config(model),
    }
    if kwargs["quantization_config"] is not None:
        kwargs["device_map"] = {
            "": device_index if torch.cuda.is_available() and device_index is not None else "cpu"
        }
    with _from_hub(model, "weights") as path:
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)


def lora_config(lora: dict):
    """peft LoraConfig for the recipe's ``lora:`` section."""
    from peft import LoraConfig

    return LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=lora["target_modules"],
        task_type="CAUSAL_LM",
    )


def load_model_and_tokenizer(model: dict, *, device_index: int | None = None):
    """(base model, tokenizer) for a recipe's ``model:`` section, with the pad token mirrored onto the model."""
    tokenizer = load_tokenizer(model)
    base = load_model(model, device_index=device_index)
    base.generation_config.pad_token_id = tokenizer.pad_token_id
    return base, tokenizer


def adapter_base_section(adapter: Path) -> dict | None:
    """The ``model:`` section an adapter was trained from: its run's recipe.yaml (saved beside the adapter, or in
    the run folder above a checkpoint), else the adapter config's base model; None when neither says."""
    import json

    import yaml

    for recipe in (adapter / "recipe.yaml", adapter.parent / "recipe.yaml"):
        if recipe.is_file():
            return yaml.safe_load(recipe.read_text(encoding="utf-8"))["model"]
    config = adapter / "adapter_config.json"
    base = json.loads(config.read_text()).get("base_model_name_or_path") if config.is_file() else None
    return (
        {"name_or_path": base, "dtype": "auto", "revision": None, "trust_remote_code": False}
        if base
        else None
    )
