"""Numeric fingerprints of parsed answers: deciding "surely not equal" without asking sympy.

math-verify settles most unequal pairs in 1-4 ms of sympy work (intervals against numbers are the slowest);
grading a batch of MATH completions, or every MATH-500 solution against every other answer, is mostly such
pairs. A fingerprint evaluates a parsed answer once: scalars to a complex number (free symbols replaced by
fixed values chosen from their names, so ``p - q`` and ``q - p`` differ), intervals to their endpoints and
openness, matrices to their entries. Two answers whose fingerprints differ cannot be equal for math-verify:
its string, numeric and symbolic checks all imply equal values at any point, and its float rounding (6
decimals) is far inside our 1e-5 relative tolerance. Anything else (sets, tuples, bare symbols such as
``\\text{Evelyn}``, percentages, inequalities) gets no fingerprint and goes to math-verify.
"""

from __future__ import annotations

import cmath

_RELATIVE_TOLERANCE = 1e-5


def _value(expr) -> complex | None:
    """A scalar expression's value with free symbols set to name-derived rationals; None if it has none."""
    import sympy

    try:
        point = {s: sympy.Rational(1009 + 7 * sum(map(ord, str(s))), 997) for s in expr.free_symbols}
        return complex(expr.subs(point).evalf(30))
    except Exception:  # noqa: BLE001 - unevaluated functions, a pole at the point, ...: no fingerprint
        return None


def fingerprint_one(item):
    """The fingerprint of one element of math-verify's ``parse`` result, or None."""
    import sympy
    from sympy import Eq, Expr, Interval, MatrixBase, Symbol, UnevaluatedExpr, Union

    if isinstance(item, str):
        return ("str", item.strip())
    if isinstance(item, Eq):
        # math-verify compares an equation with a non-equation through its right side (x = 5 and 5).
        rhs = fingerprint_one(item.rhs)
        return None if rhs is None else ("eq", isinstance(item.lhs, Symbol), rhs)
    if isinstance(item, Interval):
        ends = (_value(item.start), _value(item.end))
        return None if None in ends else ("interval", item.left_open, item.right_open, *ends)
    if isinstance(item, Union):
        return ("union",)
    if isinstance(item, MatrixBase):
        entries = tuple(_value(e) for e in item)
        return None if None in entries else ("matrix", item.shape, entries)
    if isinstance(item, Expr) and not isinstance(item, Symbol) and not item.has(UnevaluatedExpr):
        if item.is_Relational or isinstance(item, sympy.Tuple):
            return None
        value = _value(item)
        return None if value is None else ("num", value)
    return None


def fingerprint(parsed: list) -> tuple | None:
    """Fingerprints of every element of a ``parse`` result (None when any element has none)."""
    prints = tuple(fingerprint_one(item) for item in parsed)
    return None if not prints or None in prints else prints


def _close(a: complex, b: complex) -> bool:
    """Equal within the tolerance; an infinite end (``(-\\infty, 2]``) only equals the same infinity (inf - inf is
    nan); a nan value proves nothing, so it is left to math-verify."""
    if a == b or cmath.isnan(a) or cmath.isnan(b):
        return True
    if cmath.isinf(a) or cmath.isinf(b):
        return False
    return abs(a - b) <= _RELATIVE_TOLERANCE * max(1.0, abs(a), abs(b))


def _differ(gold, pred) -> bool:
    """Whether one gold element and one predicted element surely compare unequal in math-verify."""
    if gold[0] == "str" or pred[0] == "str":  # math-verify compares strings only with strings
        return gold != pred
    if gold[0] == "eq" and pred[0] == "eq":
        return False  # equation against equation: math-verify solves them; leave it to math-verify
    if pred[0] == "eq":
        return _differ(gold, pred[2])
    if gold[0] == "eq":
        return gold[1] and _differ(gold[2], pred)  # only an assignment (x = 5) is compared by its value
    kinds = {gold[0], pred[0]}
    if kinds == {"num"}:
        return not _close(gold[1], pred[1])
    if kinds == {"interval"}:
        same = gold[1:3] == pred[1:3] and _close(gold[3], pred[3]) and _close(gold[4], pred[4])
        return not same
    if kinds == {"matrix"}:
        return gold[1] != pred[1] or not all(map(_close, gold[2], pred[2]))
    # A number is never an interval or a union; other mixes (a 1x1 matrix, union and interval) go to math-verify.
    return kinds in ({"num", "interval"}, {"num", "union"})


def surely_different(gold: tuple | None, pred: tuple | None) -> bool:
    """Whether math-verify would find no pair of elements equal (it compares every gold x pred pair)."""
    if gold is None or pred is None:
        return False
    return all(_differ(g, p) for g in gold for p in pred)
