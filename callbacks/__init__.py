"""Trainer callbacks: the ones a recipe names in ``callbacks:``, and checkpoint sync (checkpoint_sync.py).

from callbacks import build_callbacks
build_callbacks([{"name": "reward_table", "every_steps": 25}])
"""

from __future__ import annotations

import difflib
import inspect

from callbacks.reward_table import RewardTableCallback

# Registered name -> TrainerCallback class; recipe entries are {name: ..., <constructor arguments>}.
CALLBACKS = {"reward_table": RewardTableCallback}


class CallbackSpecError(ValueError):
    """A recipe's ``callbacks:`` entry names an unknown callback or passes bad parameters."""


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def build_callbacks(specs: list[dict]) -> list:
    """Instantiate the callbacks a recipe lists.

    Args:
        specs: The recipe's ``callbacks:`` list, e.g. ``[{"name": "reward_table", "every_steps": 25}]``.

    Returns:
        One TrainerCallback per spec, in order.

    Raises:
        CallbackSpecError: Naming the entry (``callbacks[i]``), what is wrong, and the closest valid choice.
    """
    if not isinstance(specs, list):
        raise CallbackSpecError(
            f"callbacks must be a list of {{name: ..., ...}} entries, got {type(specs).__name__}"
        )
    built = []
    for i, spec in enumerate(specs):
        where = f"callbacks[{i}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise CallbackSpecError(f"{where} must be a mapping with a 'name' key, got {spec!r}")
        name, params = spec["name"], {k: v for k, v in spec.items() if k != "name"}
        if name not in CALLBACKS:
            raise CallbackSpecError(
                f"{where}: unknown callback {name!r}.{_did_you_mean(name, CALLBACKS)} "
                f"Available: {', '.join(CALLBACKS)}"
            )
        cls = CALLBACKS[name]
        accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        for key in params:
            if key not in accepted:
                raise CallbackSpecError(
                    f"{where} ({name}): unknown parameter {key!r}.{_did_you_mean(key, accepted)} "
                    f"Parameters: {', '.join(accepted) or 'none'}"
                )
        try:
            built.append(cls(**params))
        except (TypeError, ValueError) as e:
            raise CallbackSpecError(f"{where} ({name}): {e}") from e
    return built
