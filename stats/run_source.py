"""Where ``python -m stats.curves`` reads a run: a local folder as it is, or a run URI fetched into the cache.

A URI (``s3://``, ``file://``: a run prefix, one of its checkpoint-N, or its ``/best``) is fetched with
``callbacks.fetch.fetch_checkpoint``: the checkpoint's trainer_state.json holds the whole log up to its step. The
report and the title then name the URI, not the cache folder, and the checkpoint marks are the store's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from callbacks.stores import is_remote
from stats._io import IMAGE_SUFFIXES, check_output_path
from stats.records import InputError
from stats.trainer_state import is_checkpoint


@dataclass(frozen=True)
class RunSource:
    """The folder to read, where the image goes unless ``--out`` says, and how to name the run."""

    folder: Path
    default_out: Path
    label: str | None = None  # a URI: named instead of the cache folder it was fetched into
    checkpoints: tuple[int, ...] | None = (
        None  # a URI: the store's complete checkpoints up to the fetched one
    )


def run_source(location: str, endpoint_url: str | None = None) -> RunSource:
    """Resolve a command-line run location.

    The default image lands in OUTPUT_DIR, which plot_curves checks itself. Not in a checkpoint: a file there is
    one its manifest does not list (a replaced copy is then quarantined, not deleted), and retention deletes it
    unasked. Nor in a fetched copy in the cache: the current folder then, named after the run and the checkpoint.

    Raises:
        InputError: ``--endpoint-url`` with a local folder, or a URI that cannot be fetched (the reason).
    """
    if not is_remote(location):
        if endpoint_url:
            raise InputError(f"--endpoint-url is for an s3:// URI; {location} is a local folder.")
        folder = Path(location)
        if not _is_folder_store(folder):
            out = (
                folder.parent / f"curves-{folder.name}.png"
                if is_checkpoint(folder)
                else folder / "curves.png"
            )
            return RunSource(folder, out)
        location = folder.resolve().as_uri()  # read as the store it is: nothing is written into it
    from callbacks.best import best_run, names_best_pointer
    from callbacks.errors import CheckpointError
    from callbacks.fetch import fetch_checkpoint  # the store code alone, not the TrainerCallback
    from callbacks.manifest import checkpoint_step
    from callbacks.remote import open_source, scan_readable, source_uri

    best = names_best_pointer(location)
    run, step = (best_run(location), None) if best else source_uri(location)
    try:
        folder = fetch_checkpoint(location, endpoint_url=endpoint_url)
        store, _ = open_source(run, endpoint_url)
        complete = sorted(c.step for c in scan_readable(store) if not c.problems)
    except CheckpointError as err:
        raise InputError(str(err)) from err
    name = Path(urlparse(run).path.rstrip("/")).name or urlparse(run).netloc
    name += "-best" if best else f"-checkpoint-{step}" if step is not None else ""
    fetched = checkpoint_step(folder.name)
    marks = tuple(s for s in complete if fetched is None or s <= fetched)  # the log ends at the fetched step
    out = check_output_path(f"curves-{name}.png", "the default output", IMAGE_SUFFIXES)
    return RunSource(folder, out, location, marks)


def _is_folder_store(folder: Path) -> bool:
    """A run's prefix in a folder store (``checkpoint.uri`` a folder): sealed checkpoint-N folders, and neither the
    recipe.yaml nor the trainer_state.json that a training output folder holds."""
    from callbacks.manifest import MANIFEST_NAME

    return (
        not is_checkpoint(folder)
        and not (folder / "recipe.yaml").exists()
        and not (folder / "trainer_state.json").exists()
        and any((c / MANIFEST_NAME).is_file() for c in folder.glob("checkpoint-*"))
    )
