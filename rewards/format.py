"""Format reward: pay for following the prompt's answer format, capped below a correct answer.

Format is worth at most ``max_reward`` (1.5 by default), split into four documented parts, so that
format without a correct answer always earns less than a correct answer (5.0 by default);
``rewards.build_rewards`` refuses specs where it would not.
"""

from __future__ import annotations

from rewards._args import check_number, completion_text
from rewards._layout import check_style, format_parts

# Sixths of max_reward per part (0.5 / 0.5 / 0.25 / 0.25 at the default 1.5); integers keep sums exact.
PART_SIXTHS = {"reasoning": 2, "answer": 2, "number": 1, "clean_end": 1}


class Format:
    r"""Pay up to ``max_reward`` for the answer format of ``style`` (``tags``, ``hash`` or ``boxed``), in four parts.

    Parts, each a share of ``max_reward`` (``PART_SIXTHS``):

    - ``reasoning`` (1/3): a non-empty reasoning section before the answer. ``tags``: exactly one
      ``<reasoning>...</reasoning>`` block, closed before ``<answer>``; ``hash``: text before the
      ``#### n`` line (so it needs that line); ``boxed``: text before the ``\boxed{...}``.
    - ``answer`` (1/3): the final answer in the asked-for form, and it parses. ``tags``: exactly one
      ``<answer>...</answer>`` block; ``hash``: a ``#### n`` line; ``boxed``: exactly one ``\boxed{...}``.
    - ``number`` (1/6): that answer is a plain number ("18", "$1,080", "-3.5"), no words or LaTeX; ``boxed``: any
      answer that parses (MATH's are LaTeX: ``\frac{1}{2}`` paying less than ``0.5`` would teach decimals).
    - ``clean_end`` (1/6): nothing but whitespace after it (``boxed``: also a period and closing ``$``,
      ``\]`` or ``\)``).

    ``number`` and ``clean_end`` count only when ``answer`` does. The total never exceeds
    ``max_reward``.

    Args:
        style: The prompt style asked for: ``tags``, ``hash`` or ``boxed``.
        max_reward: What a completion passing every part earns.

    >>> Format(style="tags")(completions=["<reasoning>3+4</reasoning>\n<answer>7</answer>",
    ...                                   "<answer>7 apples</answer> Hope this helps!"])
    [1.5, 0.5]
    >>> Format(style="hash")(completions=[[{"role": "assistant", "content": "3 + 4 = 7\n#### 7"}]])
    [1.5]
    >>> Format(style="boxed")(completions=[r"3 + 4 = 7, so $\boxed{7}$.", r"$\boxed{\frac{1}{2}}$ Done."])
    [1.5, 0.75]
    """

    __name__ = "format"
    is_correctness = False  # pays at most max_reward, which must stay below a correct answer's pay

    def __init__(self, *, style: str = "tags", max_reward: float = 1.5):
        self.style = check_style(style)
        self.max_reward = check_number("max_reward", max_reward, positive=True)

    def __call__(self, completions: list, **kwargs) -> list[float]:
        rewards = []
        for completion in completions:
            parts = format_parts(completion_text(completion), self.style)._asdict()
            sixths = sum(weight for part, weight in PART_SIXTHS.items() if parts[part])
            rewards.append(min(self.max_reward * sixths / 6, self.max_reward))
        return rewards
