"""Models built on this machine instead of downloaded: ``model.name_or_path: builtin:<name>``.

    tiny-llama   a random 2-layer Llama and a BPE tokenizer: every code path of the real recipes, in seconds
    tiny-arith   a tiny Llama warm-started on generated arithmetic: able but imperfect, so GRPO can improve it

Each is built on first use into ``$GRPO_RECIPES_CACHE`` (default ``~/.cache/grpo-recipes``), in a folder named
by a digest of everything that shapes it, and reused afterwards. A module here has ``build(folder)``,
``BUILD_KEY`` and ``BUILDS`` (what a first use waits for, said in the log before it starts).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

from recipes.builtin import tiny_arith, tiny_llama

BUILTIN_PREFIX = "builtin:"
BUILTINS = {"tiny-llama": tiny_llama, "tiny-arith": tiny_arith}
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
    module = BUILTINS[name]
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
