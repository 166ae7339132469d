"""Shared fixtures for the rewards tests: the GSM8K data and TRL-shaped reward arguments."""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gsm8k_dir() -> Path:
    """GSM8K_DATA_DIR, defaulting to ../shared/data/gsm8k beside the repository."""
    return Path(os.environ.get("GSM8K_DATA_DIR", REPO.parent / "shared" / "data" / "gsm8k"))


def gsm8k_rows() -> list[dict]:
    """All GSM8K train+test rows; skips when the data is absent, except under CI=true where that fails."""
    folder = gsm8k_dir()
    paths = [folder / "train.jsonl", folder / "test.jsonl"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        message = f"GSM8K data missing: {', '.join(missing)} (set GSM8K_DATA_DIR)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return [json.loads(line) for path in paths for line in path.read_text(encoding="utf-8").splitlines()]


def gold_of(solution: str) -> str:
    """The gold column as recipes/data.py writes it: the text after the last ``####``, commas removed."""
    return solution.rpartition("####")[2].strip().replace(",", "")


def chat(text: str) -> list[dict]:
    """A completion in TRL's conversational form."""
    return [{"role": "assistant", "content": text}]


# Plug-in rewards for tests of `{path: ...}` specs.
def length_bonus(completions, completion_ids, scale=1.0, cap=10, **kwargs):
    """A plug-in reward: ``scale`` per token, up to ``cap`` tokens."""
    return [scale * min(len(ids), cap) for ids in completion_ids]


class ConstantReward:
    """A plug-in reward class: ``value`` for every completion."""

    def __init__(self, value: float = 1.0):
        self.value = value

    def __call__(self, completions, **kwargs):
        return [self.value] * len(completions)


unpicklable_lambda = lambda completions, **kwargs: [0.0] * len(completions)


def _make_closure():
    def closure_reward(completions, **kwargs):
        return [0.0] * len(completions)

    return closure_reward


unpicklable_closure = _make_closure()
NOT_CALLABLE = 3


def busy_grader(monkeypatch) -> dict:
    """A grader process that times out on every request, patient ones too until ``patient_answers`` is set (then it
    answers them as the grader process would); ``asked`` lists (operation, patient)."""
    from rewards import _symbolic, _verifier

    state = {"asked": [], "patient_answers": False}
    handlers = {"fingerprint": _symbolic.fingerprint_here, "compare": _symbolic.compare_here}

    def request(*message, patient=False):
        state["asked"].append((message[0], patient))
        if patient and state["patient_answers"]:
            return handlers[message[0]](*message[1:])
        raise _verifier.GraderTimeout(
            f"grader process: {message[0]} took too long or failed (no answer in 0 s)"
        )

    monkeypatch.setattr(_verifier.CLIENT, "request", request)
    return state


def forget_grader_answers(monkeypatch) -> None:
    """The grader's remembered answers and failures cleared, as in a new process."""
    from rewards import _symbolic

    monkeypatch.setattr(_symbolic, "_failed_at", {})
    _symbolic._answer.cache_clear()


@contextmanager
def stalled_grader(monkeypatch):
    """The running grader process stopped (SIGSTOP), so that no answer can come, and a short REQUEST_TIMEOUT_S.

    A zero timeout alone was not enough: a busy machine (CI) can run the child between the request and the
    parent's look at the pipe, and an answer the child remembers arrives in time. Continued on exit if the
    client did not kill it, so that a failing test leaves no stopped process to the next one; the timeout restored.
    """
    from rewards import _verifier

    process = _verifier.CLIENT._process
    assert process is not None and process.poll() is None, "start the grader process first"
    before = _verifier.REQUEST_TIMEOUT_S
    os.kill(process.pid, signal.SIGSTOP)
    monkeypatch.setattr(_verifier, "REQUEST_TIMEOUT_S", 0.5)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
        monkeypatch.setattr(_verifier, "REQUEST_TIMEOUT_S", before)
