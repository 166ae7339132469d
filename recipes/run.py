"""Train a recipe: GRPO with LoRA adapters through TRL's GRPOTrainer.

    accelerate launch -q recipes/run.py arith_tiny                   # offline CPU default that learns: minutes
    accelerate launch -q recipes/run.py gsm8k_tiny                   # offline plumbing check: seconds
    accelerate launch -q recipes/run.py gsm8k_llama checkpoint.uri=s3://bucket/runs/llama  # synced to S3
    python recipes/run.py --list                                     # recipes and what they are for
    python recipes/run.py gsm8k_qwen --print                         # the resolved recipe, no training
    python recipes/run.py gsm8k_qwen --plan                          # expected GPU memory, no training
    python recipes/run.py gsm8k_qwen_small --plan --config_file recipes/accelerate/deepspeed_zero2_offload.yaml
    python recipes/export.py outputs/gsm8k_tiny --out merged          # after training: a plain merged model

Thin on purpose: load the recipe, build the pieces from it, train, save.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import timedelta
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.errors import exit_status
from common.logs import log_to_stderr
from common.process_exit import exit_launched_process, launched_processes
from recipes.recipe import RecipeError, available, load_recipe
from recipes.start_checks import check_start

logger = logging.getLogger("recipes.run")


def grpo_config(recipe):
    """trl.GRPOConfig from the resolved recipe's ``trainer:`` section."""
    import torch
    from trl import GRPOConfig

    trainer = dict(recipe.config["trainer"])
    # With no GPU, several launched processes only form a (gloo) process group when the Trainer is told to use
    # the CPU; otherwise each would silently train alone. A machine fact, so it is decided here, not at load.
    if "trainer.use_cpu" not in recipe.origins:
        trainer["use_cpu"] = not torch.cuda.is_available()
    # Unset, vLLM sizes its KV cache for the model's whole context (131,072 tokens for Llama 3.1: 16 GiB for one
    # sequence) and refuses to start in the share --plan gives it; a run needs prompt plus completion.
    prompt_tokens = recipe.config["data"].get("max_prompt_tokens")
    if trainer.get("use_vllm") and trainer.get("vllm_max_model_length") is None and prompt_tokens:
        trainer["vllm_max_model_length"] = prompt_tokens + trainer["max_completion_length"]
    return GRPOConfig(**trainer)


def build_trainer(recipe, callbacks=(), *, tokenizer=None, dataset=None):
    """The GRPOTrainer a recipe describes: base model, LoRA config, data, rewards, callbacks.

    ``tokenizer`` and ``dataset``: the recipe's, when the caller has loaded them already.
    """
    from accelerate import PartialState

    from callbacks.progress import use_short_progress
    from recipes.compiled_generation import static_cache_tokens, use_compiled_generation
    from recipes.data import load_split
    from recipes.merged_lora import use_merged_generation
    from recipes.model import load_model, load_tokenizer, lora_config
    from recipes.recipe import reward_defaults
    from recipes.trainer import RecipeGRPOTrainer
    from rewards import build_rewards

    # Data before weights: a bad data source should fail in seconds, not after an 8B model has loaded.
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(recipe.config["model"])
    dataset = dataset if dataset is not None else load_split(recipe.config["data"], tokenizer=tokenizer)
    reward_funcs, _ = build_rewards(recipe.config["rewards"], defaults=reward_defaults(recipe.config))
    # Before the weights: a refusal should not wait for them.
    merged, compiled = use_merged_generation(recipe), use_compiled_generation(recipe)
    model = load_model(recipe.config["model"], device_index=PartialState().local_process_index)
    trainer = RecipeGRPOTrainer(
        merged_generation=merged,
        compiled_generation=compiled,
        static_cache_tokens=static_cache_tokens(recipe.config),
        model=model,
        reward_funcs=reward_funcs,
        args=grpo_config(recipe),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(recipe.config["lora"]),
        callbacks=list(callbacks),
    )
    use_short_progress(trainer)
    return trainer


