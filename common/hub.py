"""Downloads from the Hugging Face Hub that fail for a reason the user can fix, said as one ``HubError``, at once.

transformers and datasets report a gated model, a misspelled id or a machine without network as a traceback
whose last line says what happened but not which recipe key to change. ``hub_errors`` names the key and the
fix. Anything else (a full disk, a corrupt file) keeps its traceback.

Without a network, huggingface_hub retries each file it has no cached copy of five more times (a 60 s timeout
each, 1 + 2 + 4 + 8 + 8 s apart: ``file_download._ETAG_RETRY_TIMEOUT``, ``http_backoff``), and no setting turns
that off short of ``HF_HUB_OFFLINE``: half a minute per file where the name does not resolve, minutes where
packets are dropped. ``offline_if_unreachable`` asks the Hub once, without retries, and reads the cache alone when
it does not answer; ``hub_load`` is both, for every model and dataset load.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
            return _not_cached(repo, key, what)
    return None


def _not_cached(repo: str, key: str, what: str) -> str:
    """The message for a file the cache lacks and the network cannot bring: why, and the four ways out."""
    from huggingface_hub import constants

    why = hub_unreachable()  # None: HF_HUB_OFFLINE was set, or the Hub answered and a later request failed
    user_offline = why is None and constants.is_offline_mode()
    reason = (
        "HF_HUB_OFFLINE is set"
        if user_offline
        else f"the Hugging Face Hub could not be reached{f' ({why})' if why else ''}"
    )
    download = f"`hf download {repo}{' --repo-type dataset' if what == 'dataset' else ''}`"
    network = (
        "Unset HF_HUB_OFFLINE on a machine with a network"
        if user_offline
        else "Connect this machine to the network (and for a gated model such as Llama, log in: `hf auth login`, "
        "or set HF_TOKEN)"
    )
    return (
        f"{key}: {reason}, and {repo} ({what}) is not in the local cache ({constants.HF_HUB_CACHE}). {network} and "
        f"rerun; or download it once where there is one ({download}, into the same cache) and copy the cache here, "
        f"then HF_HUB_OFFLINE=1 reads it without trying the network; or set {key} to a local folder that holds it."
    )


# A Hub that answered is taken as there for the rest of the process. A Hub that did not is asked again after this
# long: a run's loads follow each other within seconds, but a notebook's kernel outlives a network outage.
_RECHECK_S = 60.0
_probe: dict = {}  # the last answer: {"at": time.monotonic(), "why": None or the reason}


def hub_unreachable() -> str | None:
    """Why this process cannot reach the Hub (``HF_ENDPOINT``), or None: it answered, or HF_HUB_OFFLINE keeps every
    load off the network anyway. One HEAD request, no retries, waiting at most ``HF_HUB_ETAG_TIMEOUT`` seconds
    (huggingface_hub's own limit for a file's metadata); an answer is remembered for the process, no answer for
    ``_RECHECK_S`` seconds."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    if constants.is_offline_mode():
        return None
    if _probe and (_probe["why"] is None or time.monotonic() - _probe["at"] < _RECHECK_S):
        return _probe["why"]
    why = None
    try:  # any answer, even an error status, means the Hub is there: its own errors are said by hub_errors
        get_session().head(constants.ENDPOINT, timeout=constants.HF_HUB_ETAG_TIMEOUT, follow_redirects=False)
    except httpx2.TransportError as e:  # no DNS, refused, timed out, a proxy or TLS failure
        why = f"{constants.ENDPOINT}: {e}"
    _probe.update(at=time.monotonic(), why=why)
    return why


@contextmanager
def offline_if_unreachable(path: str) -> Iterator[None]:
    """Loads inside read the local cache alone, as under HF_HUB_OFFLINE=1, when ``path`` is not on this machine
    (a Hub id) and the Hub cannot be reached: a cached copy loads as before, a missing file fails at once instead
    of after huggingface_hub's retries. With the Hub in reach, or a local folder, nothing changes."""
    from huggingface_hub import constants

    if Path(path).exists() or hub_unreachable() is None:
        yield
        return
    # huggingface_hub reads this at every request (is_offline_mode): transformers then takes the cache alone, and
    # any request left (transformers 5.24 asks for adapter_config.json even with local_files_only) is refused.
    was, constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE, True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was


@contextmanager
def hub_load(repo: str, key: str, what: str, path: str | None = None) -> Iterator[None]:
    """A load of ``repo`` (read from ``path`` when that is where it resolved to): its fixable failures said as one
    ``HubError`` (:func:`hub_errors`), at once when the Hub cannot be reached (:func:`offline_if_unreachable`)."""
    with hub_errors(repo, key, what), offline_if_unreachable(path or repo):
        yield


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
