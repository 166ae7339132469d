r"""A grade the grader could not settle in time is told apart from a settled no match (``Graded.settled``).

The reward keeps its bounded first try (unsettled pays 0, as a no match); ``patient=True`` (evaluation) asks
again at once, past the 30 s pause, with longer bounds.
"""

from __future__ import annotations

import pytest
from _rewards_helpers import busy_grader, forget_grader_answers, stalled_grader

from rewards import _symbolic, _verifier
from rewards.answers import Graded, grade, strict_correct
from rewards.correctness import Correctness

MATRIX = r"\begin{pmatrix} 2 \\ 9 \end{pmatrix}"
TEXT = rf"So the answer is $\boxed{{{MATRIX}}}$."


@pytest.fixture
def fresh(monkeypatch):
    """No remembered answers or failures from other tests, and none left behind."""
    forget_grader_answers(monkeypatch)
    yield
    _symbolic._answer.cache_clear()


@pytest.fixture
def busy(monkeypatch, fresh):
    return busy_grader(monkeypatch)


def test_a_grader_process_timeout_is_unsettled_and_a_patient_grade_settles_it(monkeypatch, fresh):
    """The real grader process: a request past REQUEST_TIMEOUT_S was a plain no match, indistinguishable from a
    wrong answer in an evaluation record."""
    # The grader process is up: patiently, as a busy machine (the full suite) can take the reward's 10 s to start it.
    assert grade(r"\boxed{(-\infty, 2]}", r"(-\infty, 2]", patient=True).correct  # \infty is not is_cheap
    with stalled_grader(monkeypatch) as stalled:  # no answer can come in time
        graded = grade(TEXT, MATRIX)
    assert (graded.correct, graded.settled) == (False, False)
    assert stalled.poll() is not None  # killed: the next request starts a fresh one
    assert graded.found.answer == MATRIX  # an answer was found: only its comparison is undecided
    # The 30 s pause holds the same request back, yet a patient grade asks again at once, with more time.
    graded = grade(TEXT, MATRIX, patient=True)
    assert (graded.correct, graded.settled) == (True, True)


def test_the_reward_pays_nothing_for_an_unsettled_grade_and_never_waits_patiently(busy):
    reward = Correctness(min_tokens=0, full_credit_tokens=1)
    assert reward([TEXT, TEXT], completion_ids=[[1], [1]], gold=[MATRIX, MATRIX]) == [0.0, 0.0]
    assert busy["asked"] == [("fingerprint", False)]  # once; the second sample met the pause
    assert grade(TEXT, MATRIX) == Graded(grade(TEXT, MATRIX).found, False, settled=False)


def test_a_patient_grade_that_still_times_out_stays_unsettled_and_waits_its_own_pause(busy):
    graded = grade(TEXT, MATRIX, patient=True)
    assert (graded.correct, graded.settled) == (False, False)
    assert busy["asked"] == [("fingerprint", True)]  # asked once, patiently
    assert grade(TEXT, MATRIX, patient=True).settled is False
    assert len(busy["asked"]) == 1  # a pathological answer sampled again costs no second minute
    busy["patient_answers"] = True
    assert grade(TEXT, r"\begin{pmatrix} 2 \\ 8 \end{pmatrix}", patient=True).settled is False  # same gold


def test_a_patient_grade_settles_what_the_grader_answers_given_time(busy):
    busy["patient_answers"] = True
    graded = grade(TEXT, MATRIX, patient=True)
    assert (graded.correct, graded.settled) == (True, True)
    wrong = grade(TEXT, r"\begin{pmatrix} 2 \\ 8 \end{pmatrix}", patient=True)
    assert (wrong.correct, wrong.settled) == (False, True)  # a settled no match
    assert strict_correct(rf"<answer>{MATRIX}</answer>", MATRIX, "tags", patient=True)


def test_a_local_math_verify_timeout_is_retried_with_patient_bounds(monkeypatch, fresh, caplog):
    """A cheap answer is compared in this process under math-verify's 1 s alarm; a busy second ran it out."""
    from math_verify.errors import TimeoutException

    real, bounds = _symbolic._verify, []

    def busy_for_a_while(gold, pred):
        bounds.append(_symbolic._seconds())
        if bounds[-1] == 1:  # a busy moment longer than the reward's 1 s bound, shorter than the patient one
            raise TimeoutException("Timeout during comparison")
        return real(gold, pred)

    monkeypatch.setattr(_symbolic, "_verify", busy_for_a_while)
    text, gold = r"\boxed{\frac{3}{7}}", r"\frac{6}{14}"
    assert grade(text, gold).settled is False and "unsettled" in caplog.text
    graded = grade(text, gold, patient=True)
    assert (graded.correct, graded.settled) == (True, True)
    assert bounds == [1, _symbolic.PATIENCE]  # the patient grade ran under five times the bound
    assert _symbolic._seconds() == 1  # and left the bound as it was


def test_a_patient_grade_asks_the_grader_process_once_with_its_longer_bounds(monkeypatch, fresh):
    """A first try with the reward's bounds cost evaluation REQUEST_TIMEOUT_S and a restart of the grader process
    (killed on the timeout, and its remembered parses with it) before every patient one that was needed."""
    other = r"\begin{pmatrix} 1 \\ 3 \end{pmatrix}"
    # The grader process is up (a matrix is compared there); patiently, as a busy machine can take 10 s to start it.
    assert grade(rf"\boxed{{{other}}}", other, patient=True).correct
    pid = _verifier.CLIENT._process.pid
    monkeypatch.setattr(_verifier, "REQUEST_TIMEOUT_S", 0.0)  # a reward-bounded try could never answer
    graded = grade(TEXT, MATRIX, patient=True)
    assert (graded.correct, graded.settled) == (True, True)
    assert _verifier.CLIENT._process.pid == pid  # not killed and started again
