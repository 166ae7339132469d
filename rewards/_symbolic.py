"""Symbolic answers (``\\frac{1}{2}``, ``\\dfrac12``, ``3/4``) compared through math-verify, in bounded time.

math-verify bounds its own work with ``signal.alarm``, which only works on the main thread: elsewhere
(an async reward on TRL's event-loop thread, a thread pool) we pass ``None`` as its timeouts. The real
bound is ours and holds on every thread: only short expressions built from small numbers, arithmetic,
``\\frac``/``\\sqrt``/``\\pi`` and at most one one-digit exponent ever reach sympy (see ``is_cheap``).
A signal cannot interrupt a C-level big-integer power anyway, so ``\\boxed{9^{9^{9^9}}}`` must never
reach sympy at all.
"""

from __future__ import annotations

import logging
import re
import threading

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException

MAX_SYMBOLIC_CHARS = 48
_MAX_DIGITS = 15
_MAX_ROOT_DIGITS = 7  # sympy factors radicands: 0.3-0.5 s for some 10-12 digit ones
_MAX_ROOTS = 2
_MAX_NESTING = 2
_ALLOWED_COMMANDS = frozenset({"frac", "dfrac", "tfrac", "sqrt", "pi", "cdot", "times", "div"})
_COMMAND = re.compile(r"\\([A-Za-z]+)")
# What may remain once the allowed commands are removed: no letters, so no symbols for sympy to expand.
_ALLOWED_REST = re.compile(r"[0-9{}()\[\]+\-*/^., ]*")
_LONG_DIGIT_RUN = re.compile(rf"[0-9]{{{_MAX_DIGITS + 1},}}")
_LONG_ROOT_DIGIT_RUN = re.compile(rf"[0-9]{{{_MAX_ROOT_DIGITS + 1},}}")
_SMALL_POWER = re.compile(r"\^(?:[0-9]|\{-?[0-9]\})")
_EXTRACTION = (LatexExtractionConfig(), ExprExtractionConfig())
_MAIN_THREAD_TIMEOUT_S = 1
logger = logging.getLogger(__name__)


class _DropTimeoutDisabledNotice(logging.Filter):
    """math-verify warns once per process that timeouts are off; off the main thread ours apply instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutDisabledNotice())


def _nesting(expression: str) -> int:
    depth = deepest = 0
    for char in expression:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


def is_cheap(expression: str) -> bool:
    """Whether sympy settles ``expression`` in milliseconds on any thread.

    Short; numbers of at most 15 digits (7 next to a square root, whose radicand sympy factors); no
    letters but ``\\frac``/``\\sqrt``/``\\pi``/``\\cdot``-like commands (``(x+y+z+w+v+u+t)^9`` takes
    sympy 20 s); brackets nested at most two deep (math-verify's LaTeX parsing grows exponentially with
    depth: 24 s at 16); at most two square roots (no n-th roots) and no power next to a root
    (expanding ``(\\sqrt{2}+\\sqrt{3}+...)^9`` takes seconds); at most one power, with a one-digit
    exponent. Measured worst case on what passes: about 0.2 s.

    >>> [is_cheap(e) for e in (r"\\frac{\\sqrt{4}}{2}", "2^{9}", "9^{9^{9^9}}", r"\\int_0^1 x", "(x+y)^9", "(((1)))")]
    [True, True, False, False, False, False]
    """
    if len(expression) > MAX_SYMBOLIC_CHARS or _LONG_DIGIT_RUN.search(expression):
        return False
    commands = _COMMAND.findall(expression)
    if any(command not in _ALLOWED_COMMANDS for command in commands):
        return False
    if not _ALLOWED_REST.fullmatch(_COMMAND.sub("", expression)):
        return False
    if _nesting(expression) > _MAX_NESTING:
        return False
    roots, powers = commands.count("sqrt"), expression.count("^")
    if roots > _MAX_ROOTS or "\\sqrt[" in expression or (roots and powers):
        return False
    if roots and _LONG_ROOT_DIGIT_RUN.search(expression):
        return False
    return powers == 0 or (powers == 1 and _SMALL_POWER.search(expression) is not None)


def equivalent(gold: str, pred: str) -> bool:
    """Whether two answers are mathematically equal per math-verify; False when either is not cheap.

    >>> equivalent("0.5", r"\\frac{1}{2}"), equivalent("18", r"\\dfrac{36}{2}"), equivalent("3", "2^9")
    (True, True, False)
    """
    if not (is_cheap(gold) and is_cheap(pred)):
        return False
    on_main = threading.current_thread() is threading.main_thread()
    seconds = _MAIN_THREAD_TIMEOUT_S if on_main else None
    try:
        gold_parsed = parse(f"${gold}$", extraction_config=_EXTRACTION, parsing_timeout=seconds)
        pred_parsed = parse(f"${pred}$", extraction_config=_EXTRACTION, parsing_timeout=seconds)
        return bool(gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=seconds))
    except (Exception, TimeoutException):  # model output must never crash training: log it, grade as wrong
        logger.debug("math-verify failed on gold %r, prediction %r", gold, pred, exc_info=True)
        return False
