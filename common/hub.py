"""Downloads from the Hugging Face Hub that fail for a reason the user can fix, said as one ``HubError``.

transformers and datasets report a gated model, a misspelled id or a machine without network as a traceback
whose last line says what happened but not which recipe key to change. ``hub_errors`` names the key and the
fix. Anything else (a full disk, a corrupt file) keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from common.errors import UserError


class HubError(UserError):
    """A model, tokenizer or dataset the Hub would not give: gated, missing, or out of reach."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and the ones it was raised from (transformers wraps the Hub's error in an OSError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _unreachable(error: BaseException) -> bool:
    """Whether the download failed for want of a network (or with offline mode on) and no cached copy."""
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    if isinstance(error, LocalEntryNotFoundError | OfflineModeIsEnabled):
        return True
    # datasets says "Couldn't reach '<id>' on the Hub (<cause>)" with the cause's name only.
    return isinstance(error, ConnectionError) and "on the Hub" in str(error)


def explain(error: BaseException, repo: str, key: str, what: str) -> str | None:
    """The message for a Hub failure the user can fix, or None when ``error`` is not one."""
    from datasets.exceptions import DatasetNotFoundError
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    for cause in _chain(error):
        if isinstance(
            cause, HFValidationError
        ):  # not a Hub id, so a path: transformers found no folder there
            import os

            return (
                f"{key}: {repo} is not a folder on this machine, nor a Hub id (owner/name). Check the path (a "
                f"relative one starts from the working folder, {os.getcwd()}) or the id's spelling."
            )
        if isinstance(cause, DatasetNotFoundError):  # its message already says gated, missing or private
            return (
                f"{key}: {cause} Check its spelling (owner/name); for a gated or private dataset, log in with an "
                "account that can read it (`hf auth login`, or set HF_TOKEN)."
            )
        if isinstance(cause, GatedRepoError):
            return (
                f"{key}: {repo} is gated on the Hugging Face Hub, and this account has no access to its {what}. "
                f"Accept its license at https://huggingface.co/{repo}, then log in with that account on this "
                "machine (`hf auth login`, or set HF_TOKEN) and rerun."
            )
        if isinstance(cause, RevisionNotFoundError):
            return (
                f"{key.rpartition('.')[0]}.revision: {repo} has no such revision on the Hugging Face Hub. Give a "
                f"branch, tag or commit of https://huggingface.co/{repo}, or remove the key for the newest."
            )
        if isinstance(cause, RepositoryNotFoundError):
            return (
                f"{key}: {repo} is not on the Hugging Face Hub, or is private. Check its spelling "
                f"(owner/name, as in the page's address); for a private repository, log in with an account "
                "that can read it (`hf auth login`, or set HF_TOKEN)."
            )
        if _unreachable(cause):
            offline = (
                "HF_HUB_OFFLINE is set"
                if constants.is_offline_mode()
                else "the Hugging Face Hub could not be reached"
            )
            return (
                f"{key}: {offline}, and {repo} ({what}) is not in the local cache ({constants.HF_HUB_CACHE}). "
                "Rerun with a network connection; or download it once where there is one "
                f"(`hf download {repo}{' --repo-type dataset' if what == 'dataset' else ''}`, into the same cache) "
                f"and copy the cache here; or set {key} to a local folder that holds it."
            )
    return None


@contextmanager
def hub_errors(repo: str, key: str, what: str) -> Iterator[None]:
    """Turns a fixable Hub failure inside the block into a ``HubError`` naming ``key`` and the fix.

    Args:
        repo: The Hub id (or local path) being loaded.
        key: The recipe key that names it, e.g. ``model.name_or_path``.
        what: What is being downloaded: ``model``, ``tokenizer``, ``config`` or ``dataset``.
    """
    try:
        yield
    except Exception as e:
        message = explain(e, repo, key, what)
        if message is None:
            raise
        raise HubError(message) from e


def card_front_matter(base: str, *fields: str) -> list[str]:
    """A model card's YAML front matter: ``base_model`` only for a Hub model id (``gpt2``, ``owner/name``), which
    is all the Hub takes there (not a local folder, not ``builtin:tiny-llama``), then ``fields``.

    >>> card_front_matter("builtin:tiny-llama", "tags: [grpo]"), card_front_matter("Qwen/Qwen2.5-7B")[1]
    (['---', 'tags: [grpo]', '---'], 'base_model: Qwen/Qwen2.5-7B')
    """
    from pathlib import Path

    hub_id = re.fullmatch(r"[\w.-]+(?:/[\w.-]+)?", base) and not Path(base).exists()
    return ["---", *([f"base_model: {base}"] if hub_id else []), *fields, "---"]
