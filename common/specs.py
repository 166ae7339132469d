"""Turning a recipe's list of specs (``rewards:``, ``callbacks:``) into objects, by registry name or plug-in path.

    build_specs("callbacks", [{"name": "reward_table", "every_steps": 25}], registered(), error=CallbackSpecError)

A spec is ``{name: <registered name>, <params>}`` or ``{path: "package.module:attribute", <params>}``. A class
is instantiated with the params; a function is bound to them with ``functools.partial`` (rewards: TRL calls it
later), or called with them when ``call_functions`` (callbacks: the function is a factory). Every bad spec is
reported at once, each line naming ``section[i] (name)``, the key, and the closest valid choice.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from common.errors import UserError
from common.suggestions import did_you_mean


class SpecError(UserError):
    """A bad entry in a list of specs; the message names the entry and key, and suggests a fix."""


def parameters(target: Callable, reserved: Collection[str] = ()) -> dict[str, inspect.Parameter]:
    """The parameters a spec may set: keyword-passable ones of a class's ``__init__`` or a function."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    signature = inspect.signature(target)
    return {
        name: p
        for name, p in signature.parameters.items()
        if p.kind in kinds and name not in reserved and name != "self"
    }


def _import(module_name: str):
    """A module by dotted name, or from a ``.py`` file (relative to the working folder), importable by its stem.

    The file's folder goes on ``sys.path`` so the module has a plain name: TRL pickles rewards by module name.
    """
    if not module_name.endswith(".py"):
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            top = module_name.split(".")[0]
            # A folder without __init__.py is a package too (a namespace package), as plug-in folders often are.
            if e.name != top or not (Path(f"{top}.py").is_file() or Path(top).is_dir()):
                raise
            raise ImportError(
                f"{e}; {top} is in the working folder, which `python recipes/run.py` does not put on Python's "
                f"path: write the file's path ({module_name.replace('.', '/')}.py:...), or run with PYTHONPATH=."
            ) from None
    file = Path(module_name).expanduser().resolve()
    if not file.is_file():
        raise ImportError(
            f"no file {file}: a plug-in file's path is relative to the working folder, {Path.cwd()}"
        )
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    module = importlib.import_module(file.stem)
    if Path(module.__file__).resolve() != file:
        raise ImportError(f"{file.stem!r} already names another module ({module.__file__}); rename the file")
    return module


def load_plugin(path: Any) -> Callable:
    """``package.module:attribute`` or ``path/to/file.py:attribute`` -> the attribute, which must be callable."""
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise SpecError(f"path must look like 'package.module:function' or 'file.py:function', got {path!r}.")
    module_name, attribute = path.split(":")
    try:
        module = _import(module_name)
    except ImportError as e:
        raise SpecError(f"cannot import module {module_name!r} ({e}).") from e
    except Exception as e:  # a plug-in module that raises on import is the user's to fix, not a traceback
        raise SpecError(f"importing module {module_name!r} raised {type(e).__name__}: {e}") from e
    if not hasattr(module, attribute):
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise SpecError(
            f"module {module_name!r} has no {attribute!r}.{did_you_mean(attribute, public, quote=True)}"
        )
    target = getattr(module, attribute)
    if not callable(target):
        raise SpecError(
            f"{attribute!r} in {module_name!r} is not callable (a {type(target).__name__}: {target!r})."
        )
    return target


def _bind(target: Callable, params: dict, spec_keys, reserved, defaults, call_functions: bool):
    accepted = parameters(target, reserved)
    for key in params:
        if key not in accepted:
            raise SpecError(
                f"unknown parameter {key!r}.{did_you_mean(key, [*accepted, *spec_keys], quote=True)} "
                f"Parameters: {', '.join(accepted) or '(none)'}."
            )
    params = {**{k: v for k, v in defaults.items() if k in accepted}, **params}
    if not inspect.isclass(target) and not call_functions:
        # A function's other parameters may be filled later by its caller (TRL passes dataset columns).
        return functools.partial(target, **params) if params else target
    missing = [k for k, p in accepted.items() if p.default is inspect.Parameter.empty and k not in params]
    if missing:
        raise SpecError(f"missing required parameter(s): {', '.join(missing)}.")
    try:
        return target(**params)
    except (TypeError, ValueError) as e:
        raise SpecError(str(e)) from e


def build_specs(
    section: str,
    specs: Any,
    registry: Mapping[str, Callable],
    *,
    example: str,
    meta_keys: tuple[str, ...] = (),
    reserved: Collection[str] = (),
    defaults: Mapping[str, Any] | None = None,
    call_functions: bool = False,
    required: bool = False,
    check: Callable[[Any, Mapping], None] | None = None,
    error: type[SpecError] = SpecError,
) -> list[tuple[Any, Mapping]]:
    """Build every spec of a section, collecting all errors.

    Args:
        section: The section's name in messages (``rewards``, ``callbacks``).
        specs: The section's value: a list of mappings.
        registry: Registered name -> class or function.
        example: A valid spec shown in messages, e.g. ``{name: correctness, weight: 1.0}``.
        meta_keys: Keys read by the caller (e.g. ``weight``), not passed to the object.
        reserved: Parameter names the object's caller fills, which a spec may not set.
        defaults: Values filled into every object taking a parameter of that name that its spec leaves out.
        call_functions: Call a function with its params (a factory) instead of binding them.
        required: Refuse an empty list.
        check: Called as ``check(obj, spec)`` after building; raises SpecError for a bad object.
        error: The SpecError subclass raised.

    Returns:
        ``(object, spec)`` pairs in order.

    Raises:
        SpecError: (as ``error``) every bad spec, one line each, starting ``section[i] (name):``.
    """
    if not isinstance(specs, (list, tuple)) or (required and not specs):
        kind = "non-empty list" if required else "list"
        raise error(f"{section} must be a {kind} of specs like [{example}], got {specs!r}.")
    built, errors = [], []
    for index, spec in enumerate(specs):
        label = (spec.get("name") or spec.get("path")) if isinstance(spec, Mapping) else None
        where = f"{section}[{index}] ({label})" if isinstance(label, str) else f"{section}[{index}]"
        try:
            if not isinstance(spec, Mapping):
                raise SpecError(f"expected a mapping like {example}, got {spec!r}.")
            if ("name" in spec) == ("path" in spec):
                raise SpecError(
                    f"give exactly one of `name` (one of {', '.join(sorted(registry))}) or `path` "
                    f"('package.module:attribute'); got keys {sorted(map(str, spec))}."
                )
            if "name" in spec:
                name = spec["name"]
                if not isinstance(name, str) or name not in registry:
                    raise SpecError(
                        f"unknown {section.rstrip('s')} {name!r}.{did_you_mean(name, registry, quote=True)} "
                        f"Available: {', '.join(sorted(registry))}."
                    )
                target = registry[name]
            else:
                target = load_plugin(spec["path"])
            spec_keys = ("name", "path", *meta_keys)
            params = {k: v for k, v in spec.items() if k not in spec_keys}
            obj = _bind(target, params, spec_keys, reserved, defaults or {}, call_functions)
            if check is not None:
                check(obj, spec)
            built.append((obj, spec))
        except SpecError as e:
            errors.append(f"{where}: {e}")
    if errors:
        raise error("\n".join(errors))
    return built
