"""Length-gated correctness: pay strongly for a correct answer, but only after enough reasoning.

Without the gate, GRPO teaches a model to answer in a few tokens and stop reasoning. The gate counts
tokens from TRL's ``completion_ids`` (not characters), and a short correct answer gets 0.0 for that
completion alone, never a bare ``0`` for the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rewards._args import batch_column, check_int, check_number, completion_text
from rewards._precedence import DEFAULT_PRECEDENCE, check_precedence
from rewards.answers import grade, read_gold

GATES = ("completion", "reasoning")


def length_gate(n_tokens: int, *, min_tokens: int, full_credit_tokens: int) -> float:
    """The share of the correctness reward a correct answer of ``n_tokens`` tokens earns.

    0 below ``min_tokens``, 1 from ``full_credit_tokens`` on, linear in between (0 at ``min_tokens``,
    so the reward is continuous in length: one more token never costs reward).

    >>> [length_gate(n, min_tokens=50, full_credit_tokens=100) for n in (0, 49, 50, 75, 99, 100, 500)]
    [0.0, 0.0, 0.0, 0.5, 0.98, 1.0, 1.0]
    """
    if n_tokens >= full_credit_tokens:
        return 1.0
    if n_tokens <= min_tokens:
        return 0.0
    return (n_tokens - min_tokens) / (full_credit_tokens - min_tokens)


class Correctness:
    r"""Pay ``reward`` for a correct final answer, ramped by token count from ``min_tokens`` up to full credit.

    A wrong or missing answer earns 0.0. A correct one earns ``reward * length_gate(n)`` (see
    ``length_gate``): the full ``reward`` at ``full_credit_tokens`` tokens or more, 0 at or below
    ``min_tokens``, linear in between. Answers are graded by ``rewards.answers`` (the same grader as
    evaluation) against the dataset's ``gold`` column.

    ``n`` counts ``completion_ids`` (EOS included). With ``gate_on="reasoning"`` it counts only the
    text before the final answer's marker, estimated as the completion's token count times that text's
    share of the completion's characters: no tokenizer needed, and the error is a few tokens at most.

    Through TRL's ``log_metric`` it logs per batch: ``answers/unparseable`` (share with no extractable
    answer), ``answers/correct_tokens`` (mean tokens of correct completions; skipped when none is) and,
    when ``max_completion_length`` is set, ``answers/truncated`` (share whose ``completion_ids`` reach it:
    TRL tells rewards neither the limit nor the EOS id, and one ending in EOS exactly at the limit counts
    too). Through ``log_extra`` it adds an ``answer`` column to TRL's completions table.

    Args:
        reward: What a correct answer of full length earns.
        full_credit_tokens: Tokens from which a correct answer earns all of ``reward``.
        min_tokens: Tokens at or below which a correct answer earns nothing.
        gate_on: ``completion`` (all tokens) or ``reasoning`` (tokens before the final answer).
        max_completion_length: The trainer's ``max_completion_length``, for ``answers/truncated``.
        precedence: Final-answer rule order (see ``rewards.answers``).

    >>> correctness = Correctness(min_tokens=2, full_credit_tokens=4)
    >>> correctness(completions=["#### 18", "#### 18", "#### 17", "no idea"],
    ...             completion_ids=[[7] * 4, [7] * 3, [7] * 4, [7] * 9], gold=["18", "18", "18", "18"])
    [5.0, 2.5, 0.0, 0.0]
    """

    __name__ = "correctness"
    is_correctness = True  # the registry keeps every other reward paying less than this one

    @property
    def max_reward(self) -> float:
        """What a correct answer with full-length reasoning earns."""
        return self.reward

    def __init__(
        self,
        *,
        reward: float = 5.0,
        full_credit_tokens: int = 100,
        min_tokens: int = 50,
        gate_on: str = "completion",
        max_completion_length: int | None = None,
        precedence: Sequence[str] = DEFAULT_PRECEDENCE,
    ):
        self.reward = check_number("reward", reward, positive=True)
        self.full_credit_tokens = check_int("full_credit_tokens", full_credit_tokens)
        self.min_tokens = check_int("min_tokens", min_tokens)
        if self.min_tokens > self.full_credit_tokens:
            raise ValueError(
                f"min_tokens ({min_tokens}) must be <= full_credit_tokens ({full_credit_tokens}): "
                "the reward ramps up from min_tokens to full_credit_tokens."
            )
        if gate_on not in GATES:
            raise ValueError(f"gate_on must be one of {', '.join(GATES)}, got {gate_on!r}.")
        self.gate_on = gate_on
        self.max_completion_length = (
            None
            if max_completion_length is None
            else check_int("max_completion_length", max_completion_length, 1)
        )
        self.precedence = check_precedence(precedence)
        if self.max_completion_length is not None and self.max_completion_length <= self.min_tokens:
            raise ValueError(
                f"can never pay: completions stop at max_completion_length={self.max_completion_length} tokens, "
                f"and a correct answer earns nothing at or below min_tokens={self.min_tokens}. Set min_tokens "
                f"below {self.max_completion_length} (and full_credit_tokens at most {self.max_completion_length}),"
                " or raise trainer.max_completion_length."
            )

    def __call__(
        self,
        completions: list,
        completion_ids: list[list[int]] | None = None,
        gold: list | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        log_extra: Callable[[str, list], None] | None = None,
        **kwargs,
    ) -> list[float]:
        size = len(completions)
        completion_ids = batch_column(
            "correctness",
            "completion_ids",
            completion_ids,
            size,
            "TRL passes it; outside TRL give token ids.",
        )
        golds = batch_column(
            "correctness", "gold", gold, size, f"add a `gold` dataset column; got columns {sorted(kwargs)}."
        )
        gold_answers = {value: read_gold(value) for value in set(map(str, golds))}
        rewards, answers, correct_lengths = [], [], []
        for completion, ids, gold_value in zip(completions, completion_ids, golds):
            text = completion_text(completion)
            # Unsettled (the grader ran out of time) pays nothing, as a no match: a reward cannot wait for it.
            found, correct, _settled = grade(text, gold_answers[str(gold_value)], self.precedence)
            answers.append(found.answer if found else None)
            if not correct:
                rewards.append(0.0)
                continue
            n_tokens = len(ids)
            if self.gate_on == "reasoning":
                n_tokens = round(n_tokens * found.start / max(len(text), 1))
            correct_lengths.append(len(ids))
            gate = length_gate(
                n_tokens, min_tokens=self.min_tokens, full_credit_tokens=self.full_credit_tokens
            )
            rewards.append(self.reward * gate)
        self._log(log_metric, log_extra, answers, completion_ids, correct_lengths)
        return rewards

    def _log(self, log_metric, log_extra, answers, completion_ids, correct_lengths) -> None:
        if callable(log_metric) and answers:
            log_metric("answers/correct", len(correct_lengths) / len(answers))  # before the length gate
            log_metric("answers/unparseable", sum(a is None for a in answers) / len(answers))
            if self.max_completion_length is not None:
                cut = sum(len(ids) >= self.max_completion_length for ids in completion_ids)
                log_metric("answers/truncated", cut / len(answers))
            if correct_lengths:
                log_metric("answers/correct_tokens", sum(correct_lengths) / len(correct_lengths))
        if callable(log_extra):
            log_extra("answer", answers)
