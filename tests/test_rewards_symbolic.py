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


def test_a_comparison_that_times_out_is_no_match_and_unsettled(monkeypatch):
    from math_verify.errors import TimeoutException

    from rewards import _symbolic

    def slow(gold, pred):
        raise TimeoutException("math-verify ran out of time")

    assert _symbolic.judge("2", r"\frac{4}{2}") == (True, True)
    monkeypatch.setattr(_symbolic, "_verify", slow)
    assert _symbolic.equivalent("2", r"\frac{4}{2}") is False
    assert _symbolic.judge("2", r"\frac{4}{2}") == _symbolic.Verdict(match=False, settled=False)


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
    assert "math-verify ran out of time on '\\\\frac{3}{8}'" in caplog.text


def test_the_grader_process_is_asked_again_a_while_after_a_failure_and_its_answer_remembered(monkeypatch):
    """Its failures were remembered for good: one slow moment made a gold unmatchable for the whole run. Asked at
    once again, the same busy moment failed it again; so it waits RETRY_AFTER_S, then asks."""
    from rewards import _symbolic, _verifier

    asked, replies = [], [_verifier.GraderError("TimeoutException: "), "its fingerprint"]

    def request(*message):
        asked.append(message)
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(_verifier.CLIENT, "request", request)
    monkeypatch.setattr(_symbolic, "_failed_at", {})
    _symbolic._answer.cache_clear()
    message = ("fingerprint", r"\begin{pmatrix} 7 \end{pmatrix}")
    assert _symbolic._remote(*message) is _symbolic._FAILED
    assert _symbolic._remote(*message) is _symbolic._FAILED and len(asked) == 1  # not asked within the pause
    monkeypatch.setattr(_symbolic, "RETRY_AFTER_S", 0.0)
    assert _symbolic._remote(*message) == "its fingerprint" == _symbolic._remote(*message)
    assert asked == [message, message]  # the answer is remembered
    _symbolic._answer.cache_clear()


def test_a_comparison_timeout_in_the_grader_process_is_an_error_reply_not_a_remembered_no_match(monkeypatch):
    """math-verify's verify calls its own timeout no match: the grader process sent False, which was kept."""
    from math_verify.errors import TimeoutException

    from rewards import _symbolic

    def slow(*args, **kwargs):
        raise TimeoutException("Timeout during comparison")

    monkeypatch.setattr(_symbolic, "verify", slow)
    assert _symbolic.judge("[1, 2]", "[1,2]") == (False, False)  # here: unsettled, said in the log
    monkeypatch.setattr(_symbolic, "_where", "grader process")
    with pytest.raises(TimeoutException):
        _symbolic.compare_here("[1, 2]", "[1,2]")
