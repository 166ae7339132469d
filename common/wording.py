"""Counts in messages, in the singular for one: "1 question", "4 questions x 1 sample"."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (nouns that take an "s").

    >>> counted(1, "sample"), counted(4, "question"), counted(0, "record")
    ('1 sample', '4 questions', '0 records')
    """
    return f"{n} {noun}{'' if n == 1 else 's'}"


def questions_by_samples(questions: int, samples: int) -> str:
    """The size of an evaluation, as every summary and log line writes it.

    >>> questions_by_samples(4, 1)
    '4 questions x 1 sample'
    """
    return f"{counted(questions, 'question')} x {counted(samples, 'sample')}"
