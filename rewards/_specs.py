"""Turning a recipe's ``rewards:`` list into reward callables and weights (docs/CONTRACTS.md)."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import math
import pickle
from collections.abc import Callable, Mapping
from typing import Any

# Arguments TRL passes to every reward: a spec may not bind them.
TRL_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)
_SPEC_KEYS = ("name", "path", "weight")


class RewardSpecError(ValueError):
    """A bad entry in a ``rewards:`` list; the message names the entry and key, and suggests a fix."""


def reward_name(func: Callable) -> str:
    """The name TRL logs a reward under (``rewards/<name>/mean``), as ``trl``'s ``get_callable_name`` does."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def did_you_mean(word: Any, options) -> str:
    """' Did you mean 'x'?' for the closest option, or ''."""
    close = difflib.get_close_matches(str(word), list(options), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def parameters(target: Callable) -> dict[str, inspect.Parameter]:
    """The parameters a spec may set: keyword-passable ones of a class's ``__init__`` or a function."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    signature = inspect.signature(target)
    return {
        name: p for name, p in signature.parameters.items() if p.kind in kinds and name not in TRL_ARGUMENTS
    }


def _load_plugin(path: Any) -> Callable:
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise RewardSpecError(f"path must look like 'package.module:function', got {path!r}.")
    module_name, attribute = path.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise RewardSpecError(f"cannot import module {module_name!r} ({e}).") from e
    if not hasattr(module, attribute):
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise RewardSpecError(
            f"module {module_name!r} has no {attribute!r}.{did_you_mean(attribute, public)}"
        )
    target = getattr(module, attribute)
    if not callable(target):
        raise RewardSpecError(
            f"{attribute!r} in {module_name!r} is not callable (a {type(target).__name__}: {target!r})."
        )
    return target


def _bind(target: Callable, params: dict, defaults: Mapping[str, Any]) -> Callable:
    accepted = parameters(target)
    for key in params:
        if key not in accepted:
            raise RewardSpecError(
                f"unknown parameter {key!r}.{did_you_mean(key, [*accepted, *_SPEC_KEYS])} "
                f"Parameters: {', '.join(accepted) or '(none)'}."
            )
    params = {**{k: v for k, v in defaults.items() if k in accepted}, **params}
    if not inspect.isclass(target):  # a function's other parameters may be dataset columns TRL passes
        return functools.partial(target, **params) if params else target
    missing = [k for k, p in accepted.items() if p.default is inspect.Parameter.empty and k not in params]
    if missing:
        raise RewardSpecError(f"missing required parameter(s): {', '.join(missing)}.")
    try:
        return target(**params)
    except (TypeError, ValueError) as e:
        raise RewardSpecError(str(e)) from e


def _weight(spec: Mapping) -> float:
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise RewardSpecError(f"weight must be a finite number, got {weight!r}.")
    return float(weight)


def build_one(
    where: str, spec: Any, registry: Mapping[str, Callable], defaults: Mapping[str, Any]
) -> tuple[Callable, float]:
    """One spec (``{name: ..., weight: ..., <params>}`` or ``{path: ..., ...}``) to ``(reward, weight)``.

    Raises:
        RewardSpecError: Its message starts with ``where`` (e.g. ``rewards[1]``) and the spec's name or path.
    """
    label = (spec.get("name") or spec.get("path")) if isinstance(spec, Mapping) else None
    prefix = f"{where} ({label})" if isinstance(label, str) else where
    try:
        return _build_one(spec, registry, defaults)
    except RewardSpecError as e:
        raise RewardSpecError(f"{prefix}: {e}") from e


def _build_one(
    spec: Any, registry: Mapping[str, Callable], defaults: Mapping[str, Any]
) -> tuple[Callable, float]:
    if not isinstance(spec, Mapping):
        raise RewardSpecError(f"expected a mapping like {{name: correctness, weight: 1.0}}, got {spec!r}.")
    if ("name" in spec) == ("path" in spec):
        raise RewardSpecError(
            "give exactly one of `name` (a registered reward) or `path` ('package.module:function'); "
            f"got keys {sorted(map(str, spec))}."
        )
    weight = _weight(spec)
    if "name" in spec:
        name = spec["name"]
        if not isinstance(name, str) or name not in registry:
            raise RewardSpecError(
                f"unknown reward {name!r}.{did_you_mean(name, registry)} Available: {', '.join(sorted(registry))}."
            )
        target = registry[name]
    else:
        target = _load_plugin(spec["path"])
    reward = _bind(target, {k: v for k, v in spec.items() if k not in _SPEC_KEYS}, defaults)
    try:
        pickle.dumps(reward)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise RewardSpecError(
            f"not picklable ({e}); TRL pickles rewards for its async rollout workers: "
            "define it at module level (no lambda or closure), or as a callable class."
        ) from e
    return reward, weight
