"""Checkpoint settings: the keys of a recipe's ``checkpoint:`` section, their defaults and their rules, once.

The recipe loader builds its ``checkpoint:`` schema from ``CheckpointSettings`` and validates the section with
it at load (so ``--print`` and ``--plan`` catch a bad value); ``prepare_checkpointing`` takes the same keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from callbacks.errors import CheckpointError


def _key(default, types: tuple, help: str):
    return field(default=default, metadata={"types": types, "help": help})


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class CheckpointSettings:
    """Where checkpoints are synced, how often, how many are kept, and what a run resumes from."""

    uri: str | None = _key(None, (str, None), "s3://bucket/prefix or a mounted folder to sync checkpoints to")
    every_steps: int = _key(25, (int,), "save (and sync) a checkpoint every N optimizer steps")
    keep_last: int | None = _key(None, (int, None), "remote checkpoints to keep (null keeps all)")
    resume: str = _key("latest", (str,), "latest | never | a checkpoint path or URI | RUN/best")
    run_id: str | None = _key(
        None, (str, None), "run id recorded in manifests (null: new id, or the resumed run's)"
    )
    overwrite: bool = _key(False, (bool,), "allow writing over another run's checkpoints at uri")
    endpoint_url: str | None = _key(None, (str, None), "S3-compatible endpoint (MinIO, R2); null for AWS")
    require_upload: bool = _key(
        False,
        (bool,),
        "exit non-zero when the last checkpoint did not reach uri (the adapter is saved locally anyway)",
    )

    def __post_init__(self):
        problems = self.problems()
        if problems:
            raise CheckpointError("; ".join(problems))

    def problems(self) -> list[str]:
        """Every rule the values break, each naming its key."""
        uri, keep_last, run_id, endpoint = self.uri, self.keep_last, self.run_id, self.endpoint_url
        problems = []
        if uri is not None and (not isinstance(uri, str) or not uri.strip()):
            problems.append(f"checkpoint.uri must be null, s3://bucket/prefix or a folder, got {uri!r}")
        if not _positive(self.every_steps):
            problems.append(f"checkpoint.every_steps must be a positive integer, got {self.every_steps!r}")
        if keep_last is not None and not _positive(keep_last):
            problems.append(f"checkpoint.keep_last must be null or a positive integer, got {keep_last!r}")
        if keep_last is not None and not uri:
            problems.append(
                "checkpoint.keep_last limits remote checkpoints and needs checkpoint.uri; "
                "local ones are limited by trainer.save_total_limit"
            )
        if not isinstance(self.resume, str) or not self.resume.strip():
            problems.append(f"checkpoint.resume must be latest, never, a path or a URI, got {self.resume!r}")
        if run_id is not None and not (isinstance(run_id, str) and re.fullmatch(r"[A-Za-z0-9._-]+", run_id)):
            problems.append(
                f"checkpoint.run_id must be null or letters, digits, '.', '_', '-', got {run_id!r}"
            )
        for key in ("overwrite", "require_upload"):
            if not isinstance(getattr(self, key), bool):
                problems.append(f"checkpoint.{key} must be true or false, got {getattr(self, key)!r}")
        if self.require_upload and not uri:
            problems.append("checkpoint.require_upload needs checkpoint.uri (there is no upload without one)")
        if endpoint is not None and not (isinstance(endpoint, str) and re.match(r"https?://", endpoint)):
            problems.append(f"checkpoint.endpoint_url must be null or an http(s):// URL, got {endpoint!r}")
        return problems


SETTING_FIELDS = {f.name: f for f in fields(CheckpointSettings)}
