"""Command lines end with a message, never a traceback, for what the user can act on: a UserError or Ctrl-C."""

from __future__ import annotations

import pytest

from common.errors import UserError, exit_status


def test_exit_status_turns_user_errors_and_ctrl_c_into_messages(capsys):
    def fails():
        raise UserError("trainer.max_steps in recipe.yaml must be a positive integer, got 0.")

    def interrupted():
        raise KeyboardInterrupt

    assert exit_status(lambda: None) == 0
    assert exit_status(fails) == 2
    assert (
        capsys.readouterr().err
        == "error: trainer.max_steps in recipe.yaml must be a positive integer, got 0.\n"
    )
    assert exit_status(interrupted, interrupted="rerun the same command to resume.") == 130
    assert capsys.readouterr().err == "\ninterrupted: rerun the same command to resume.\n"
    with pytest.raises(
        KeyboardInterrupt
    ):  # a command that has nothing to say about Ctrl-C keeps Python's way
        exit_status(interrupted)


def test_a_training_run_stopped_with_ctrl_c_says_how_to_resume(monkeypatch, capsys):
    import recipes.run

    def train(recipe):
        raise KeyboardInterrupt

    monkeypatch.setattr(recipes.run, "train", train)
    assert recipes.run.main(["gsm8k_tiny"]) == 130
    assert (
        "interrupted: every checkpoint saved before it is kept; rerun the same command"
        in capsys.readouterr().err
    )
