"""A recipe's planned GPU memory, part by part, and how the parts add up to a peak on a card.

`recipes/planner/memory.py` computes the parts (``plan_memory``) and documents every formula, these sums
included; this module holds the result and adds the parts up: the resident part, the generation and training
phases, a colocated vLLM's share, the peak and whether it fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class MemoryPlan:
    """The parts of a recipe's GPU memory, in bytes, and the settings they were computed for."""

    base_params: int
    trainable_params: int
    adapted_linears: int
    batch: int
    generation_batch: int
    prompt_tokens: int
    completion_tokens: int
    gradient_checkpointing: bool
    every_n_layers: int  # checkpoint every n-th decoder layer (1: all)
    weight_dtype: str
    adapter_dtype: str
    vllm: str  # "off", "colocate" or "server"
    vllm_fraction: float
    vllm_sleep: bool
    overhead: int
    weights: int
    lora_params: int
    optimizer_states: int
    lora_grads: int
    activations_checkpointed: int
    activations_full: int
    recomputed_layer: int  # the part of activations_checkpointed that only exists while a layer is recomputed
    backward_workspace: int
    logprob_workspace: int
    dequant_buffer: int
    kv_cache: int
    generation_workspace: int
    vllm_need: int  # what the colocated vLLM must hold inside its share: weights + KV of the generation batch
    merge: str = "off"  # lora.merged_generation as it applies here: "on", "off", or "auto" (on where it fits)
    merged_weights: int = 0  # the adapted linears' merged copies, while generating (when merging)
    merge_workspace: int = 0  # the largest linear's temporaries while its merged copy is made
    # model.compiled_generation: the merged copies are kept between generations (CUDA graphs replay addresses)
    compiled: bool = False
    reference_model: int = 0
    host_optimizer: int = 0  # host RAM of an optimizer offloaded by ZeRO-2, all ranks together

    @property
    def activations(self) -> int:
        return self.activations_checkpointed if self.gradient_checkpointing else self.activations_full

    @property
    def resident(self) -> int:
        return self.overhead + self.weights + self.lora_params + self.optimizer_states + self.reference_model

    @property
    def training_phase(self) -> int:
        """The larger backward peak: through the log-prob head (no layer recomputed yet) or through the layers."""
        saved = self.activations - (self.recomputed_layer if self.gradient_checkpointing else 0)
        head, layers = saved + self.logprob_workspace, self.activations + self.backward_workspace
        return self.lora_grads + self.dequant_buffer + max(head, layers)

    def vllm_share(self, card_bytes: int) -> int:
        """Bytes the colocated vLLM engine reserves on a card of ``card_bytes`` (0 when not colocated)."""
        return int(self.vllm_fraction * card_bytes) if self.vllm == "colocate" else 0

    def merges(self, card_bytes: int) -> bool:
        """Whether generation merges the adapter on this card: ``auto`` merges when the merged peak fits it, and
        always on a CPU (``card_bytes`` 0), as ``recipes.merged_lora.use_merged_generation`` decides."""
        if self.merge == "auto":
            return card_bytes <= 0 or self.peak(card_bytes, merged=True) <= card_bytes
        return self.merge == "on"

    def generation_phase(self, card_bytes: int, *, merged: bool | None = None) -> int:
        """Transient bytes while completions are generated (a sleeping vLLM wakes up only for this)."""
        if self.vllm == "off":
            merged = self.merges(card_bytes) if merged is None else merged
            generate = self.kv_cache + self.generation_workspace
            return self.merged_weights + max(generate, self.merge_workspace) if merged else generate
        return self.vllm_share(card_bytes) if self.vllm_sleep else 0

    def kept_merged(self, card_bytes: int, *, merged: bool | None = None) -> int:
        """The merged copies a compiled decode step keeps through training too (0 unless compiled and merging)."""
        merged = self.merges(card_bytes) if merged is None else merged
        return self.merged_weights if self.compiled and merged and self.vllm == "off" else 0

    def peak(self, card_bytes: int, *, merged: bool | None = None) -> int:
        """Expected peak on a card of ``card_bytes`` (the card matters for a vLLM share and ``auto`` merging).

        ``merged`` plans generation with (True) or without (False) the merged copies instead of as the recipe says.
        """
        awake = 0 if self.vllm_sleep else self.vllm_share(card_bytes)
        phase = self.generation_phase(card_bytes, merged=merged)
        return (
            self.resident
            + awake
            + max(phase, self.training_phase + self.kept_merged(card_bytes, merged=merged))
        )

    def vllm_share_range(self, card_bytes: int) -> tuple[float, float]:
        """(smallest, largest) ``vllm_gpu_memory_utilization`` for a colocated vLLM on this card, in hundredths.

        The smallest holds vLLM's weights and KV cache; the largest leaves the rest of the run its planned peak
        (awake, the share sits beside the training phase; sleeping, it only has to fit beside the resident part,
        and training must fit on its own). When smallest > largest, no share fits.
        """
        beside = self.resident + (0 if self.vllm_sleep else self.training_phase)
        largest = math.floor(100 * (card_bytes - beside) / card_bytes) / 100
        if self.vllm_sleep and self.resident + self.training_phase > card_bytes:
            largest = -1.0
        return math.ceil(100 * self.vllm_need / card_bytes) / 100, largest

    def fits(self, card_bytes: int) -> bool:
        """Whether the peak fits the card and a colocated vLLM's share holds its weights and KV cache."""
        vllm_ok = self.vllm != "colocate" or self.vllm_share(card_bytes) >= self.vllm_need
        return vllm_ok and self.peak(card_bytes) <= card_bytes
