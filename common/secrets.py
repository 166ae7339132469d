"""Credentials inside URIs: found, refused and redacted, so none reaches a log, a recipe.yaml or a bucket."""

from __future__ import annotations

import re

# scheme://userinfo@ - the userinfo part (user, user:password, KEY:SECRET) is what must never be kept.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]+@")
# ?X-Amz-Signature=..., &token=...: a presigned URL's or an API's secret in the query string.
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&](?:X-Amz-[A-Za-z-]+|[A-Za-z_-]*(?:token|signature|sig|secret|password|key)[A-Za-z_-]*)=)"
    r"[^&#\s'\"]+",
    re.IGNORECASE,
)

WHERE_CREDENTIALS_BELONG = (
    "credentials belong in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE for S3, "
    "HF_TOKEN for the Hub) or in ~/.aws/credentials, never in a URI: URIs are printed in logs, and a recipe's are "
    "saved beside every checkpoint"
)


def redact(text: str) -> str:
    """``text`` with the userinfo and the secret query parameters of every URI in it replaced by ``***``.

    >>> redact("checkpoint.uri=s3://KEY:SECRET@bucket/runs https://h/x?X-Amz-Signature=abc&part=2")
    'checkpoint.uri=s3://***@bucket/runs https://h/x?X-Amz-Signature=***&part=2'
    """
    return _QUERY_SECRET.sub(r"\g<name>***", _USERINFO.sub(r"\g<scheme>***@", text))


def credential_problem(key: str, value) -> str | None:
    """A one-line refusal when ``value`` is a URI carrying credentials, else None."""
    if isinstance(value, str) and (_USERINFO.search(value) or "://" in value and _QUERY_SECRET.search(value)):
        return (
            f"{key} carries credentials in its URI ({redact(value)}); remove them: {WHERE_CREDENTIALS_BELONG}"
        )
    return None
