r"""The one grader on MATH's LaTeX answers: math-verify's verdicts, bounded in time, on every kind of answer.

MATH-500 checks the whole benchmark: each reference solution is correct against its own answer, and graded
correct against another problem's answer only where math-verify itself finds the two answers equal
(``x=5`` and ``5``, ``30^\circ`` and ``30``).
"""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from _rewards_helpers import forget_grader_answers, stalled_grader
from math_verify import parse, verify

from rewards import _verifier
from rewards.answers import grade, is_correct, read_gold

# (gold, completion's boxed answer) pairs that are equal ...
EQUAL = {
    "fraction": (r"\frac{3}{4}", r"\dfrac34"),
    "fraction as decimal": (r"\frac{3}{56}", r"\frac{6}{112}"),
    "radical": (r"2\sqrt{2}", r"\sqrt{8}"),
    "rationalised radical": (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}"),
    "degrees": (r"90^\circ", "90"),
    "degrees in the answer": ("28", r"28^\circ"),
    "degrees in braces": ("28", r"28^{\circ}"),
    "plus-minus": (r"1 \pm \sqrt{19}", r"1+\sqrt{19}, 1-\sqrt{19}"),
    "plus-minus as written": (r"1 \pm \sqrt{19}", r"1 \pm \sqrt{19}"),
    "interval": (r"\left[ -2, 7 \right]", "[-2,7]"),
    "interval to infinity": (r"(-\infty, 0]", r"(-\infty,0]"),
    "interval from a number to infinity": (r"(2,\infty)", r"(2, \infty)"),
    "union": (r"(-\infty, 1) \cup (2, \infty)", r"(-\infty,1)\cup(2,\infty)"),
    "set": (r"\{1, 2\}", r"\{2, 1\}"),
    "list of roots": ("3, 5, 7", "7, 5, 3"),
    "tuple": (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \tfrac{\pi}{2})"),
    "vector": (r"\begin{pmatrix} 1/5 \\ -18/5 \end{pmatrix}", r"\begin{pmatrix}0.2\\-3.6\end{pmatrix}"),
    "matrix": (r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}", r"\begin{pmatrix}-1&0\\0&-1\end{pmatrix}"),
    "complex": ("6 - 5i", "-5i+6"),
    "polynomial": ("x^2+2x+1", "(x+1)^2"),
    "expression": ("p - q", "-q + p"),
    "equation": ("y = -2x", "y=-2x"),
    "assignment": ("x=5", "5"),
    "text answer": (r"\text{Evelyn}", "Evelyn"),
    "multiple choice": (r"\text{(C)}", "C"),
    "units": (r"5\text{ cm}", "5"),
    "squared units": ("5", r"5\text{ cm}^2"),
    "money": (r"\$18.90", "18.9"),
    "separators": (r"10,\!080", "10080"),
    "percent": (r"10\%", "10"),
}
# ... and unequal.
UNEQUAL = {
    "fraction": (r"\frac{3}{4}", r"\frac{4}{3}"),
    "radical": (r"2\sqrt{2}", r"\sqrt{2}"),
    "degrees": (r"90^\circ", "45"),
    "plus-minus, one root": (r"1 \pm \sqrt{19}", r"1 + \sqrt{19}"),
    "open interval": ("[-2, 7]", "(-2, 7)"),
    "infinity's sign": (r"-\infty", r"\infty"),
    "interval to infinity": (r"(-\infty, 0]", r"(-\infty, 1]"),
    "union": (r"(-\infty, 1) \cup (2, \infty)", r"(-\infty,1]\cup(2,\infty)"),
    "set": (r"\{1, 2\}", r"\{1, 3\}"),
    "tuple order": ("(1, 2)", "(2, 1)"),
    "vector": (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix}2\\1\end{pmatrix}"),
    "complex": ("6-5i", "6+5i"),
    "polynomial": ("x^2+2x+1", "x^2+2x+2"),
    "expression": ("p - q", "q - p"),
    "text answer": (r"\text{Evelyn}", r"\text{Bob}"),
    "multiple choice": (r"\text{(C)}", r"\text{(D)}"),
    "number for a tuple": (r"\left( 3, \frac{\pi}{2} \right)", "3"),
    "number for an interval": ("(3,4]", "3"),
    "number for a complex": ("1+2i", "3"),
    "radians for degrees": (r"90^\circ", r"\frac{\pi}{2}"),
    "a squared variable is no unit": ("3", r"3 x^2"),
    "a cubed variable is no unit": ("8", r"8 t^3"),
}


@pytest.mark.parametrize(("gold", "answer"), EQUAL.values(), ids=EQUAL.keys())
def test_equal_answers_of_every_kind_are_correct(gold, answer):
    assert is_correct(rf"Reasoning first. So the answer is $\boxed{{{answer}}}$.", gold)


@pytest.mark.parametrize(("gold", "answer"), UNEQUAL.values(), ids=UNEQUAL.keys())
def test_unequal_answers_of_every_kind_are_wrong(gold, answer):
    assert not is_correct(rf"Reasoning first. So the answer is $\boxed{{{answer}}}$.", gold)
    assert not verify(parse(f"${gold}$"), parse(f"${answer}$"))  # the pair really is unequal for math-verify


