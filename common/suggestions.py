"""The "Did you mean ...?" of every error that names an unknown key, choice, recipe, reward or parameter."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def did_you_mean(word: Any, options: Iterable, *, prefix: str = "", quote: bool = False) -> str:
    """' Did you mean PREFIXoption?' for the closest option, ignoring case (``AUTO`` -> ``auto``), or ''.

    ``quote`` writes the option as a quoted string (``'correctness'``), as spec errors name their keys.

    >>> did_you_mean("learnin_rate", ["learning_rate", "max_steps"], prefix="trainer.")
    ' Did you mean trainer.learning_rate?'
    >>> did_you_mean("Corectness", ["correctness", "format"], quote=True)
    " Did you mean 'correctness'?"
    """
    option = closest(word, options)
    if option is None:
        return ""
    return f" Did you mean {prefix}{repr(str(option)) if quote else option}?"


def closest(word: Any, options: Iterable) -> Any | None:
    """The option closest to ``word``, ignoring case, if any is close enough to be a likely typo.

    >>> closest("anwser", ["question", "anwser_id", "answer"]), closest("zzz", ["answer"])
    ('answer', None)
    """
    by_lower = {str(o).lower(): o for o in options}
    close = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def install_extra(extra: str) -> str:
    """The command that installs one of the project's optional extras; it is installed from its own folder.

    >>> install_extra("wandb")
    'pip install -e ".[wandb]" (in the grpo-recipes folder)'
    """
    return f'pip install -e ".[{extra}]" (in the grpo-recipes folder)'
