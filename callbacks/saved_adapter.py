"""Check a saved LoRA adapter against the model that trained it, before a run says it is saved.

    problems = saved_adapter_problems(Path("outputs/run"), trainer.model)

Sharded engines can save less than they trained: under FSDP with a sharded state dict transformers writes no
adapter at all, and a per-rank shard would hold a slice of each matrix. An adapter that passes here holds every
trained LoRA matrix at its full shape, loadable by peft on one device.
"""

from __future__ import annotations

from pathlib import Path

ADAPTER_FILE = "adapter_model.safetensors"


def trained_lora_shapes(model) -> dict[str, tuple[int, ...]]:
    """Saved key -> full shape of every trainable LoRA matrix of a peft model (wrapped by an engine or not).

    peft saves ``...q_proj.lora_A.weight`` for the parameter ``...q_proj.lora_A.<adapter>.weight``; ZeRO-3 keeps a
    partitioned parameter's full shape in ``ds_shape``, FSDP2's DTensor reports the full shape itself.
    """
    adapters = set(getattr(model, "peft_config", {}) or {"default"})
    shapes = {}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad or "lora_" not in name:
            continue
        parts = [part for part in name.split(".") if part not in adapters]
        shapes[".".join(parts)] = tuple(getattr(parameter, "ds_shape", parameter.shape))
    return shapes


def saved_adapter_problems(folder: Path, model) -> list[str]:
    """Why ``folder``'s saved adapter is not the full adapter ``model`` trained (empty list: it is)."""
    from safetensors import SafetensorError, safe_open

    path = Path(folder) / ADAPTER_FILE
    if not path.is_file():
        return [f"{path} was not written"]
    if not (Path(folder) / "adapter_config.json").is_file():
        return [f"{Path(folder) / 'adapter_config.json'} was not written"]
    try:
        with safe_open(str(path), framework="pt") as saved:
            shapes = {key: tuple(saved.get_slice(key).get_shape()) for key in saved.keys()}  # noqa: SIM118
    except (SafetensorError, OSError) as e:
        return [f"{path} cannot be read ({e})"]
    expected = trained_lora_shapes(model)
    problems = []
    for key, shape in sorted(expected.items()):
        found = shapes.get(key)
        if found is None:
            problems.append(f"{path} lacks {key}")
        elif found != shape:
            problems.append(f"{path} holds {key} with shape {list(found)}, trained {list(shape)} (a shard?)")
    if not expected:
        problems.append("the model has no trainable LoRA parameters to compare with")
    return problems[:5] + ([f"... and {len(problems) - 5} more"] if len(problems) > 5 else [])
