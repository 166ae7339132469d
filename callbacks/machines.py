"""Checkpoints of a run on several machines that share no disk: each machine uploads the files only it holds, the
main process commits the manifest once every machine's part is in the store, and every machine downloads the
checkpoint it resumes from.

    accelerate launch --num_machines 2 --machine_rank 0 --main_process_ip HOST ... recipes/run.py RECIPE \
        checkpoint.uri=s3://bucket/runs/a        # and the same with --machine_rank 1 on the other machine

Under DDP every rank writes its own RNG state, and under DeepSpeed ZeRO its own optimizer shard, into its own
``output_dir``; on a machine of its own that folder is not the main process's. A machine counts as separate when
it cannot see the main process's lock file in its ``output_dir``; machines sharing a disk (one machine, or a
cluster's shared filesystem) need none of this: the main process sees every rank's files and does it all.

A machine's part ends with a receipt, ``checkpoint-N/.parts/<save>-<machine>.json`` (or the error that stopped
it); the main process writes the manifest only after every receipt of that save is in, so a checkpoint with a
missing shard is never committed.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from callbacks.download import download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.manifest import checkpoint_step, file_entries, list_files
from callbacks.remote import PARTS_DIR, RemoteCheckpoint, scan_readable, set_aside_theirs
from callbacks.stores import Store, open_store

logger = logging.getLogger(__name__)
PART_WAIT_S = 900.0  # how long the main process waits for the other machines' parts of one checkpoint


@dataclass(frozen=True)
class Machine:
    """This process's place among the run's machines, as :func:`join_machines` found it at the start."""

    separate: bool = False  # some machine of the run has its own disk: saves gather every machine's files
    uploads_part: bool = False  # this process uploads its machine's files (local main of a separate machine)
    name: str = "machine-0"  # named by its first rank: machine-<rank>


@dataclass
class Part:
    """Files of one checkpoint that another machine uploads, and the receipts the commit waits for."""

    save: str  # one save of one checkpoint: receipts of an earlier attempt never count
    files: dict[str, dict] = field(default_factory=dict)  # relative path -> {"size", "sha256"}
    machines: list[str] = field(default_factory=list)


def _gather(value) -> list:
    """``value`` of every process, in rank order."""
    import torch.distributed as dist

    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def join_machines(
    output_dir: Path,
    lock: Path,
    main_lock: str,
    resume_from: str | None,
    run_id: str,
    *,
    uri: str | None,
    endpoint_url: str | None,
) -> tuple[Machine, Store | None, str | None]:
    """Every process of a distributed run, once the main one has taken its ``lock`` (its text: ``main_lock``) on
    ``output_dir`` and chosen the checkpoint to resume from.

    Returns:
        (this machine, the store an uploading machine writes its part to, the checkpoint folder to resume from on
        this machine: a fresh download of the main process's choice on a separate machine).

    Raises:
        CheckpointError: On every process, when any machine cannot get the checkpoint the run resumes from.
    """
    from accelerate import PartialState

    state = PartialState()
    first_rank = state.process_index - state.local_process_index
    own_disk = (
        state.is_local_main_process
        and first_rank != 0
        and not (lock.is_file() and lock.read_text() == main_lock)
    )
    machine = Machine(separate=any(_gather(own_disk)), uploads_part=own_disk, name=f"machine-{first_rank}")
    store, failure = None, None
    if own_disk:
        try:
            store = _machine_store(uri, endpoint_url, Path(output_dir), machine)
            if resume_from:
                resume_from = fetch_for_machine(store, Path(output_dir), resume_from, run_id, machine)
        except CheckpointError as e:
            failure = f"{machine.name}: {e}"
    if machine.separate and (failures := [f for f in _gather(failure) if f]):
        raise CheckpointError("\n".join(failures))
    return machine, store, resume_from


def _machine_store(
    uri: str | None, endpoint_url: str | None, output_dir: Path, machine: Machine
) -> Store | None:
    """The store a machine without the main process's disk uploads its files to (None: no checkpoint.uri)."""
    if not uri:
        logger.warning(
            "%s does not share output_dir %s with the main process and there is no checkpoint.uri: its ranks' "
            "files of each checkpoint stay on this machine, so no checkpoint of this run can be resumed. Set "
            "checkpoint.uri, or put output_dir on a disk every machine shares.",
            machine.name, output_dir,
        )  # fmt: skip
        return None
    try:
        return open_store(uri, endpoint_url)
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"Cannot open checkpoint.uri {uri}: {e}") from e


