"""S3 (and S3-compatible: MinIO, Cloudflare R2) checkpoint store, with a preflight that explains failures.

Credentials come from boto3's usual chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (Colab secrets exported to
the environment), AWS_PROFILE, instance roles. Retries use botocore's standard mode.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import uuid
from pathlib import Path

from callbacks.errors import CheckpointError
from callbacks.stores import Progress, Store

logger = logging.getLogger(__name__)
# Large enough that adapters and LoRA optimizer states go up in a few parts, small enough to retry cheaply.
_PART_BYTES = 64 << 20
# What S3-compatible stores answer to a checksum they do not support.
_CHECKSUM_REFUSED = ("NotImplemented", "InvalidRequest", "InvalidArgument")


def make_client(endpoint_url: str | None, *, retries: int, connect_timeout: float, read_timeout: float):
    """A boto3 S3 client with standard-mode retries and timeouts, tagged with this process's rank.

    ``retries`` counts attempts after the first (botocore's ``max_attempts`` key means retries).
    """
    import boto3
    from botocore.config import Config

    options = {
        "retries": {"mode": "standard", "max_attempts": retries},
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
        # The rank in the user agent shows in server access logs which process talked to the store.
        "user_agent_extra": f"grpo-recipes rank/{os.environ.get('RANK', '0')}",
    }
    if endpoint_url:
        # S3-compatible stores reject the CRC checksums newer botocore sends by default.
        options.update(
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": "path"},
        )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=Config(**options))


class S3Store(Store):
    """Checkpoints under ``s3://bucket/prefix/``.

    Args:
        bucket: Bucket name.
        prefix: Key prefix without leading/trailing slashes ("" for the bucket root).
        endpoint_url: S3-compatible endpoint, e.g. ``http://127.0.0.1:9000``; None for AWS.
        retries: Retries per request after the first attempt, under botocore's standard retry mode (backoff
            with jitter; 503 SlowDown, throttling, timeouts and connection resets are retried).
        read_timeout: Seconds a request may wait for the store's answer before it is retried.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None = None,
        retries: int = 4,
        read_timeout: float = 30.0,
    ):
        from boto3.s3.transfer import TransferConfig

        self.bucket, self.prefix, self.endpoint_url = bucket, prefix, endpoint_url
        self.uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        # Bounded: a frozen endpoint fails a request after (retries + 1) x read_timeout, about 2.5 minutes.
        self.client = make_client(
            endpoint_url, retries=retries, connect_timeout=10, read_timeout=read_timeout
        )
        self.transfer = TransferConfig(multipart_threshold=_PART_BYTES, multipart_chunksize=_PART_BYTES)
        self._conditional_writes = True
        self._checksums = True

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def list(self, sub: str = "") -> dict[str, int]:
        root = self._key("")
        start = self._key(sub.rstrip("/") + "/") if sub else root
        listing = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start):
            for obj in page.get("Contents", []):
                listing[obj["Key"][len(root) :]] = obj["Size"]
        return listing

    def upload(self, local: Path, key: str, progress: Progress = None) -> None:
        from boto3.exceptions import S3UploadFailedError

        # With a SHA-256, S3 refuses bytes that do not match it and keeps it with the object: a later launch
        # checks the store's copy with a HEAD instead of a download (mismatches).
        extra = {"ChecksumAlgorithm": "SHA256"} if self._checksums else {}
        try:
            self.client.upload_file(
                str(local),
                self.bucket,
                self._key(key),
                ExtraArgs=extra,
                Config=self.transfer,
                Callback=progress,
            )
        except S3UploadFailedError as e:
            if not extra or not any(code in str(e) for code in _CHECKSUM_REFUSED):
                raise
            logger.warning(
                "%s refused a SHA-256 checksum with an upload (%s): uploading without one; its checkpoints are "
                "then checked by size only until they are downloaded", self.uri, e,
            )  # fmt: skip
            self._checksums = False
            self.upload(local, key, progress)

    def mismatches(self, name: str, entries: dict[str, dict], copies: dict[str, Path]) -> dict[str, str]:
        stored = {
            rel: self.client.head_object(
                Bucket=self.bucket, Key=self._key(f"{name}/{rel}"), ChecksumMode="ENABLED"
            ).get("ChecksumSHA256")
            for rel in entries
        }
        found = {
            rel: "has a SHA-256 in the store other than the manifest's (replaced or corrupt)"
            for rel, checksum in stored.items()
            if checksum and (expected := self._checksum(checksum, entries[rel], copies.get(rel)))
            and checksum.split("-")[0] != expected
        }  # fmt: skip
        # Uploads of ours all carry one, or (a store that refuses them) none do: a file without one beside files
        # with one was written after the commit.
        if any(stored.values()):
            found |= {
                rel: "has no SHA-256 in the store, unlike the checkpoint's other files (replaced since its upload)"
                for rel, checksum in stored.items()
                if not checksum
            }
        return found

    def _checksum(self, stored: str, entry: dict, copy: Path | None) -> str | None:
        """The ChecksumSHA256 S3 would keep for the manifest's bytes uploaded as ``stored`` was: their SHA-256 (one
        PUT), or the SHA-256 of the parts' SHA-256s (multipart: AWS ends ``stored`` with ``-<parts>``, else the size
        tells), ``copy`` read in this client's parts; None when unknown (no copy, or another number of parts)."""
        _, suffix, count = stored.partition("-")
        if not suffix and entry["size"] < self.transfer.multipart_threshold:
            return base64.b64encode(bytes.fromhex(entry["sha256"])).decode()
        if copy is None or not copy.is_file():
            return None
        parts = []
        with open(copy, "rb") as f:
            while part := f.read(self.transfer.multipart_chunksize):
                parts.append(hashlib.sha256(part).digest())
        if suffix and str(len(parts)) != count:
            return None
        return base64.b64encode(hashlib.sha256(b"".join(parts)).digest()).decode()

    def download(self, key: str, local: Path, progress: Progress = None) -> None:
        self.client.download_file(
            self.bucket, self._key(key), str(local), Config=self.transfer, Callback=progress
        )

    def read_bytes(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as e:
            if _code(e) in ("NoSuchKey", "404"):
                return None
            raise

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        from botocore.exceptions import ClientError

        kwargs = {"Bucket": self.bucket, "Key": self._key(key), "Body": data}
        if if_absent and self._conditional_writes:
            try:
                self.client.put_object(**kwargs, IfNoneMatch="*")
                return True
            except ClientError as e:
                if _code(e) in ("PreconditionFailed", "412"):
                    return False
                if _code(e) not in ("NotImplemented", "501"):
                    raise
                logger.warning(
                    "%s does not support conditional writes (If-None-Match); checking first", self.uri
                )
                self._conditional_writes = False
        if if_absent and self.read_bytes(key) is not None:
            return False
        self.client.put_object(**kwargs)
        return True

    def move(self, key: str, new_key: str) -> None:
        # A server-side copy (multipart above 5 GB through the managed transfer), then the delete.
        source = {"Bucket": self.bucket, "Key": self._key(key)}
        self.client.copy(source, self.bucket, self._key(new_key), Config=self.transfer)
        self.delete([key])

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[i : i + 1000]]
            errors = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
            ).get("Errors", [])
            if errors:
                raise CheckpointError(f"Could not delete from {self.uri}: {errors[:3]}")

    def preflight(self) -> None:
        """Check the bucket exists and that we can write, read and delete a probe object; fail in seconds."""
        client = make_client(self.endpoint_url, retries=1, connect_timeout=3, read_timeout=5)
        probe = self._key(f".grpo-recipes-probe-{uuid.uuid4().hex}")
        action = "find the bucket"
        try:
            try:
                client.head_bucket(Bucket=self.bucket)
            except Exception as e:
                if _code(e) != "403":
                    raise
                # HEAD answers have no body: ask again with a GET to learn why access was refused.
                client.list_objects_v2(Bucket=self.bucket, MaxKeys=1, Prefix=self._key(""))
            action = "write"
            client.put_object(Bucket=self.bucket, Key=probe, Body=b"probe")
            action = "read"
            body = client.get_object(Bucket=self.bucket, Key=probe)["Body"].read()
            action = "delete"
            client.delete_object(Bucket=self.bucket, Key=probe)
        except Exception as e:
            raise CheckpointError(self.explain(e, action)) from e
        if body != b"probe":
            raise CheckpointError(f"{self.uri} returned different bytes than were written to it")

    def explain(self, error: Exception, action: str) -> str:
        from botocore.exceptions import (
            BotoCoreError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        where = f"{self.uri}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")
        key_id = _access_key_id()
        if isinstance(error, NoCredentialsError):
            return (
                f"No S3 credentials found for {where}. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                "environment (in Colab: store them as secrets and copy them into os.environ), or AWS_PROFILE "
                "for a profile in ~/.aws/credentials."
            )
        if isinstance(error, PartialCredentialsError):
            return f"Incomplete S3 credentials for {where}: {error}. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
        if isinstance(error, (EndpointConnectionError, ConnectTimeoutError)):
            return f"Cannot reach the S3 endpoint for {where}: {error}. Check checkpoint.endpoint_url and network."
        code = _code(error)
        if code == "InvalidAccessKeyId":
            return f"Bad S3 credentials: {where} does not know the access key id {key_id}. Check AWS_ACCESS_KEY_ID"
        if code == "SignatureDoesNotMatch":
            return (
                f"Bad S3 credentials: the secret key does not match access key id {key_id} at {where}. "
                "Check AWS_SECRET_ACCESS_KEY."
            )
        if code in ("ExpiredToken", "InvalidToken", "TokenRefreshRequired"):
            return (
                f"The S3 session token for {where} is expired or invalid ({code}). Refresh AWS_SESSION_TOKEN."
            )
        if code == "NoSuchBucket" or (code == "404" and action == "find the bucket"):
            return (
                f"Bucket {self.bucket!r} does not exist ({where}). Create it (aws s3 mb s3://{self.bucket}) "
                "or fix checkpoint.uri."
            )
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return (
                f"Permission denied: cannot {action} in {where} with access key id {key_id}. The credentials need "
                "s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject on this bucket and prefix."
            )
        if code in ("PermanentRedirect", "301", "AuthorizationHeaderMalformed"):
            return (
                f"Bucket {self.bucket!r} is in another region ({code}). Set AWS_DEFAULT_REGION to its region."
            )
        if isinstance(error, BotoCoreError) or code:
            return f"Cannot {action} in {where}: {error}"
        return f"Cannot {action} in {where}: {type(error).__name__}: {error}"


def _code(error: Exception) -> str | None:
    response = getattr(error, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def _access_key_id() -> str:
    import boto3

    credentials = boto3.session.Session().get_credentials()
    key = credentials.access_key if credentials else ""
    return f"{key[:4]}...{key[-4:]}" if len(key) > 8 else repr(key)
