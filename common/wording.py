"""Counts in messages, in the singular for one: "1 question", "4 questions x 1 sample"."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (nouns that take an "s").

    >>> counted(1, "sample"), counted(4, "question"), counted(0, "record")
    ('1 sample', '4 questions', '0 records')
    """
    return f"{n} {noun}{'' if n == 1 else 's'}"
