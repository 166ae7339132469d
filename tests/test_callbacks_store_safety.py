"""What resuming and retention may do to a store: damaged commits are moved aside, files the project did not write
are never deleted, a truncated object is uploaded again, and temporaries a kill left behind are cleared."""

from __future__ import annotations

from _callbacks_helpers import commit, prepare

from callbacks.manifest import MANIFEST_NAME


def test_a_committed_checkpoint_with_a_damaged_manifest_is_quarantined_never_deleted(
    target, tmp_path, caplog
):
    uri, endpoint, store = target
    commit(store, tmp_path, 4)
    commit(store, tmp_path, 6)
    files = store.list("checkpoint-6")
    manifest = store.read_bytes(f"checkpoint-6/{MANIFEST_NAME}")
    store.write_bytes(f"checkpoint-6/{MANIFEST_NAME}", manifest[: len(manifest) // 2])  # not valid JSON

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-4")
    assert "Deleting" not in caplog.text and "Moved checkpoint-6 aside to" in caplog.text
    quarantined = store.list("quarantine")
    [folder] = {k.split("/")[1] for k in quarantined}
    assert folder.startswith("checkpoint-6-") and not store.list("checkpoint-6")
    assert sorted(k.split("/", 2)[2] for k in quarantined) == sorted(k.split("/", 1)[1] for k in files)
