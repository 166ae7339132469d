"""A store's copy of a checkpoint with the right sizes but other bytes, beside a good local copy of the same step:
found without a download (S3's stored SHA-256, a folder's files read back), moved aside and committed again, so
the next machine resumes that step instead of falling back to an older one."""

from __future__ import annotations

import logging
import shutil

from _callbacks_helpers import Faults, commit, make_checkpoint, prepare, s3_bucket

from callbacks.download import download_checkpoint
from callbacks.local import write_marker
from callbacks.manifest import seal_checkpoint
from callbacks.remote import QUARANTINE, scan_remote
from callbacks.s3_store import S3Store

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
