"""Credentials inside URIs or in credential keys (``trainer.hub_token``): found, refused and redacted, so none
reaches a log, a recipe.yaml or a bucket."""

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

# A key whose value is a credential: TRL's trainer.hub_token (max_new_tokens and the like are counts, not tokens).
SECRET_KEY = re.compile(r"(?:^|[._])(?:[A-Za-z]*_)?(?:token|secret|password|api_key)$", re.IGNORECASE)
# key=value (an override) or key: value (YAML inside one) for such a key.
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<name>(?<![\w.])[\w.]*?(?:token|secret|password|api_key)\s*(?:=|:\s)\s*['\"]?)(?P<value>[^\s'\",}]+)",
    re.IGNORECASE,
)
# A key naming tokens, whose count or true/false is kept in sight (``min_token: 3``, a misspelt ``min_tokens``;
# ``token: true`` reads the stored login); a password, secret or API key is hidden whatever it is.
_TOKEN_KEY = re.compile(r"token\s*(?:=|:\s)\s*['\"]?$", re.IGNORECASE)
_PLAIN_VALUE = re.compile(r"\d{1,6}|true|false", re.IGNORECASE)

WHERE_CREDENTIALS_BELONG = (
    "credentials belong in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE for S3, "
    "HF_TOKEN for the Hub) or in ~/.aws/credentials, never in a URI: URIs are printed in logs, and a recipe's are "
    "saved beside every checkpoint"
)


def redact(text: str) -> str:
    """``text`` with the userinfo and the secret query parameters of every URI in it, and the value of every
    ``<credential key>=value``, replaced by ``***``.

    >>> redact("checkpoint.uri=s3://KEY:SECRET@bucket/runs https://h/x?X-Amz-Signature=abc&part=2")
    'checkpoint.uri=s3://***@bucket/runs https://h/x?X-Amz-Signature=***&part=2'
    >>> redact("trainer.hub_token=hf_abc trainer.max_new_tokens=5 trainer.hub_token='hf_abc'")
    "trainer.hub_token=*** trainer.max_new_tokens=5 trainer.hub_token='***'"
    >>> redact("trainer.model_init_kwargs={token: hf_abc, revision: main}")
    'trainer.model_init_kwargs={token: ***, revision: main}'
    >>> redact("rewards=[{name: correctness, min_token: 3}] trainer.model_init_kwargs={token: true}")
    'rewards=[{name: correctness, min_token: 3}] trainer.model_init_kwargs={token: true}'
    """
    text = _SECRET_ASSIGNMENT.sub(
        lambda m: (
            m[0] if _TOKEN_KEY.search(m["name"]) and _PLAIN_VALUE.fullmatch(m["value"]) else f"{m['name']}***"
        ),
        text,
    )
    return _QUERY_SECRET.sub(r"\g<name>***", _USERINFO.sub(r"\g<scheme>***@", text))


def _not_a_secret(value) -> bool:
    """A value no credential takes: true/false (``token: true`` reads the stored login) or a count under a million
    (``min_token: 8``, a misspelt ``min_tokens``, is then refused as the unknown key it is, not as a credential)."""
    return isinstance(value, bool) or isinstance(value, (int, float)) and abs(value) < 10**6


def credential_problem(key: str, value) -> str | None:
    """A one-line refusal when ``value`` is a URI carrying credentials, or any value of a credential key."""
    if value is not None and SECRET_KEY.search(key) and not _not_a_secret(value):
        return (
            f"{key} holds a credential, and a recipe is saved beside every checkpoint and uploaded with it: remove "
            "it, and log in with `hf auth login` or set HF_TOKEN in the environment (read from there)"
        )
    if isinstance(value, str) and (_USERINFO.search(value) or "://" in value and _QUERY_SECRET.search(value)):
        return (
            f"{key} carries credentials in its URI ({redact(value)}); remove them: {WHERE_CREDENTIALS_BELONG}"
        )
    return None