def fetch_for_machine(
    store: Store | None, output_dir: Path, resume_from: str, run_id: str, machine: Machine
) -> str:
    """Download the checkpoint the main process chose into this machine's ``output_dir``; returns its folder.

    Raises:
        CheckpointError: No store to fetch from, or no complete copy of that checkpoint in it.
    """
    name = Path(resume_from).name
    if store is None:
        raise CheckpointError(
            f"{machine.name} does not share output_dir {output_dir} with the main process, so it cannot resume "
            f"from {name} there. Set checkpoint.uri (each machine then uploads its own files, and downloads the "
            "checkpoint it resumes from), or put output_dir on a disk every machine shares."
        )
    found = next((c for c in scan_readable(store) if c.name == name and c.run_id == run_id), None)
    if found is None or not found.complete:
        why = "; ".join(found.problems) if found else "not there"
        raise CheckpointError(
            f"The main process resumes from {name}, but {store.child_uri(name)} is not a complete checkpoint of "
            f"run {run_id} ({why}), so {machine.name} cannot resume with it."
        )
    logger.info("%s: downloading %s to resume with the main process", machine.name, store.child_uri(name))
    return str(download_checkpoint(store, found, Path(output_dir) / name))


def gather_parts(folder: Path, machine: Machine, *, is_main: bool) -> Part:
    """Every process, at a save: who uploads which file of the checkpoint ``folder``.

    The main process uploads what it holds; each separate machine uploads what only it holds (the first machine
    holding a file uploads it). On the main process the Part holds every file the other machines upload (size
    and SHA-256, for the manifest) and the machines whose receipts to wait for; on an uploading machine, its own
    share; elsewhere nothing.
    """
    mine = (
        {"save": uuid.uuid4().hex, "names": list_files(folder)}
        if is_main
        else {"machine": machine.name, "files": file_entries(folder)}
        if machine.uploads_part
        else None
    )
    gathered = [g for g in _gather(mine) if g is not None]
    main = next(g for g in gathered if "save" in g)
    taken, shares = set(main["names"]), {}
    for other in (g for g in gathered if "machine" in g):
        shares[other["machine"]] = {rel: e for rel, e in other["files"].items() if rel not in taken}
        taken |= set(shares[other["machine"]])
    if is_main:
        files = {rel: e for share in shares.values() for rel, e in share.items()}
        return Part(main["save"], files, sorted(shares))
    if machine.uploads_part:
        return Part(main["save"], shares[machine.name], [machine.name])
    return Part(main["save"])


def rotate_local(output_dir: Path, keep: int | None) -> list[str]:
    """Keep a separate machine's newest ``keep`` checkpoint folders (the Trainer rotates only the main process's).

    Called once the newest is staged (hard links): its upload never needs the folder, and a resume downloads from
    the store. Returns the names deleted.
    """
    if not keep:
        return []
    folders = sorted(
        (p for p in output_dir.iterdir() if p.is_dir() and checkpoint_step(p.name) is not None),
        key=lambda p: checkpoint_step(p.name),
    )
    doomed = folders[: max(len(folders) - keep, 0)]
    for folder in doomed:
        shutil.rmtree(folder)
    return [folder.name for folder in doomed]


def receipt_key(checkpoint: str, save: str, machine: str) -> str:
    return f"{checkpoint}/{PARTS_DIR}/{save}-{machine}.json"


def upload_part(store: Store, staged: Path, step: int, part: Part, machine: str) -> None:
    """A separate machine's upload: what it will write, its files, then its receipt (or, failing, the error, so the
    commit stops)."""
    name = f"checkpoint-{step}"
    receipt = receipt_key(name, part.save, machine)
    try:
        # A user's file where this upload writes is moved aside, never written over; then what it will write is
        # said, so a folder left half uploaded by a lost machine is known as ours, not a user's.
        listing = {k.partition("/")[2]: size for k, size in store.list(name).items()}
        set_aside_theirs(store, RemoteCheckpoint(name, step, listing), part.files)
        store.write_bytes(
            receipt.removesuffix(".json") + ".uploading.json",
            json.dumps({"files": list(part.files)}).encode(),
        )
        for rel in part.files:
            store.upload(staged / rel, f"{name}/{rel}")
    except Exception as e:
        store.write_bytes(receipt, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        raise
    store.write_bytes(receipt, json.dumps({"files": part.files}).encode())
    logger.info("%s: uploaded its %d files of %s", machine, len(part.files), store.child_uri(name))


def wait_for_parts(store: Store, checkpoint: str, part: Part, timeout: float = PART_WAIT_S) -> None:
    """Block until every machine's receipt for this save is in the store.

    Raises:
        CheckpointError: A machine reported a failed upload, or its receipt did not come within ``timeout``.
    """
    waiting, start = list(part.machines), time.monotonic()
    while waiting:
        for machine in list(waiting):
            data = store.read_bytes(receipt_key(checkpoint, part.save, machine))
            if data is None:
                continue
            receipt = json.loads(data)
            if "error" in receipt:
                raise CheckpointError(
                    f"{machine} could not upload its files of {checkpoint}: {receipt['error']}"
                )
            waiting.remove(machine)
        if waiting and time.monotonic() - start > timeout:
            raise CheckpointError(
                f"{', '.join(waiting)} did not upload its files of {checkpoint} within {timeout:.0f} s, so it was "
                "not committed (is that machine still running?)"
            )
        if waiting:
            time.sleep(0.5)
