"""TRL's GRPOTrainer with the project's generation path: the adapter merged while generating
(lora.merged_generation), and a static cache with a compiled decode step (model.compiled_generation); a
quantized model's adapter trained in float32, not TRL's bfloat16; and infinite or NaN rewards refused (TRL
would train on with a loss of 0, or read a NaN as "does not apply").

Used by ``recipes/run.py``; not a command of its own.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers

import torch
from torch.optim.lr_scheduler import LambdaLR
from trl import GRPOTrainer
from trl.trainer.utils import is_async_callable

from common.errors import UserError
from recipes.compiled_generation import compile_generation
from recipes.merged_lora import merged_lora

logger = logging.getLogger("recipes.run")


class NanRefused:
    """A reward function that notes its own NaN: TRL turns None ("does not apply") into NaN before adding rewards
    up, so a NaN of the function's would pass for None, silently left out of the sum. Noted where the function
    returns, the only place the two still differ; the trainer refuses it once every process has said (one process
    raising alone would leave the others waiting in TRL's gather of the rewards)."""

    def __init__(self, func, name: str):
        self.func, self.__name__, self.returned_nan = func, name, False

    def __call__(self, *args, **kwargs):
        values = self.func(*args, **kwargs)
        self.returned_nan |= any(_is_nan(value) for value in values)
        return values


def _is_nan(value) -> bool:
    """A reward's value is NaN: a float (numpy's too) or a one-element tensor, which TRL's tensor takes as well."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and bool(torch.isnan(value).item())
    return isinstance(value, numbers.Real) and math.isnan(value)


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
        # TRL casts a quantized model's adapter to bfloat16 (the QLoRA paper's choice, at its learning rate of 2e-4).
        # At RL's 1e-6 to 1e-5 most Adam steps are below bfloat16's resolution of the weights and round away (simulated:
        # 12% of lora_A's entries moved in 50 steps at 5e-6, against all of them in float32). Float32, as peft keeps
        # an adapter on an unquantized base; before train() builds the optimizer, so its states are float32 too.
        for param in self.model.parameters():
            if param.requires_grad and param.dtype != torch.float32:
                param.data = param.data.float()
        self.reward_funcs = [
            func if isinstance(func, torch.nn.Module) or is_async_callable(func) else NanRefused(func, name)
            for func, name in zip(self.reward_funcs, self.reward_func_names)
        ]
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

    def _load_optimizer_and_scheduler(self, checkpoint):
        # A checkpoint's optimizer and scheduler states carry its run's learning rate (the scheduler's base_lrs) and
        # hyperparameters (weight decay, betas, eps in each param group): loaded as they are, a run branched from it
        # with a lower learning rate (recipes/rerun.py) trains on with the old one while recipe.yaml records the new.
        # The moments and the step count are the checkpoint's; the settings are this launch's.
        scheduler = getattr(self.lr_scheduler, "scheduler", self.lr_scheduler)  # accelerate's wrapper, or not
        launch_lrs = list(getattr(scheduler, "base_lrs", []))
        launch_groups = [
            {k: v for k, v in g.items() if k not in ("params", "lr")} for g in self.optimizer.param_groups
        ]
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or not launch_lrs:
            return
        saved_lrs = list(scheduler.base_lrs)
        saved_rates = [group["lr"] for group in self.optimizer.param_groups]
        for group, settings in zip(self.optimizer.param_groups, launch_groups, strict=True):
            group.update(settings)
        scheduler.base_lrs = launch_lrs
        # This step's rate under this launch's schedule. The optimizer comes back at the rate the checkpoint's own
        # schedule set for it: a raised trainer.max_steps under a decaying schedule would train its first new step
        # at the old schedule's end (0.0 for linear), then jump back up.
        for index, (group, lr) in enumerate(zip(self.optimizer.param_groups, launch_lrs, strict=True)):
            if isinstance(scheduler, LambdaLR):
                group["lr"] = lr * scheduler.lr_lambdas[index](scheduler.last_epoch)
            else:  # the other schedules scale with their base rate too
                group["lr"] *= lr / saved_lrs[index]
        # What the Trainer logs as this step's learning_rate (get_last_lr), restored with the old rate.
        scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        if launch_lrs != saved_lrs:
            logger.info(
                "Learning rate from this launch: %g (%s was trained with %g); its schedule goes on from step %d.",
                launch_lrs[0], checkpoint, saved_lrs[0], scheduler.last_epoch,
            )  # fmt: skip
        elif scheduler._last_lr != saved_rates:
            logger.info(
                "Learning rate at step %d: %g on this launch's schedule (%s's schedule ended at %g).",
                scheduler.last_epoch + 1, scheduler._last_lr[0], checkpoint, saved_rates[0],
            )  # fmt: skip
        # DeepSpeed's engine loads the optimizer before this method (ZeRO-2 here, its scheduler not): should a launch
        # restore the scheduler there too, the rate captured above would be the saved one. Refused, not trained at.
        if launch_lrs[0] != self.args.learning_rate:
            raise UserError(
                f"The optimizer resumed from {checkpoint} runs at learning rate {launch_lrs[0]:g}, not this launch's "
                f"trainer.learning_rate {self.args.learning_rate:g}: this launcher restores the checkpoint's "
                "settings. Branch with the learning rate the checkpoint was trained with, or start a new run."
            )

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
        noted = [isinstance(f, NanRefused) and f.returned_nan for f in self.reward_funcs]
        for func in self.reward_funcs:
            if isinstance(func, NanRefused):
                func.returned_nan = False
        # Every process gathers every process's notes, so all of them stop at this step together.
        # int32: not every backend gathers bools (NCCL has no bool type).
        noted = (
            self.accelerator.gather(torch.tensor(noted, dtype=torch.int32, device=rewards.device))
            .view(-1, len(noted))
            .amax(dim=0)
        )
        for index in noted.nonzero().flatten().tolist():
            raise UserError(
                f"rewards[{index}] ({self.reward_func_names[index]}) returned nan at step {self.state.global_step + 1}"
                ": TRL reads a NaN as None (the reward does not apply) and leaves it out of the sum. Return a finite "
                "float per completion, or None where the reward does not apply."
            )
        return rewards
