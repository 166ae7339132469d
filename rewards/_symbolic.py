"""Answers compared as math-verify compares them, in bounded time on any thread.

Two paths, the same verdicts. An answer that ``is_cheap`` (short, small numbers, arithmetic, ``\\frac``,
``\\sqrt``, ``\\pi``: what GSM8K-style answers are) is parsed and compared here: sympy settles it in
milliseconds, so no timeout is needed on any thread. Anything else (MATH's intervals, matrices, polynomials,
``\\text{...}`` answers) goes to the grader process (``rewards._verifier``), which runs math-verify with its
own timeouts on its main thread while the asking thread waits a bounded time.

Before any sympy comparison, fingerprints (``rewards._fingerprint``) settle the pairs that surely differ:
most wrong answers, at a fraction of math-verify's cost.

A comparison that runs out of time (math-verify's own bound, or the grader process's) is no match, and
``judge`` says it was not settled: a reward takes the no match at once, while evaluation (``patient=True``)
compares with PATIENCE times longer bounds, so a busy machine does not pass for a wrong answer.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from itertools import product
from typing import NamedTuple

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException

from rewards._fingerprint import fingerprint, surely_different
from rewards._verifier import CLIENT, GraderTimeout

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
# A power in an exponent (9^{9^9}, 2^2^2): a number of hundreds of millions of digits at best.
_TOWER = re.compile(r"\^\s*(?:\{[^{}]*\^|[0-9A-Za-z]\s*\^)")
_SMALL_POWER = re.compile(r"\^(?:[0-9]|\{-?[0-9]\})")
_EXTRACTION = (LatexExtractionConfig(), ExprExtractionConfig())
# math-verify's own bound per parse and per comparison on a main thread: 1 s here, 3 s in the grader process.
MAIN_THREAD_TIMEOUT_S = {"here": 1, "grader process": 3}
# How much longer those bounds are for evaluation, which can wait where a reward cannot (``patient``).
PATIENCE = 5
_where = "here"
# Whether this thread is asking patiently (set by ``patience``): per thread, so a reward thread stays impatient.
_patient: ContextVar[bool] = ContextVar("patient", default=False)
_CACHE_SIZE = 4096
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


def _seconds() -> int | None:
    """math-verify's timeout: signal.alarm works on a main thread only (elsewhere is_cheap is the bound)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return MAIN_THREAD_TIMEOUT_S[_where] * (PATIENCE if _patient.get() else 1)


@contextmanager
def patience(patient: bool = True):
    """math-verify's bounds on this thread are PATIENCE times longer inside (when ``patient``)."""
    token = _patient.set(patient)
    try:
        yield
    finally:
        _patient.reset(token)


def become_grader_process() -> None:
    """Called by the grader process: its work is not known to be cheap, so math-verify's timeouts are longer."""
    global _where
    _where = "grader process"


@lru_cache(maxsize=1)
def warm_up() -> None:
    """Pay math-verify's one-time setup (its grammars, sympy's lazy imports: 0.3 s idle, over 1 s on a busy
    machine) outside any timeout: inside the first one, that answer was graded unparseable for the whole run."""
    half = parse(r"$\frac{1}{2}$", extraction_config=_EXTRACTION, parsing_timeout=None)
    verify(half, parse("$0.5$", extraction_config=_EXTRACTION, parsing_timeout=None), timeout_seconds=None)


@lru_cache(maxsize=_CACHE_SIZE)
def _parse(latex: str) -> list:
    """math-verify's parse, remembered; [] when it does not parse. A timeout raises TimeoutException and so is
    not remembered: a busy moment must not leave a gold unparseable for the rest of the run."""
    warm_up()
    try:
        return parse(
            f"${latex}$", extraction_config=_EXTRACTION, parsing_timeout=_seconds(), raise_on_error=True
        )
    except Exception:  # noqa: BLE001 - what math-verify returns [] for; TimeoutException is no Exception
        return []


def _verify(gold: list, pred: list) -> bool:
    """math-verify's verify, pair by pair as it compares (an error on one pair is no match for that pair), except
    that a timeout raises TimeoutException: math-verify would call it no match, and the grader process's answer
    is remembered."""
    for g, p in product(gold, pred):
        try:
            if verify(g, p, timeout_seconds=_seconds(), raise_on_error=True):
                return True
        except Exception:  # noqa: BLE001, S112 - as math-verify does; TimeoutException is no Exception
            continue
    return False


@lru_cache(maxsize=_CACHE_SIZE)
def fingerprint_here(latex: str):
    """``latex``'s fingerprint, computed in this process (the grader process, or here for cheap answers)."""
    return fingerprint(_parse(latex))


def compare_here(gold: str, pred: str) -> bool:
    """math-verify's verdict, computed in this process; False when either side does not parse.

    Raises:
        TimeoutException: math-verify ran out of time (not an Exception subclass): no verdict, not a no match.
    """
    return _verify(_parse(gold), _parse(pred))


