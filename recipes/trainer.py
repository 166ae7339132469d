"""TRL's GRPOTrainer with the project's generation path: the adapter merged while generating
(lora.merged_generation), and a static cache with a compiled decode step (model.compiled_generation); and
infinite rewards refused (TRL would train on with a loss of 0).

Used by ``recipes/run.py``; not a command of its own.
"""

from __future__ import annotations

import contextlib

import torch
from trl import GRPOTrainer

from common.errors import UserError
from recipes.compiled_generation import compile_generation
from recipes.merged_lora import merged_lora


class RecipeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer, generating with the adapter merged when ``merged_generation`` (``lora.merged_generation``)
    and with a compiled decode step when ``compiled_generation`` (``model.compiled_generation``).

    Only the Hugging Face ``generate`` path changes: TRL's vLLM modes sync merged weights to vLLM themselves, and
    its continuous batching casts the model it generates with (``use_merged_generation`` refuses or skips both).
    """

    def __init__(
        self,
        *args,
        merged_generation: bool,
        compiled_generation: bool = False,
        static_cache_tokens: int | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.merged_generation = merged_generation
        self.compiled_generation = compiled_generation
        if compiled_generation:  # TRL builds its generation config with compiling switched off
            compile_generation(self.generation_config, self.accelerator.device.type, static_cache_tokens)

    def create_model_card(self, *args, **kwargs):
        # TRL drafts a card in output_dir at every checkpoint, naming a base model loaded from a local folder "None"
        # ("fine-tuned version of [None]"): all an unfinished run's folder showed. run.py writes the project's card
        # when the run ends (recipes/model_card.py).
        return None

    def _init_training_state(self, max_steps, *args, **kwargs):
        resumed = super()._init_training_state(max_steps, *args, **kwargs)
        # A resumed state brings the checkpoint's save and logging intervals, which the trainer would follow over
        # the recipe's: a continued run may change both (recipes/rerun.py, MAY_CHANGE).
        self.state.compute_steps(self.args, max_steps)
        return resumed

    def _generate_single_turn(self, *args, **kwargs):
        merge = self.merged_generation and not (self.use_vllm or self.use_transformers_continuous_batching)
        # Compiled, the merged copies keep their addresses from one generation to the next (CUDA graphs).
        with merged_lora(self.model, keep=self.compiled_generation) if merge else contextlib.nullcontext():
            return super()._generate_single_turn(*args, **kwargs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        # Gathered: every process sees the same rewards, so every process stops here together.
        for index in torch.isinf(rewards).any(dim=0).nonzero().flatten().tolist():
            raise UserError(
                f"rewards[{index}] ({self.reward_func_names[index]}) returned an infinite reward at step "
                f"{self.state.global_step + 1}: GRPO normalises rewards within each group of completions, and an "
                "infinite one leaves nothing to learn from (the loss would be 0 from here on). Return a finite "
                "float per completion, or None where the reward does not apply."
            )
        return rewards