def train(recipe) -> Path:
    """Run the recipe end to end; returns the output folder holding the final adapter."""
    from recipes.launcher import end_with_launcher

    end_with_launcher()  # first: a launcher stopped while torch imports must not leave this run behind
    import torch
    from accelerate import PartialState
    from tqdm.contrib.logging import logging_redirect_tqdm

    from callbacks import build_callbacks
    from callbacks.checkpoint_sync import prepare_checkpointing
    from callbacks.saved_adapter import saved_adapter_problems
    from common.processes import broadcast_from_main
    from recipes.atomic import write_text_atomically
    from recipes.checks import check_environment, check_machine, check_prompts_fit
    from recipes.data import load_split
    from recipes.heldout import heldout_callback, heldout_plan
    from recipes.launcher import (
        check_engine,
        check_local_processes,
        reconcile_precision,
        say_deepspeed_build,
        warn_if_launcher_started_one_process,
    )
    from recipes.model import load_config, load_tokenizer
    from recipes.model_card import model_card
    from recipes.rerun import (
        STATE_NAME,
        changed_recipe_refusal,
        check_process_count,
        finished_step,
        keep_final_adapter,
        output_folder_refusal,
        restart_over_final_adapter,
        stopped_early,
    )

    check_local_processes(torch.cuda.device_count(), os.cpu_count() or 1)
    check_engine(torch.cuda.is_available())
    say_deepspeed_build()
    reconcile_precision(recipe)  # before accelerate's state or the GRPOConfig reads the launcher's precision
    # Without a GPU, a multi-process launch (torchrun, `accelerate launch --multi_gpu`) must run as CPU processes
    # over gloo; accelerate only picks that when told `cpu` before anything else creates its state.
    # The Trainer joins this state, so trainer.ddp_timeout (how long a wait for a failed machine lasts) counts only
    # here; unset, torch's defaults stay (30 min; 10 with NCCL), not GRPOConfig's 1800 s.
    timeout = recipe.config["trainer"]["ddp_timeout"] if "trainer.ddp_timeout" in recipe.origins else None
    state = PartialState(
        cpu=not torch.cuda.is_available(), **({"timeout": timedelta(seconds=timeout)} if timeout else {})
    )
    warn_if_launcher_started_one_process()
    check_machine(recipe, torch.cuda.is_available())  # before the model's config is fetched from the Hub
    model_config = load_config(recipe.config["model"])
    check_environment(recipe, model_config, torch.cuda.is_available())
    if torch.cuda.is_available():
        from recipes.planner.on_card import check_card

        check_card(recipe, model_config, torch.cuda.get_device_properties(state.local_process_index))
    # The data before anything is written: a bad data file is refused with the output folder untouched.
    tokenizer = load_tokenizer(recipe.config["model"])
    dataset = load_split(recipe.config["data"], tokenizer=tokenizer)
    check_prompts_fit(recipe, model_config, tokenizer, dataset)
    questions = heldout_plan(recipe) if recipe.config["heldout"]["enabled"] else None
    output_dir = Path(recipe.config["trainer"]["output_dir"])
    refusal = output_folder_refusal(recipe) if state.is_main_process else None
    if state.num_processes > 1:  # the main process's folder decides for all
        refusal = broadcast_from_main(refusal)
    if refusal:
        raise RecipeError(refusal)
    # Storage and run-conflict checks next: a refused run must not touch another run's output folder.
    plan = prepare_checkpointing(
        output_dir=str(output_dir),
        recipe_name=recipe.name,
        recipe_yaml=recipe.to_yaml(),
        vet_recipe=partial(changed_recipe_refusal, recipe),
        **recipe.config["checkpoint"],
    )
    try:
        refusal = restart_over_final_adapter(recipe, plan.resume_from)
        if state.num_processes > 1:  # the main process's folder decides for all (only it holds the adapter)
            refusal = broadcast_from_main(refusal)
        if refusal:
            raise RecipeError(refusal)
        check_process_count(plan.resume_from)
        finished = finished_step(recipe, plan.resume_from)
        if finished is None:
            if state.is_main_process:
                write_text_atomically(output_dir / "recipe.yaml", recipe.to_yaml())
                logger.info(
                    "Recipe %s, resolved in full in %s (the same command with --print shows it)",
                    recipe.name, output_dir / "recipe.yaml",
                )  # fmt: skip
                logger.debug("Resolved recipe %s:\n%s", recipe.name, recipe.to_yaml())
            heldout = heldout_callback(recipe, questions, plan.resume_from)
            # Held-out first: its on_save writes the checkpoint's history before SealCallback seals the folder.
            callbacks = [
                *([heldout] if heldout else []),
                *plan.callbacks,
                *build_callbacks(recipe.config["callbacks"]),
            ]
            trainer = build_trainer(recipe, callbacks=callbacks, tokenizer=tokenizer, dataset=dataset)
            if heldout:
                heldout.attach(trainer)
            if plan.resume_from:
                logger.info("Resuming from %s", plan.resume_from)
            # Log lines (held-out results, alarms, uploads) get lines of their own, not the progress bar's.
            with logging_redirect_tqdm():
                trainer.train(resume_from_checkpoint=plan.resume_from)
            if state.is_main_process:  # an earlier run's state (overwrite=true) must not vouch for this save
                (output_dir / STATE_NAME).unlink(missing_ok=True)
            trainer.save_model(str(output_dir))  # the final adapter and tokenizer
            if state.is_main_process:
                if problems := saved_adapter_problems(output_dir, trainer.model):
                    raise RuntimeError("The final adapter was not saved in full: " + "; ".join(problems))
                history = heldout.history if heldout else None
                card = model_card(recipe, trainer.state.log_history, str(output_dir), history)
                write_text_atomically(output_dir / "README.md", card)
            # trainer_state.json (what stats.curves plots) last: a folder whose state has the run's final step
            # holds its whole final save; a kill before that is finished from the last checkpoint on a rerun.
            trainer.save_state()
            if state.is_main_process:
                logger.info("Final adapter saved to %s", output_dir)
            plan.finish_uploads()  # after the local save: a failing store never costs the adapter
        elif state.is_main_process:
            keep_final_adapter(recipe, Path(plan.resume_from), output_dir)
            why = stopped_early(Path(plan.resume_from))
            how = (
                f"ended early: {why}" if why else f"trainer.max_steps={recipe.config['trainer']['max_steps']}"
            )
            uri = recipe.config["checkpoint"]["uri"]  # a new output folder alone resumes the run stored there
            logger.info(
                "%s already finished at step %d (%s): nothing to train. The final adapter is in %s. To train "
                "longer, %s; for a new run, set %s.",
                recipe.name, finished, how, output_dir,
                f"resume it explicitly: checkpoint.resume={plan.resume_from} (it is judged from there: the "
                "alarm that stopped it is armed again, and heldout.patience counts afresh)" if why else "raise trainer.max_steps",
                f"trainer.output_dir and checkpoint.uri to new places ({uri} holds this run, resumed from any "
                "output folder)" if uri else "trainer.output_dir",
            )  # fmt: skip
    finally:
        plan.release()
    # Close the process group while every rank is alive (its threads can outlive this: see common/process_exit.py).
    state.wait_for_everyone()
    state.destroy_process_group()
    return output_dir