_FAILED = object()  # what the grader process could not settle in time: unsettled
# After a failure the same request is not asked again for this long: an answer too costly to settle then costs
# REQUEST_TIMEOUT_S at most once a period, and a gold that failed in a busy moment is graded again after it. A
# patient request that failed (PATIENT_REQUEST_TIMEOUT_S) waits longer: a pathological answer sampled many times
# must not cost a minute per sample.
RETRY_AFTER_S = 30.0
PATIENT_RETRY_AFTER_S = 600.0
_failed_at: dict[tuple, float] = {}


@lru_cache(maxsize=_CACHE_SIZE)
def _answer(*message, patient: bool = False):
    """The grader process's answer, remembered: a group of samples often gives one answer, and an epoch meets
    each gold again. A failure raises, and is not remembered here."""
    return CLIENT.request(*message, patient=True) if patient else CLIENT.request(*message)


def _remote(*message, patient: bool = False):
    """The grader process's answer to ``("fingerprint", latex)`` or ``("compare", gold, pred)``; _FAILED when it
    fails, and at once for RETRY_AFTER_S after a failure (PATIENT_RETRY_AFTER_S after a patient one)."""
    key, pause = (message, patient), PATIENT_RETRY_AFTER_S if patient else RETRY_AFTER_S
    if key in _failed_at and time.monotonic() - _failed_at[key] < pause:
        return _FAILED
    try:
        return _answer(*message, patient=patient)
    except GraderTimeout as e:
        if len(_failed_at) >= _CACHE_SIZE:
            _failed_at.clear()
        _failed_at[key] = time.monotonic()
        shown = ", ".join(repr(part[:80]) for part in message[1:])
        how = "even with patience" if patient else "no match this time"
        logger.warning("The grader process failed on %s %s (%s); unsettled, %s.", message[0], shown, e, how)
        return _FAILED


def _print(latex: str, patient: bool):
    return fingerprint_here(latex) if is_cheap(latex) else _remote("fingerprint", latex, patient=patient)


class Verdict(NamedTuple):
    """Whether two answers match, and whether that was settled: False when time ran out first (no match)."""

    match: bool
    settled: bool = True


_UNSETTLED = Verdict(False, settled=False)


def judge(gold: str, pred: str, *, cheap_only: bool = False, patient: bool = False) -> Verdict:
    r"""``equivalent``'s verdict, and whether it was settled in time; never raises, bounded in time.

    Args:
        gold: The gold answer (LaTeX or a number).
        pred: The completion's answer.
        cheap_only: Compare only what ``is_cheap`` settles here (a number gold): anything else is no match.
        patient: Compare with PATIENCE times longer bounds (evaluation, which can wait; a reward cannot). Asked
            so at once: a first try with the reward's bounds would cost REQUEST_TIMEOUT_S and a restart of the
            grader process whenever it runs out, and settles nothing the longer bounds would not.

    >>> judge("[-2, 7]", "[-2,7]"), judge("3", "2^9")
    (Verdict(match=True, settled=True), Verdict(match=False, settled=True))
    """
    if not patient:
        return _judge(gold, pred, cheap_only, patient=False)
    with patience():
        return _judge(gold, pred, cheap_only, patient=True)


def _judge(gold: str, pred: str, cheap_only: bool, patient: bool) -> Verdict:
    if cheap_only and not (is_cheap(gold) and is_cheap(pred)):
        # A number's equal is cheap to write; anything else is not worth the grader process.
        return Verdict(False)
    if _TOWER.search(gold) or _TOWER.search(pred):
        return Verdict(False)  # 9^{9^{9^9}}: no process can evaluate it, so no process is asked to
    try:
        gold_print = _print(gold, patient)
        if gold_print is _FAILED:
            return _UNSETTLED
        pred_print = _print(pred, patient)
        if pred_print is _FAILED:
            return _UNSETTLED
        if surely_different(gold_print, pred_print):
            return Verdict(False)
        if is_cheap(gold) and is_cheap(pred):
            return Verdict(compare_here(gold, pred))
        answer = _remote("compare", gold, pred, patient=patient)
        return _UNSETTLED if answer is _FAILED else Verdict(answer is True)
    except TimeoutException:  # math-verify here, on the main thread (not an Exception subclass)
        shown = ", ".join(repr(text[:80]) for text in (gold, pred))
        logger.warning(
            "math-verify ran out of time on %s (a busy machine?); unsettled, no match this time.", shown
        )
        return _UNSETTLED
    except Exception:  # model output must never crash training: log it, grade as wrong
        logger.debug("math-verify failed on gold %r, prediction %r", gold, pred, exc_info=True)
        return Verdict(False)


def equivalent(gold: str, pred: str, *, cheap_only: bool = False) -> bool:
    r"""Whether two answers are mathematically equal per math-verify; never raises, bounded in time.

    What runs out of time is no match (``judge`` tells it apart).

    >>> equivalent("0.5", r"\frac{1}{2}"), equivalent("18", r"\dfrac{36}{2}"), equivalent("3", "2^9")
    (True, True, False)
    >>> equivalent(r"(-\infty, 1) \cup (2, \infty)", r"(-\infty,1)\cup(2,\infty)"), equivalent("[-2, 7]", "(-2, 7)")
    (True, False)
    """
    return judge(gold, pred, cheap_only=cheap_only).match
