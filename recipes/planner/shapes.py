"""Model shapes: the exact configs of the models our recipes name, and the layers and parameter counts of a config.

The files in ``configs/`` are the published ``config.json`` values of their Hub repositories, so the memory
planner works offline for these names and benchmarks can build random-weight models of the same shape:

    >>> import torch
    >>> from transformers import AutoModelForCausalLM
    >>> with torch.device("meta"):
    ...     model = AutoModelForCausalLM.from_config(config_for("Qwen/Qwen2.5-1.5B-Instruct"))
    >>> sum(p.numel() for p in model.parameters()) == shape_of(config_for("Qwen/Qwen2.5-1.5B-Instruct")).base_params
    True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from common.hub import HubError
from common.suggestions import did_you_mean
from recipes.recipe import RecipeError

# The published config.json of each Hub model our recipes name, as configs/<org>--<name>.json; largest first.
CONFIGS = Path(__file__).parent / "configs"
SHAPES = dict(
    sorted(
        ((path.stem.replace("--", "/"), json.loads(path.read_text())) for path in CONFIGS.glob("*.json")),
        key=lambda item: -item[1]["hidden_size"],
    )
)
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


def config_for(name: str, layers: int | None = None):
    """The shipped config of a known model, as a ``transformers.PretrainedConfig`` (no network).

    ``layers`` keeps the width and vocabulary but builds that many decoder layers (a model of full width that a
    CPU can run, for benchmarks).

    Raises:
        KeyError: ``name`` is not one of :data:`SHAPES`; the message lists them.
    """
    if name not in SHAPES:
        raise KeyError(f"No shipped shape for {name!r}. Available: {', '.join(SHAPES)}")
    from transformers import AutoConfig

    values = dict(SHAPES[name])
    if layers:
        values["num_hidden_layers"] = layers
        if "max_window_layers" in values:  # Qwen2's sliding-window layer count must stay within the layers
            values["max_window_layers"] = min(values["max_window_layers"], layers)
    return AutoConfig.for_model(values.pop("model_type"), name_or_path=name, **values)


def shipped_view(name: str) -> SimpleNamespace:
    """What the planner and the start checks read of a shipped config, from its JSON alone: transformers' config
    classes import torch (~6 s), which ``--plan`` does not otherwise need. A key the JSON leaves out is absent here,
    where the readers fall back to the same defaults as the config classes (a test compares the two).
    """
    values = dict(SHAPES[name])
    values.setdefault("dtype", values.pop("torch_dtype", None))  # transformers 5 reads torch_dtype as dtype
    return SimpleNamespace(name_or_path=name, **values)


def load_model_config(model_section: dict):
    """The config of ``model.name_or_path``: a shipped shape (:func:`shipped_view`), ``builtin:tiny-llama``, a local
    folder or a Hub id.

    Args:
        model_section: The recipe's ``model:`` section with its defaults filled in.

    Raises:
        RecipeError: The name is neither shipped nor loadable; nothing is guessed.
    """
    name = model_section.get("name_or_path")
    if not name:
        raise RecipeError(
            "model.name_or_path is not set: name a Hub id, a local folder or builtin:tiny-llama."
        )
    if name in SHAPES:
        return shipped_view(name)
    from recipes.model import load_config  # transformers' models, ~4 s: not for a shipped shape

    try:
        return load_config(model_section)
    except HubError as e:  # it names the key and the fixes already
        raise RecipeError(f"{e} The planner also works offline for {', '.join(SHAPES)}.") from None
    except (OSError, ValueError) as e:
        raise RecipeError(
            f"model.name_or_path: cannot read the config of {name!r} ({str(e).splitlines()[0]}). Give a local "
            f"folder with a config.json, a Hub id this machine can reach, or one of the shapes that work "
            f"offline: {', '.join(SHAPES)}."
        ) from None


@dataclass(frozen=True)
class Linear:
    """One ``nn.Linear`` of the model; ``name`` is its module path (``model.layers.0.self_attn.q_proj``)."""

    name: str
    in_features: int
    out_features: int
    bias: bool

    @property
    def params(self) -> int:
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)


@dataclass(frozen=True)
class Shape:
    """What the memory formulas need from a dense decoder-only config."""

    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    linears: tuple[Linear, ...]  # every decoder-layer linear, all layers, then lm_head last
    norm_params: int  # RMSNorm weights: two per layer (+ q/k norms on qwen3) and the final norm

    @property
    def lm_head(self) -> Linear:
        return self.linears[-1]

    @property
    def layer_linears(self) -> tuple[Linear, ...]:
        return self.linears[:-1]

    @property
    def base_params(self) -> int:
        """Parameters of ``AutoModelForCausalLM.from_config(config)`` (tied lm_head counted once)."""
        embed = self.vocab * self.hidden
        return (
            embed + sum(x.params for x in self.layer_linears) + self.norm_params + (0 if self.tied else embed)
        )


def shape_of(config) -> Shape:
    """Read the shape of a Llama/Mistral/Qwen2/Qwen3 config.

    Raises:
        RecipeError: Another architecture, whose layers these formulas do not describe.
    """
    kind = config.model_type
    if kind not in SUPPORTED_MODEL_TYPES:
        raise RecipeError(
            f"model.name_or_path: the memory planner models dense decoders of type "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}; {config.name_or_path!r} is {kind!r}."
        )
    h, i, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    hd = getattr(config, "head_dim", None) or h // heads
    attn_bias = getattr(config, "attention_bias", False)
    qkv_bias = True if kind == "qwen2" else attn_bias
    o_bias = False if kind == "qwen2" else attn_bias
    mlp_bias = getattr(config, "mlp_bias", False)
    per_layer = [
        ("self_attn.q_proj", h, heads * hd, qkv_bias),
        ("self_attn.k_proj", h, kv * hd, qkv_bias),
        ("self_attn.v_proj", h, kv * hd, qkv_bias),
        ("self_attn.o_proj", heads * hd, h, o_bias),
        ("mlp.gate_proj", h, i, mlp_bias),
        ("mlp.up_proj", h, i, mlp_bias),
        ("mlp.down_proj", i, h, mlp_bias),
    ]
    n = config.num_hidden_layers
    linears = [
        Linear(f"model.layers.{layer}.{name}", *dims) for layer in range(n) for name, *dims in per_layer
    ]
    norms_per_layer = 2 * h + (2 * hd if kind == "qwen3" else 0)
    return Shape(
        model_type=kind,
        hidden=h,
        intermediate=i,
        layers=n,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        vocab=config.vocab_size,
        tied=bool(getattr(config, "tie_word_embeddings", False)),
        linears=(*linears, Linear("lm_head", h, config.vocab_size, False)),
        norm_params=n * norms_per_layer + h,
    )


# Modules peft adapts that are not linears: the token embedding (lora_embedding_A is r x vocab, B hidden x r; its
# activations, a hidden state per token, are left out of the plan).
EMBEDDINGS = ("embed_tokens",)
EMBEDDING_NAME = "model.embed_tokens"


def embedding_adapter_params(shape: Shape, target_modules: str | list[str], r: int) -> int:
    """The trainable parameters of a LoRA on the token embedding, matched as :func:`lora_targets` matches."""
    if target_modules == "all-linear":
        return 0
    if isinstance(target_modules, str):
        matched = re.fullmatch(target_modules, EMBEDDING_NAME) is not None
    else:
        matched = any(EMBEDDING_NAME == t or EMBEDDING_NAME.endswith("." + t) for t in target_modules)
    return r * (shape.vocab + shape.hidden) if matched else 0


def lora_targets(shape: Shape, target_modules: str | list[str]) -> list[Linear]:
    """The linears PEFT wraps with LoRA, matched the way ``peft.LoraConfig(target_modules=...)`` matches them.

    ``"all-linear"`` is every linear but the output layer; another string is a regular expression over the full
    module name; a list matches a module whose name equals an entry or ends with ``"." + entry``.

    Raises:
        RecipeError: Nothing matches, or a list entry matches nothing (peft would quietly adapt fewer layers);
            the message lists the module names there are.
    """
    if target_modules == "all-linear":
        return list(shape.layer_linears)
    names = dict.fromkeys(x.name.rsplit(".", 1)[-1] for x in shape.linears)
    available = f"Available: all-linear, {', '.join(names)}."
    if isinstance(target_modules, str):
        found = [x for x in shape.linears if re.fullmatch(target_modules, x.name)]
        if not found and not re.fullmatch(target_modules, EMBEDDING_NAME):
            raise RecipeError(
                f"lora.target_modules {target_modules!r} matches no linear layer of this {shape.model_type} model: "
                f"a single string is a regular expression over the whole module name ({shape.linears[0].name}), "
                f"as peft reads it. For layers by name, give a list: [{target_modules}]. {available}"
            )
        return found
    unmatched = [
        t
        for t in target_modules
        if t.rsplit(".", 1)[-1] not in EMBEDDINGS
        and not any(x.name == t or x.name.endswith("." + t) for x in shape.linears)
    ]
    if unmatched:
        raise RecipeError(
            f"lora.target_modules: {', '.join(map(repr, unmatched))} "
            f"match{'es' * (len(unmatched) == 1)} no linear layer of this {shape.model_type} model."
            f"{did_you_mean(unmatched[0], names)} {available}"
        )
    return [x for x in shape.linears if any(x.name == t or x.name.endswith("." + t) for t in target_modules)]