def print_list() -> None:
    names = available()
    width = max(map(len, names))
    for name, description in names.items():
        print(f"{name:<{width}}  {description}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    recipes = "\n".join(f"  {name:<20} {text}" for name, text in available().items())
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawTextHelpFormatter,
        epilog=f"recipes:\n{recipes}\n\n"
        "overrides: section.key=value, the value read as YAML (lists and mappings too), applied last.\n"
        "examples:\n"
        "  accelerate launch -q recipes/run.py arith_tiny   # -q: a refused run ends on its error line\n"
        "  accelerate launch -q recipes/run.py gsm8k_llama trainer.max_steps=400 checkpoint.uri=s3://bucket/runs/a\n"
        "  python recipes/run.py gsm8k_qwen --plan",
    )
    parser.add_argument("recipe", nargs="?", help="recipe name (see --list) or path to a recipe YAML file")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. trainer.max_steps=10")
    only = parser.add_mutually_exclusive_group()  # each prints and exits: a second one would go unanswered
    only.add_argument("--list", action="store_true", help="list the recipes and exit")
    only.add_argument("--print", action="store_true", help="print the resolved recipe and exit")
    only.add_argument("--plan", action="store_true", help="print the expected GPU memory and exit")
    parser.add_argument(
        "--config_file", metavar="ACCELERATE_YAML",
        help="with --plan: the accelerate config the run will use (ZeRO-2 offload moves the optimizer to host RAM)",
    )  # fmt: skip
    args = parser.parse_intermixed_args(argv)
    if args.list:
        print_list()
        return 0
    if not args.recipe:
        parser.error("name a recipe (see --list)")
    if args.config_file and not args.plan:
        parser.error(
            "--config_file only shapes --plan; to train with an accelerate config, give it to the launcher: "
            f"accelerate launch -q --config_file {args.config_file} recipes/run.py {args.recipe}"
        )
    log_to_stderr()

    def command() -> object:
        recipe = load_recipe(args.recipe, args.overrides)
        if not (args.print or args.plan):
            return train(recipe)
        check_start(recipe)  # what a run refuses at its start, said here too (offline)
        if args.print:
            print(recipe.to_yaml(), end="")
        else:
            from recipes.planner.launch_config import offloads_optimizer, unmodelled_sharding
            from recipes.planner.render import render_plan

            offload, sharding = offloads_optimizer(args.config_file), unmodelled_sharding(args.config_file)
            print(render_plan(recipe, offload_optimizer=offload, sharding=sharding))

    # A UserError is the user's to fix: its message, not a traceback. So is Ctrl-C: say how to go on.
    return exit_status(
        command,
        interrupted="every checkpoint saved before it is kept; rerun the same command to resume from the newest.",
    )


if __name__ == "__main__":
    status = main()
    if launched_processes() > 1:  # past the interpreter's finalization, where gloo's threads can abort it
        exit_launched_process(status)
    sys.exit(status)
