"""Models built on this machine instead of downloaded: ``model.name_or_path: builtin:<name>``.

    tiny-llama   a random 2-layer Llama and a BPE tokenizer: every code path of the real recipes, in seconds
    tiny-arith   a tiny Llama warm-started on generated arithmetic: able but imperfect, so GRPO can improve it

Each is built on first use into ``$GRPO_RECIPES_CACHE`` (default ``~/.cache/grpo-recipes``), in a folder named
by a digest of everything that shapes it, and reused afterwards. A module here has ``build(folder)``,
``BUILD_KEY`` and ``BUILDS`` (what a first use waits for, said in the log before it starts).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

BUILTIN_PREFIX = "builtin:"
# Name -> module of this package, imported on first use: imported with the package, `python -m
# recipes.builtin.tiny_llama` would find its module already loaded and run it twice (runpy's RuntimeWarning).
BUILTINS = {"tiny-llama": "tiny_llama", "tiny-arith": "tiny_arith"}
logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where built-in models are cached (``$GRPO_RECIPES_CACHE``, default ``~/.cache/grpo-recipes``)."""
    return Path(os.environ.get("GRPO_RECIPES_CACHE", Path.home() / ".cache" / "grpo-recipes"))


def resolve_builtin(name_or_path: str) -> str:
    """Map ``builtin:<name>`` to a cached local folder, building it on first use; pass other names through."""
    if not name_or_path.startswith(BUILTIN_PREFIX):
        return name_or_path
    name = name_or_path[len(BUILTIN_PREFIX) :]
    if name not in BUILTINS:
        raise ValueError(
            f"Unknown built-in model {name_or_path!r}. Available: {', '.join(BUILTIN_PREFIX + n for n in BUILTINS)}"
        )
    module = importlib.import_module(f"recipes.builtin.{BUILTINS[name]}")
    digest = hashlib.sha256(repr(module.BUILD_KEY).encode()).hexdigest()[:10]
    folder = cache_dir() / f"{name}-{digest}"
    if not folder.exists():
        logger.info("Building %s once (%s), into %s", name_or_path, module.BUILDS, folder)
        start = time.perf_counter()
        try:
            module.build(folder)
            logger.info("Built %s in %.0f s; later runs reuse it", name_or_path, time.perf_counter() - start)
        except OSError:
            if not folder.exists():  # another process may have won the rename race; that is fine
                raise
    return str(folder)


def build_command(build: Callable[[Path, int], Path], description: str, argv: list[str] | None = None) -> int:
    """The command line of a built-in model's module: ``python -m recipes.builtin.<module> FOLDER [SEED]``.

    The model is written whole into a new folder (renamed into place), so an existing one is refused here,
    before the build, with what to do (the rename would fail after it, with an OSError).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("folder", type=Path, help="where to save the model and tokenizer (a new folder)")
    parser.add_argument("seed", nargs="?", type=int, default=0, help="seed of the weights (default 0)")
    args = parser.parse_args(argv)
    if args.folder.exists():
        parser.error(
            f"{args.folder} exists; the model is written into a new folder: name one that does not exist."
        )
    print(build(args.folder, args.seed))
    return 0
