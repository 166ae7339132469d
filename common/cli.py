"""Argument types shared by the command lines (recipes/evaluate.py, stats.compare): a bad count is refused by
argparse with the value and what was expected, before any work starts."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """An integer >= 1 (``--samples 3``)."""
    return _at_least(text, 1, "a positive integer")


def non_negative(text: str) -> int:
    """An integer >= 0 (``--seed 0``)."""
    return _at_least(text, 0, "an integer >= 0")


def _at_least(text: str, low: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
    return value
