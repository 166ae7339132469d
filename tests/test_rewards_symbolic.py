r"""Which answers rewards._symbolic settles on the asking thread (``is_cheap``): every bound at its edge, since a
wrongly cheap answer runs math-verify without a timeout off the main thread."""

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
