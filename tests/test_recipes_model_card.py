"""The model card a run writes beside its adapter (recipes/model_card.py): metrics, steps, held-out results.

tests/test_recipes_rerun.py checks the card of a real run.
"""

from __future__ import annotations

from recipes.recipe import load_recipe


def test_the_model_card_gives_every_rewards_mean_a_plugins_too():
    from recipes.model_card import final_metrics

    logged = {
        "step": 8,
        "reward": 0.5,
        "rewards/correctness/mean": 0.4,
        "rewards/brevity/mean": -0.2,
        "kl": 0.01,
    }
    step, metrics = final_metrics([{"step": 9, "heldout/accuracy": 0.3}, logged])
    assert step == 8 and list(metrics.items()) == [
        ("mean total reward (weighted)", 0.5),
        ("mean brevity reward", -0.2),
        ("mean correctness reward", 0.4),
        ("KL to the base", 0.01),
    ]


def test_a_reward_that_applied_to_no_completion_of_the_last_step_is_said_not_formatted():
    """TRL logs such a reward's mean as None; formatting it crashed the run's end, and every re-run of it."""
    from recipes.model_card import model_card

    logged = {"step": 2, "reward": 0.0, "rewards/none_in_training/mean": None}
    card = model_card(load_recipe("gsm8k_tiny"), [logged], "outputs/run")
    assert "- mean none_in_training reward: none (it applied to no completion)" in card


def test_the_model_card_of_a_run_trained_by_epochs_counts_no_negative_steps():
    """With trainer.max_steps=-1 the card said "Training: 4 of -1 steps"."""
    from recipes.model_card import model_card

    by_epochs = load_recipe("gsm8k_tiny", ["trainer.max_steps=-1", "trainer.num_train_epochs=2"])
    card = model_card(by_epochs, [{"step": 4, "reward": 0.5}], "outputs/run")
    assert "- Training: 4 steps (trainer.num_train_epochs 2), learning rate" in card
    assert "- Training: 4 of 8 steps," in model_card(
        load_recipe("gsm8k_tiny"), [{"step": 4, "reward": 0.5}], "x"
    )


def test_the_model_card_says_when_the_run_stopped_early_and_the_adapter_is_not_the_best():
    from recipes.model_card import heldout_lines

    entry = {"questions": 50, "samples": 4}
    history = {
        "evaluations": [{**entry, "step": 20, "accuracy": 0.3}, {**entry, "step": 40, "accuracy": 0.25}],
        "stopped": {"step": 40, "reason": "no new best in 1 evaluations"},
        "alarms": [{"kind": "kl_spike", "steps": [20, 40], "message": "kl rose 9x"}],
    }
    text = "\n".join(heldout_lines(history, "outputs/run"))
    assert "Alarm kl_spike at step 40: kl rose 9x" in text
    assert (
        "Held-out accuracy (50 questions x 4 samples, never trained on): 25.0% at step 40; best 30.0% at step 20."
        in text
    )
    assert "The run ended early at step 40: no new best in 1 evaluations." in text
    assert "This adapter is the final one (step 40), not the best: `outputs/run/best` names the best" in text
    assert heldout_lines(None, "outputs/run") == []


def test_a_run_whose_checkpoints_all_fell_below_the_base_model_says_so_rather_than_recommending_one():
    """A gamed reward took held-out accuracy from 15.5% to 0.0%; the card told the user to evaluate or export the
    "best" checkpoint, at 0.0%."""
    from recipes.model_card import heldout_lines

    entry = {"questions": 200, "samples": 1}
    evaluations = [
        {**entry, "step": 0, "accuracy": 0.155, "saved": False},
        *({**entry, "step": step, "accuracy": 0.0} for step in (50, 100, 150, 200)),
    ]
    text = "\n".join(heldout_lines({"evaluations": evaluations}, "outputs/run"))
    assert (
        "No checkpoint beat the model before training on held-out accuracy (step 0: 15.5%; the best checkpoint, "
        "step 50: 0.0%): the base model did as well as or better than every adapter this run saved." in text
    )
    assert "evaluate or export that one" not in text
    evaluations[2]["accuracy"] = 0.2  # step 100 beats the base: recommended again
    text = "\n".join(heldout_lines({"evaluations": evaluations}, "outputs/run"))
    assert "No checkpoint beat" not in text and "(step 100, 20.0%); evaluate or export that one" in text
