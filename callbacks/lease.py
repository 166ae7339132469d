"""One run per checkpoint prefix: a lease object that names the launch writing there, renewed while it runs.

Two launches on one ``checkpoint.uri`` (a lost Colab session that is still running, a second machine) would
share a run id and overwrite each other's committed checkpoints. The lease, ``<uri>/run.lease.json``, is
created with a conditional write where the store has one (S3 If-None-Match), renewed every 30 s, checked
before every commit and deleted at the end. A launch that died (kill -9, a lost machine) stops renewing it,
and after ``TTL`` seconds the next launch takes it over (at once on the same machine, where a dead process
can be recognised).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid

from callbacks.errors import CheckpointError
from callbacks.lock import process_alive, this_process
from callbacks.stores import Store

logger = logging.getLogger(__name__)
LEASE_KEY = "run.lease.json"
TTL = 120.0  # seconds without renewal after which a lease is taken to be abandoned (a restart takes longer)
RENEW_EVERY = 30.0


class RemoteLease:
    """The lease of this launch on ``store``; ``check()`` before each commit, ``release()`` at the end."""

    def __init__(self, store: Store, recipe: str, *, ttl: float = TTL, renew_every: float = RENEW_EVERY):
        self.store, self.ttl, self.renew_every = store, ttl, renew_every
        self.me = {"launch": uuid.uuid4().hex, "recipe": recipe, **this_process()}
        self._stop = threading.Event()
        self._take()
        self._thread = threading.Thread(target=self._renew_loop, name="checkpoint-lease", daemon=True)
        self._thread.start()

    def _data(self) -> bytes:
        return json.dumps({**self.me, "renewed": time.time(), "ttl": self.ttl}).encode()

    def _owner(self) -> dict | None:
        data = self.store.read_bytes(LEASE_KEY)
        try:
            return json.loads(data) if data else None
        except json.JSONDecodeError:
            return None

    def _take(self) -> None:
        if self.store.write_bytes(LEASE_KEY, self._data(), if_absent=True):
            return
        owner = self._owner()
        age = time.time() - owner["renewed"] if owner and "renewed" in owner else float("inf")
        # A launch on this machine whose process is gone (killed, crashed) is known dead at once.
        gone_here = owner is not None and owner.get("host") == self.me["host"] and not process_alive(owner)
        if owner is not None and age < owner.get("ttl", TTL) and not gone_here:
            raise CheckpointError(
                f"{self.store.uri} is in use by another run of recipe {owner.get('recipe')!r} (pid "
                f"{owner.get('pid')} on host {owner.get('host')}, lease renewed {age:.0f} s ago): two runs on one "
                "prefix overwrite each other's checkpoints. Wait for it to end, or set checkpoint.uri to another "
                f"prefix. If that run is gone (a lost machine), its lease expires {owner.get('ttl', TTL) - age:.0f} s "
                f"from now; rerun then, or delete {self.store.child_uri(LEASE_KEY)}."
            )
        logger.warning(
            "Taking over %s: its run stopped renewing it (%s)", self.store.child_uri(LEASE_KEY), owner
        )
        self.store.write_bytes(LEASE_KEY, self._data())

    def check(self) -> None:
        """Raise CheckpointError when another launch holds the lease now (this one must stop writing)."""
        owner = self._owner()
        if owner is None or owner.get("launch") != self.me["launch"]:
            raise CheckpointError(
                f"this run lost its lease on {self.store.uri} to {owner or 'nobody'}; it stopped uploading so the "
                "two runs do not overwrite each other's checkpoints."
            )

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_every):
            try:
                self.check()
                self.store.write_bytes(LEASE_KEY, self._data())
            except Exception as e:  # noqa: BLE001 - a renewal failure is reported; the commit check decides
                logger.warning("Could not renew the lease on %s: %s", self.store.uri, e)

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this launch's."""
        if self._stop.is_set():
            return
        self._stop.set()
        # A renewal under way would otherwise write the lease back after the delete, and hold the prefix for a TTL.
        self._thread.join(self.ttl)
        try:
            self.check()
            self.store.delete([LEASE_KEY])
        except Exception as e:  # noqa: BLE001 - never mask how the run ended; an unreleased lease expires
            logger.warning("Could not release the lease on %s: %s", self.store.uri, e)
