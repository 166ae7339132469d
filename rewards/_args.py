"""Reading the arguments TRL passes to rewards, and checking reward parameters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, or TRL's conversational form (a list of chat messages).

    Assistant message contents are joined; ``None`` contents (tool calls) and multimodal parts are read
    for their text.

    >>> completion_text([{"role": "assistant", "content": "#### 18"}]), completion_text("#### 18")
    ('#### 18', '#### 18')
    """
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, list):
        raise TypeError(
            f"A completion must be a string or a list of chat messages, got {type(completion).__name__}."
        )
    texts = []
    for message in completion:
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}]
                content = "".join(
                    p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
            texts.append(content if isinstance(content, str) else "")
    return "\n".join(texts)


def batch_column(reward: str, column: str, values: Sequence | None, size: int, hint: str) -> Sequence:
    """A per-completion argument, checked present and one per completion."""
    if values is None:
        raise ValueError(f"The {reward} reward needs the `{column}` argument: {hint}")
    if len(values) != size:
        raise ValueError(f"The {reward} reward got {len(values)} `{column}` values for {size} completions.")
    return values


def check_int(name: str, value: Any, minimum: int = 0) -> int:
    """An integer parameter >= minimum, or a ValueError saying what was expected."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return value


def check_number(name: str, value: Any, *, positive: bool = False, non_positive: bool = False) -> float:
    """A finite real-number parameter (optionally > 0 or <= 0), or a ValueError saying what was expected."""
    wanted = "a number > 0" if positive else "a number <= 0" if non_positive else "a finite number"
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (not positive or value > 0) and (not non_positive or value <= 0)
    if not ok:
        raise ValueError(f"{name} must be {wanted}, got {value!r}.")
    return float(value)
