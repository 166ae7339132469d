r"""Which answers rewards._symbolic settles on the asking thread (``is_cheap``): every bound at its edge, since a
wrongly cheap answer runs math-verify without a timeout off the main thread."""

import time

import pytest

from rewards._symbolic import is_cheap


@pytest.mark.parametrize(
    ("expression", "cheap"),
    [
        ("1+" * 23 + "11", True),  # 48 characters
        ("1+" * 24 + "1", False),  # 49
        ("1" * 15, True),
        ("1" * 16, False),
        (r"\sqrt{1234567}", True),  # a radicand of 7 digits
        (r"\sqrt{12345678}", False),
        (r"\sqrt{2}+\sqrt{3}", True),
        (r"\sqrt{2}+\sqrt{3}+\sqrt{5}", False),
        (r"\sqrt[3]{2}", False),
        (r"\sqrt{2}^2", False),
        ("2^{9}", True),
        ("2^{10}", False),
        ("2^3+3^2", False),
        (r"\pi", True),
        ("x+1", False),
        (r"\alpha", False),
        ("(1)+(2)+(3)", True),  # brackets closed again do not add up
        ("((1)+(2))", True),
        ("((1))((2))", True),
        ("(1)(((2)))", False),  # three deep after a closed pair
    ],
)
def test_is_cheap_at_each_bound(expression, cheap):
    assert is_cheap(expression) is cheap


def test_a_comparison_that_times_out_is_no_match(monkeypatch):
    from math_verify.errors import TimeoutException

    from rewards import _symbolic

    def slow(gold, pred):
        raise TimeoutException("math-verify ran out of time")

    assert _symbolic.compare_here("2", r"\frac{4}{2}")
    monkeypatch.setattr(_symbolic, "_verify", slow)
    assert _symbolic.compare_here("2", r"\frac{4}{2}") is False


def test_a_parse_that_ran_out_of_time_is_parsed_again_next_time(monkeypatch, caplog):
    """math-verify's parse gave [] on a timeout and the cache kept it: after one busy moment (its first parse pays
    a one-time setup of over 1 s on a loaded machine) a gold stayed unparseable, every sample of it wrong."""
    import threading

    from math_verify import parser

    from rewards import _symbolic

    assert threading.current_thread() is threading.main_thread()  # where math-verify's own timeout applies
    gold, answer = r"\frac{3}{8}", "0.375"
    assert _symbolic.equivalent("2", r"\frac{4}{2}")  # setup done
    _symbolic._parse.cache_clear(), _symbolic.fingerprint_here.cache_clear()
    extract, busy = parser.extract_target_from_pred, [gold]

    def loaded(pred, *args, **kwargs):
        if busy and busy[0] in pred:
            busy.pop()
            time.sleep(5)  # math-verify's 1 s alarm stops it
        return extract(pred, *args, **kwargs)

    monkeypatch.setattr(parser, "extract_target_from_pred", loaded)
    assert _symbolic.equivalent(gold, answer) is False and not busy
    assert _symbolic.equivalent(gold, answer) is True
    assert "math-verify ran out of time parsing '\\\\frac{3}{8}'" in caplog.text


def test_the_grader_process_is_asked_again_after_a_failure_but_not_a_third_time(monkeypatch):
    """Its failures were remembered at once: one slow moment made a gold unmatchable for the whole run. An
    answer that fails twice is not asked again, so a costly one costs its timeout at most twice."""
    from rewards import _symbolic, _verifier

    asked, replies = [], [_verifier.GraderTimeout("no answer in 10 s"), "its fingerprint"]

    def request(*message):
        asked.append(message)
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(_verifier.CLIENT, "request", request)
    _symbolic._answer.cache_clear()
    monkeypatch.setattr(_symbolic, "_failures", {})
    message = ("fingerprint", r"\begin{pmatrix} 7 \end{pmatrix}")
    assert _symbolic._remote(*message) is _symbolic._FAILED
    assert _symbolic._remote(*message) == "its fingerprint" == _symbolic._remote(*message)
    assert len(asked) == 2  # the answer is remembered
    costly = ("compare", "1", r"\int_0^{9^9} x")
    replies[:] = [_verifier.GraderError("TimeoutException: "), _verifier.GraderTimeout("no answer in 10 s")]
    assert [_symbolic._remote(*costly) for _ in range(3)] == [_symbolic._FAILED] * 3
    assert asked[2:] == [costly, costly]
    _symbolic._answer.cache_clear()