def test_a_number_gold_grades_as_before_and_a_latex_gold_goes_to_math_verify():
    assert read_gold("#### 1,080") == ("1080", False) and read_gold(r"5\text{ cm}") == ("5", False)
    assert read_gold("[-2, 7]") == ("[-2, 7]", True)
    # A hedged answer scores nothing, unless the gold is hedged the same way.
    assert grade(r"\boxed{18 \pm 1}", "18").found is None
    assert grade(r"\boxed{x = 1 \pm \sqrt{19}}", "19").found is None
    assert grade(r"\boxed{1 \pm \sqrt{19}}", r"1 \pm \sqrt{19}").correct
    assert grade(r"\boxed{3 or 4}", r"1 \pm \sqrt{19}").found is None


@pytest.mark.parametrize("text", ["", "no answer at all", r"\boxed{}", r"\boxed{\frac{", "\\boxed{" * 5000])
def test_completions_without_an_answer_are_wrong_not_errors(text):
    assert grade(text, r"\left( 3, \frac{\pi}{2} \right)").correct is False


def test_latex_answers_grade_the_same_off_the_main_thread():
    """Off the main thread math-verify has no timeout: the grader process gives the bound instead."""
    cases = list(EQUAL.values()) + list(UNEQUAL.values())
    on_main = [is_correct(rf"\boxed{{{answer}}}", gold) for gold, answer in cases]
    with ThreadPoolExecutor(max_workers=2) as pool:
        off_main = list(pool.map(lambda case: is_correct(rf"\boxed{{{case[1]}}}", case[0]), cases))
    assert threading.current_thread() is threading.main_thread()
    assert off_main == on_main == [True] * len(EQUAL) + [False] * len(UNEQUAL)


def test_a_request_past_its_time_is_wrong_and_the_grader_process_restarts(monkeypatch, caplog):
    # An earlier test's answer for a pair would come without a request: forgotten first, so that this one starts the
    # grader process if an earlier timeout killed it (a remembered answer left it down, and stalled_grader failed).
    forget_grader_answers(monkeypatch)
    # The grader process is up (\infty is not is_cheap): patiently, as a busy machine can take the reward's 10 s.
    assert grade(r"\boxed{(-\infty, 2]}", r"(-\infty, 2]", patient=True).correct
    first = _verifier.CLIENT._process
    with stalled_grader(monkeypatch):  # no answer can come in time
        assert (
            is_correct(
                r"\boxed{\begin{pmatrix} 1 \\ 3 \end{pmatrix}}", r"\begin{pmatrix} 1 \\ 3 \end{pmatrix}"
            )
            is False
        )
    assert "no match" in caplog.text and first.poll() is not None  # killed, not left running
    assert is_correct(r"\boxed{(-\infty, 4]}", r"(-\infty, 4]") is True  # a fresh grader process answers
    assert _verifier.CLIENT._process is not first


@pytest.mark.slow
def test_math500_reference_solutions_are_correct_and_only_equal_answers_cross_grade(math_dir):
    rows = [json.loads(line) for line in (math_dir / "math500_test.jsonl").read_text().splitlines()]
    golds = {row["answer"]: read_gold(row["answer"]) for row in rows}  # 301 answers, each graded against once
    assert [grade(row["solution"], golds[row["answer"]]).correct for row in rows] == [True] * len(rows)
    crossed = {
        (row["answer"], answer)
        for row in rows
        for answer, gold in golds.items()
        if answer != row["answer"] and grade(row["solution"], gold).correct
    }
    # Every cross match is a pair of answers math-verify itself finds equal: x=5 and 5, 30^\circ and 30.
    assert [pair for pair in crossed if not verify(parse(f"${pair[1]}$"), parse(f"${pair[0]}$"))] == []
    assert len(crossed) < 40  # 22 pairs today; a grader accepting far more would be too lenient


def test_the_correctness_reward_and_its_telemetry_work_on_math_golds():
    from rewards.correctness import Correctness

    gold = r"\left( 3, \frac{\pi}{2} \right)"
    completions = [
        r"The angle is a right angle, so $\boxed{(3, \tfrac{\pi}{2})}$.",  # correct, long enough
        r"So $\boxed{(3, \pi)}$.",  # a wrong tuple
        "I am not sure.",  # no answer
        r"Short: $\boxed{\left(3,\frac{\pi}{2}\right)}$",  # correct, too short for full credit
    ]
    metrics, extras = {}, {}
    rewards = Correctness(reward=5.0, min_tokens=2, full_credit_tokens=10, max_completion_length=12)(
        completions=completions,
        completion_ids=[[1] * 12, [1] * 4, [1] * 3, [1] * 6],
        gold=[gold] * 4,
        log_metric=metrics.__setitem__,
        log_extra=extras.__setitem__,
    )
    assert rewards == [5.0, 0.0, 0.0, pytest.approx(5.0 * (6 - 2) / (10 - 2))]
    assert extras["answer"] == [r"(3, \tfrac{\pi}{2})", r"(3, \pi)", None, r"\left(3,\frac{\pi}{2}\right)"]
    assert metrics["answers/correct"] == 0.5 and metrics["answers/unparseable"] == 0.25
    assert metrics["answers/truncated"] == 0.25 and metrics["answers/correct_tokens"] == 9.0
