"""TRL's GRPOTrainer with the project's generation path: the adapter merged while generating (lora.merged_generation).

Used by ``recipes/run.py``; not a command of its own.
"""

from __future__ import annotations

import contextlib

from trl import GRPOTrainer

from recipes.merged_lora import merged_lora


class MergedGenerationTrainer(GRPOTrainer):
    """TRL's GRPOTrainer, generating with the adapter merged when ``merged_generation`` (``lora.merged_generation``).

    Only the Hugging Face ``generate`` path changes: TRL's vLLM modes sync merged weights to vLLM themselves, and
    its continuous batching casts the model it generates with (``use_merged_generation`` refuses or skips both).
    """

    def __init__(self, *args, merged_generation: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.merged_generation = merged_generation

    def _generate_single_turn(self, *args, **kwargs):
        merge = self.merged_generation and not (self.use_vllm or self.use_transformers_continuous_batching)
        with merged_lora(self.model) if merge else contextlib.nullcontext():
            return super()._generate_single_turn(*args, **kwargs)
