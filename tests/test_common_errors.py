"""Command lines end with a message, never a traceback, for what the user can act on: a UserError, Ctrl-C, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from common.errors import UserError, exit_status, say_error


@pytest.mark.parametrize("module", ["stats.compare", "stats.curves"])
def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path, module):
    """``python -m stats.compare a b | head -3`` ended in a BrokenPipeError traceback."""
    import subprocess
    import sys

    from _stats_helpers import outcomes_from_counts, write_records, write_trainer_state

    a = write_records(tmp_path / "a.jsonl", outcomes_from_counts([1, 2, 0, 3], 3))
    b = write_records(tmp_path / "b.jsonl", outcomes_from_counts([2, 2, 1, 3], 3))
    write_trainer_state(tmp_path / "run" / "trainer_state.json", list(range(1, 13)))
    arguments = [str(a), str(b)] if module == "stats.compare" else [str(tmp_path / "run")]
    command = [sys.executable, "-m", module, *arguments]
    # The reader is gone before the report is written: its end is closed before the command starts. Closed after
    # Popen, a busy machine could run the command to its end first, and the report went into the pipe's buffer.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


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


def test_sigterm_stops_a_command_as_ctrl_c_does_with_the_status_a_shell_gives_it(capsys):
    """`kill`, `timeout`, a batch scheduler, or the launcher's death (PR_SET_PDEATHSIG) ended a run silently."""
    before = signal.getsignal(signal.SIGTERM)

    def terminated():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends

    started = time.monotonic()
    assert exit_status(terminated, interrupted="rerun the same command to resume.") == 128 + signal.SIGTERM
    assert time.monotonic() - started < 4
    assert capsys.readouterr().err == "\ninterrupted: rerun the same command to resume.\n"
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the command's alone


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


def test_ctrl_c_during_a_progress_bar_says_how_to_go_on_on_a_line_of_its_own(capsys):
    """The bar was drawn again under the message at exit: "interrupted: ..." then " 7%|7  | 29/400 [...]"."""
    from tqdm import tqdm

    bar = tqdm(total=400)
    bar.update(29)

    def interrupted():
        raise KeyboardInterrupt

    assert exit_status(interrupted, interrupted="rerun the same command to resume.") == 130
    err = capsys.readouterr().err
    *_, bar_line, said, end = err.split("\n")
    assert "29/400" in bar_line and said == "interrupted: rerun the same command to resume." and end == "", (
        err
    )
    assert bar not in tqdm._instances


def test_under_torchrun_a_machines_processes_say_an_error_once_and_their_own_with_their_rank(
    monkeypatch, tmp_path, capsys
):
    """torchrun gives each process <attempt>/<local rank>/error.json; its report quotes the one that failed first."""
    files = {rank: tmp_path / "attempt_0" / rank / "error.json" for rank in ("0", "1")}
    for file in files.values():
        file.parent.mkdir(parents=True)

    def say(local_rank: str, message: str) -> str:
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(files[local_rank]))
        monkeypatch.setenv("LOCAL_RANK", local_rank)
        monkeypatch.setenv("RANK", str(int(local_rank) + 2))  # the second machine's
        say_error(message)
        return capsys.readouterr().err

    assert say("0", "bad key") == "error: bad key\n"
    first = json.loads(files["0"].read_text())
    assert first["message"] == "error: bad key"
    assert say("1", "bad key") == ""  # local rank 0 said it
    # Later than local rank 0's: the report's root cause is the earliest, and a tie went to the first to exit.
    assert json.loads(files["1"].read_text()) == {
        "message": "error: the same as local rank 0's",
        "timestamp": first["timestamp"] + 1,
    }
    assert say("1", "no such file") == "error (rank 3): no such file\n"
    assert json.loads(files["1"].read_text())["message"] == "error: no such file"


def test_an_error_during_a_progress_bar_starts_a_line_of_its_own(capsys, monkeypatch):
    """A reward's error mid-training followed the bar on its line: "1/8 [00:00<00:02, 2.44it/s]error: rewards[1]"."""
    from tqdm import tqdm

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    bar = tqdm(total=8)
    bar.update(1)
    say_error("rewards[1] (late_inf) returned an infinite reward at step 2")
    err = capsys.readouterr().err
    assert "\nerror: rewards[1] (late_inf)" in err and "it/s]error" not in err
    assert bar.disable or bar not in tqdm._instances
