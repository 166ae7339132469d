"""A store's copy of a checkpoint with the right sizes but other bytes, beside a good local copy of the same step:
found without a download (S3's stored SHA-256, a folder's files read back), moved aside and committed again, so
the next machine resumes that step instead of falling back to an older one."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import shutil

import pytest
from _callbacks_helpers import Faults, commit, make_checkpoint, prepare, s3_bucket

from callbacks.download import download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.local import write_marker
from callbacks.manifest import seal_checkpoint
from callbacks.remote import QUARANTINE, scan_remote
from callbacks.s3_store import S3Store
from callbacks.stores import FolderStore

KEY = "checkpoint-4/optimizer.pt"


def flipped(store) -> bytes:
    data = bytearray(store.read_bytes(KEY))
    data[0] ^= 0xFF
    return bytes(data)


def resumed_locally(store, uri, tmp_path, caplog, **commit_options):
    """Commit checkpoint-4 and keep a verified local copy of it in output_dir, as a launch that synced it leaves
    them; returns (the commit's source folder, the local copy)."""
    source = commit(store, tmp_path, 4, **commit_options)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    local = shutil.copytree(source, out / "checkpoint-4")
    seal_checkpoint(local, step=4, recipe_name="tiny", run_id="r1", world_size=1)
    caplog.set_level(logging.INFO)
    return source, local


def assert_the_store_resumes_checkpoint_4_again(store, source, tmp_path):
    """What the next machine does: download the store's checkpoint-4 (verified against its manifest)."""
    checkpoint = next(c for c in scan_remote(store) if c.name == "checkpoint-4")
    fresh = download_checkpoint(store, checkpoint, tmp_path / "next-machine" / "checkpoint-4")
    assert (fresh / "optimizer.pt").read_bytes() == (source / "optimizer.pt").read_bytes()


def assert_moved_aside_and_committed_again(store, uri, endpoint, source, local, tmp_path, caplog):
    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(local)
    assert "optimizer.pt" in caplog.text and "uploading it again" in caplog.text
    [aside] = {k.split("/")[1] for k in store.list(QUARANTINE)}
    assert aside.startswith("checkpoint-4-")
    assert store.read_bytes(f"{QUARANTINE}/{aside}/optimizer.pt") == flipped_copy(source)  # the evidence kept
    assert_the_store_resumes_checkpoint_4_again(store, source, tmp_path)
    plan.release()


def test_a_damaged_store_copy_of_the_right_size_is_moved_aside_and_committed_again(target, tmp_path, caplog):
    """Before, a good local checkpoint-4 made the store's checkpoint-4 count as safe when its sizes matched."""
    uri, endpoint, store = target
    source, local = resumed_locally(store, uri, tmp_path, caplog)
    if isinstance(store, S3Store):  # S3 keeps the SHA-256 of what was written: a HEAD tells them apart
        store.client.put_object(
            Bucket=store.bucket, Key=f"{store.prefix}/{KEY}", Body=flipped(store), ChecksumAlgorithm="SHA256"
        )
    else:
        store.write_bytes(KEY, flipped(store))  # a half-synced drive, a bit flip: found by reading it back
    assert_moved_aside_and_committed_again(store, uri, endpoint, source, local, tmp_path, caplog)


def test_an_s3_object_rewritten_without_a_checksum_is_found_by_its_missing_one(monkeypatch, tmp_path, caplog):
    """A tool of yours (or an older client) writing over one file leaves it without the SHA-256 the others have."""
    s3 = s3_bucket(monkeypatch)
    uri, endpoint, store = s3.uri("run"), s3.endpoint, S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    source, local = resumed_locally(store, uri, tmp_path, caplog)
    store.client.put_object(Bucket=store.bucket, Key=f"{store.prefix}/{KEY}", Body=flipped(store))
    assert_moved_aside_and_committed_again(store, uri, endpoint, source, local, tmp_path, caplog)


def flipped_copy(source) -> bytes:
    data = bytearray((source / "optimizer.pt").read_bytes())
    data[0] ^= 0xFF
    return bytes(data)


def test_a_good_store_copy_uploaded_in_parts_is_not_uploaded_again(monkeypatch, tmp_path, caplog):
    """S3 keeps a checksum of the parts' checksums for a multipart upload: recomputed from the local copy, it
    must match, or every relaunch would move a good checkpoint aside and upload it again."""
    monkeypatch.setattr("callbacks.s3_store._PART_BYTES", 5 << 20)  # S3's smallest part
    s3 = s3_bucket(monkeypatch)
    uri, endpoint, store = s3.uri("run"), s3.endpoint, S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    _, local = resumed_locally(store, uri, tmp_path, caplog, size=6 << 20)  # optimizer: 3 parts
    s3.server.requests.clear()

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(local) and "uploading it again" not in caplog.text
    assert not store.list(QUARANTINE)
    assert not [path for method, path, _ in s3.server.requests if method == "PUT" and "checkpoint-4" in path]
    assert [
        m for m, path, _ in s3.server.requests if m == "HEAD" and "checkpoint-4/" in path
    ]  # it was checked
    plan.release()


def test_an_s3_compatible_store_refusing_checksums_gets_plain_uploads(monkeypatch, tmp_path, caplog):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    Faults(store.client, "PutObject", ["501"])  # NotImplemented, as to the checksum header
    folder = make_checkpoint(tmp_path, 2)

    store.upload(folder / "scheduler.pt", "checkpoint-2/scheduler.pt")
    store.upload(folder / "rng_state.pth", "checkpoint-2/rng_state.pth")

    assert store.read_bytes("checkpoint-2/scheduler.pt") == (folder / "scheduler.pt").read_bytes()
    assert caplog.text.count("refused a SHA-256 checksum with an upload") == 1


def test_a_store_copy_missing_a_file_beside_altered_bytes_is_moved_aside_too(target, tmp_path, caplog):
    """A missing file sent the store's copy to a repair, which uploads only what is missing or short, and the bytes
    went unchecked: the altered file stayed, and the next machine's download fell back to an older checkpoint."""
    uri, endpoint, store = target
    source, local = resumed_locally(store, uri, tmp_path, caplog)
    if isinstance(store, S3Store):
        store.client.put_object(
            Bucket=store.bucket, Key=f"{store.prefix}/{KEY}", Body=flipped(store), ChecksumAlgorithm="SHA256"
        )
    else:
        store.write_bytes(KEY, flipped(store))
    store.delete(["checkpoint-4/scheduler.pt"])  # a half-synced drive: one file not there yet
    assert_moved_aside_and_committed_again(store, uri, endpoint, source, local, tmp_path, caplog)


def test_parts_of_another_size_than_this_clients_are_not_taken_for_damage(monkeypatch, tmp_path):
    """A multipart checksum is recomputed from the local copy with this client's part size: an upload cut otherwise
    (another version's part size, another client) read as damaged, and a good copy was moved aside and uploaded
    again at every launch. S3's own '-N' (its part count) tells when the recomputation cannot apply."""
    import hashlib

    from callbacks.s3_store import S3Store

    s3 = s3_bucket(monkeypatch)
    monkeypatch.setattr("callbacks.s3_store._PART_BYTES", 5 << 20)
    uploader = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    monkeypatch.setattr("callbacks.s3_store._PART_BYTES", 6 << 20)
    checker = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    local = tmp_path / "optimizer.pt"
    local.write_bytes(bytes(range(256)) * (11 << 12))  # 11 MiB: 3 parts of 5 MiB, 2 of 6
    uploader.upload(local, "checkpoint-4/optimizer.pt")
    entry = {"size": local.stat().st_size, "sha256": hashlib.sha256(local.read_bytes()).hexdigest()}
    # AWS ends a multipart upload's checksum with -<parts> (the test server does not)
    for store in (uploader, checker):
        head = store.client.head_object
        monkeypatch.setattr(
            store.client,
            "head_object",
            lambda h=head, **kw: {**h(**kw), "ChecksumSHA256": h(**kw)["ChecksumSHA256"] + "-3"},
        )

    assert checker.mismatches("checkpoint-4", {"optimizer.pt": entry}, {"optimizer.pt": local}) == {}
    assert uploader.mismatches("checkpoint-4", {"optimizer.pt": entry}, {"optimizer.pt": local}) == {}
    other = tmp_path / "other.pt"
    other.write_bytes(bytes(reversed(range(256))) * (11 << 12))  # the same size, other bytes
    uploader.upload(other, "checkpoint-4/optimizer.pt")
    assert "optimizer.pt" in uploader.mismatches(
        "checkpoint-4", {"optimizer.pt": entry}, {"optimizer.pt": local}
    )


class _Heads:
    """A stand-in S3 client answering HEAD with the ChecksumSHA256 each key holds (None: no checksum)."""

    def __init__(self, checksums: dict[str, str | None]):
        self.checksums, self.calls = checksums, []

    def head_object(self, **kwargs):
        self.calls.append(kwargs)
        checksum = self.checksums[kwargs["Key"]]
        return {"ContentLength": 1} | ({"ChecksumSHA256": checksum} if checksum else {})


def _sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _multipart_sha(data: bytes, part: int) -> str:
    parts = [hashlib.sha256(data[i : i + part]).digest() for i in range(0, len(data), part)]
    return _sha(b"".join(parts))


def _store_heads(checksums, tmp_path, files):
    """An S3Store over a stand-in client, its multipart threshold and part size 8 bytes; files: rel -> bytes,
    written as local copies. Returns (store, manifest entries, copies)."""
    from boto3.s3.transfer import TransferConfig

    store = S3Store("bucket", "run")
    store.client = _Heads({f"run/checkpoint-4/{rel}": c for rel, c in checksums.items()})
    store.transfer = TransferConfig(multipart_threshold=8, multipart_chunksize=8)
    copies = {rel: tmp_path / rel for rel in files}
    for rel, data in files.items():
        copies[rel].write_bytes(data)
    entries = {
        rel: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for rel, data in files.items()
    }
    return store, entries, copies


def test_s3_checksums_single_and_multipart_are_compared_with_the_manifest(tmp_path):
    files = {"small.bin": b"1234567", "eight.bin": b"12345678", "parts.bin": b"0123456789abcdefXYZ"}
    good = {
        "small.bin": _sha(files["small.bin"]),  # under the threshold: one PUT, the file's own SHA-256
        "eight.bin": _multipart_sha(files["eight.bin"], 8) + "-1",  # at the threshold: one part
        "parts.bin": _multipart_sha(files["parts.bin"], 8) + "-3",  # real S3 ends it with -<parts>
    }
    store, entries, copies = _store_heads(good, tmp_path, files)

    assert store.mismatches("checkpoint-4", entries, copies) == {}
    assert {c["Key"] for c in store.client.calls} == {f"run/checkpoint-4/{rel}" for rel in files}
    assert all(c["Bucket"] == "bucket" and c["ChecksumMode"] == "ENABLED" for c in store.client.calls)
    unsuffixed = good | {
        "eight.bin": _multipart_sha(files["eight.bin"], 8)
    }  # a store without the -<parts> tail
    store, entries, copies = _store_heads(unsuffixed, tmp_path, files)
    assert store.mismatches("checkpoint-4", entries, copies) == {}

    other = b"X" + files["small.bin"][1:]
    bad = good | {"small.bin": _sha(other), "parts.bin": _multipart_sha(b"X" * 19, 8) + "-3"}
    store, entries, copies = _store_heads(bad, tmp_path, files)
    why = "has a SHA-256 in the store other than the manifest's (replaced or corrupt)"
    assert store.mismatches("checkpoint-4", entries, copies) == {"small.bin": why, "parts.bin": why}


def test_an_s3_multipart_checksum_without_a_local_copy_is_not_judged(tmp_path):
    files = {"small.bin": b"1234567", "parts.bin": b"0123456789abcdefXYZ"}
    checksums = {"small.bin": _sha(files["small.bin"]), "parts.bin": "c29tZXRoaW5nIGVsc2U=-3"}
    store, entries, copies = _store_heads(checksums, tmp_path, files)

    assert store.mismatches("checkpoint-4", entries, {"small.bin": copies["small.bin"]}) == {}
    copies["parts.bin"].unlink()  # named, but gone
    assert store.mismatches("checkpoint-4", entries, copies) == {}


def test_an_s3_file_without_a_checksum_counts_only_beside_files_with_one(tmp_path):
    files = {"a.bin": b"1234567", "b.bin": b"7654321"}
    store, entries, copies = _store_heads({"a.bin": _sha(files["a.bin"]), "b.bin": None}, tmp_path, files)
    assert store.mismatches("checkpoint-4", entries, copies) == {
        "b.bin": "has no SHA-256 in the store, unlike the checkpoint's other files (replaced since its upload)"
    }
    store, entries, copies = _store_heads(dict.fromkeys(files), tmp_path, files)  # a store refusing them
    assert store.mismatches("checkpoint-4", entries, copies) == {}


def test_a_folder_store_reads_its_files_back(tmp_path):
    store = FolderStore(tmp_path / "store")
    files = {"a.bin": b"1234567", "sub/b.bin": b"7654321", "gone.bin": b"x"}
    for rel, data in files.items():
        (store.root / "checkpoint-4" / rel).parent.mkdir(parents=True, exist_ok=True)
        (store.root / "checkpoint-4" / rel).write_bytes(data)
    entries = {
        rel: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for rel, data in files.items()
    }
    assert store.mismatches("checkpoint-4", entries, {}) == {}

    (store.root / "checkpoint-4" / "sub/b.bin").write_bytes(b"7654320")
    (store.root / "checkpoint-4" / "gone.bin").unlink()
    why = "does not match its SHA-256 in the manifest (altered or corrupt)"
    assert store.mismatches("checkpoint-4", entries, {}) == {"sub/b.bin": why, "gone.bin": why}


def test_a_damaged_store_copy_uploaded_in_parts_is_found_with_the_local_copys_parts(
    monkeypatch, tmp_path, caplog
):
    """The checksum S3 keeps for a multipart upload is recomputed from the verified local copy's parts."""
    monkeypatch.setattr("callbacks.s3_store._PART_BYTES", 5 << 20)  # S3's smallest part
    s3 = s3_bucket(monkeypatch)
    uri, endpoint, store = s3.uri("run"), s3.endpoint, S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    source, local = resumed_locally(store, uri, tmp_path, caplog, size=6 << 20)  # optimizer: in parts
    store.client.put_object(
        Bucket=store.bucket, Key=f"{store.prefix}/{KEY}", Body=flipped(store), ChecksumAlgorithm="SHA256"
    )
    assert_moved_aside_and_committed_again(store, uri, endpoint, source, local, tmp_path, caplog)


def test_a_store_whose_bytes_cannot_be_checked_is_named_with_the_failure(monkeypatch, tmp_path, caplog):
    uri = str(tmp_path / "drive" / "run")
    store = FolderStore(uri)
    resumed_locally(store, uri, tmp_path, caplog)

    def unreadable(self, name, entries, copies):
        raise PermissionError("the drive was unmounted")

    monkeypatch.setattr(FolderStore, "mismatches", unreadable)
    with pytest.raises(
        CheckpointError,
        match=rf"Cannot check checkpoint-4 in {re.escape(uri)}: PermissionError: the drive was unmounted",
    ):
        prepare(tmp_path / "out", uri, None)
    assert f"Checking the bytes of {uri}/checkpoint-4 against its manifest" in caplog.text
