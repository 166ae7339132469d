"""One decision for every process of a launch: the main process makes it (it alone holds the final adapter, the
store's answer, the upload outcome) and the others take its answer, so no process goes another way."""

from __future__ import annotations


def broadcast_from_main(value):
    """``value`` from the main process, on every process (as it is, without a launcher)."""
    from accelerate.utils import broadcast_object_list

    box = [value]
    broadcast_object_list(box, from_process=0)
    return box[0]
