"""TRL's own token-level shaping rewards, under our registry's names, wrapped rather than rewritten.

Both read ``completion_ids``, so plain and conversational completions behave the same.
"""

from __future__ import annotations

from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

from rewards._args import batch_column, check_int, check_number


def _ids(reward: str, completions: list, completion_ids: list[list[int]] | None) -> list[list[int]]:
    return batch_column(reward, "completion_ids", completion_ids, len(completions), "TRL passes it.")


class SoftOverlong:
    """Penalise completions near the length limit (DAPO's soft overlong punishment; TRL's implementation).

    0 up to ``max_completion_length - soft_punish_cache`` tokens, falling linearly to -1 at
    ``max_completion_length``, -1 beyond it.

    Args:
        max_completion_length: The trainer's ``max_completion_length`` (TRL's ``max_completion_len``).
        soft_punish_cache: Width of the penalty ramp in tokens (0: no ramp).

    >>> soft_overlong = SoftOverlong(max_completion_length=100, soft_punish_cache=20)
    >>> soft_overlong(completions=["...", "..."], completion_ids=[[1] * 50, [1] * 90])
    [0.0, -0.5]
    """

    __name__ = "soft_overlong"
    max_reward = 0.0  # a penalty: never positive

    def __init__(self, *, max_completion_length: int, soft_punish_cache: int):
        check_int("max_completion_length", max_completion_length, 1)
        check_int("soft_punish_cache", soft_punish_cache)
        if soft_punish_cache > max_completion_length:
            raise ValueError(
                f"soft_punish_cache ({soft_punish_cache}) must be <= max_completion_length ({max_completion_length})."
            )
        self._trl_reward = get_soft_overlong_punishment(max_completion_length, soft_punish_cache)

    def __call__(
        self, completions: list, completion_ids: list[list[int]] | None = None, **kwargs
    ) -> list[float]:
        return self._trl_reward(_ids(self.__name__, completions, completion_ids))


class Repetition:
    """Penalise repeated token n-grams, down to ``max_penalty`` for a fully repetitive completion (TRL's).

    Args:
        ngram_size: Length of the token n-grams compared.
        max_penalty: The penalty of a fully repetitive completion (<= 0).

    >>> Repetition(ngram_size=2)(completions=["...", "..."], completion_ids=[[1, 2, 3, 4], [5] * 5])
    [0.0, -0.75]
    """

    __name__ = "repetition"
    max_reward = 0.0  # a penalty: never positive

    def __init__(self, *, ngram_size: int = 3, max_penalty: float = -1.0):
        check_int("ngram_size", ngram_size, 1)
        check_number("max_penalty", max_penalty, non_positive=True)
        self._trl_reward = get_repetition_penalty_reward(ngram_size, max_penalty)

    def __call__(
        self, completions: list, completion_ids: list[list[int]] | None = None, **kwargs
    ) -> list[float]:
        return self._trl_reward(_ids(self.__name__, completions, completion_ids))
