"""Export a trained adapter as a plain model: the LoRA weights merged into the base (peft ``merge_and_unload``).

    python recipes/export.py outputs/arith_tiny --out exported/arith_tiny
    python recipes/export.py s3://bucket/runs/llama --out llama-gsm8k       # the run's newest checkpoint

The result loads with ``AutoModelForCausalLM.from_pretrained(out)`` and no peft, in any tool that takes a
transformers model (vLLM, TGI, llama.cpp converters). The base is loaded unquantized in the recipe's dtype: a
QLoRA adapter is merged into full-precision weights, as merging into 4-bit weights would round them.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.errors import UserError, exit_status
from common.logs import log_to_stderr
from common.wording import questions_by_samples

logger = logging.getLogger("recipes.export")
# Beside the merged weights: the base and the adapter they came from, so that evaluate.py knows the folder is a
# trained model and names the base as the other side of the comparison.
MERGED_FROM = "merged_from.json"


class ExportError(UserError):
    """An adapter folder or output path that cannot be exported."""


def merged_base(model: str | Path) -> str | None:
    """The base model a merged export in the folder ``model`` was made from; None for any other model (a Hub id, a
    downloaded model, an export written before merged_from.json existed)."""
    path = Path(model) / MERGED_FROM
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))["base_model"]
    except (ValueError, KeyError, TypeError) as e:
        raise ExportError(f"{path}: expected the JSON export.py writes, with a base_model key ({e}).") from e


def base_model_section(adapter: Path) -> dict:
    """The ``model:`` section to load the base with (``recipes.model.adapter_base_section``)."""
    from recipes.model import adapter_base_section

    section = adapter_base_section(adapter)
    if section is None:
        raise ExportError(f"{adapter}: no recipe.yaml and no base_model_name_or_path in adapter_config.json.")
    return section


def merged_card(name: str, source: str, base: str, folder: Path) -> str:
    """The merged model's README: its base (Hub front matter, for a Hub id), which adapter was merged, and the
    held-out accuracy of the step merged beside the model's before training, when the run's history has them."""
    from callbacks.errors import CheckpointError
    from callbacks.heldout_history import HISTORY_NAME, read_history
    from common.hub import card_front_matter
    from common.ranking import accuracy_text
    from recipes.model_card import alarm_and_stop_lines

    lines = [*card_front_matter(base, "tags: [grpo, trl, grpo-recipes, merged-lora]"), "", f"# {name}", ""]
    lines += [
        (
            f"The LoRA adapter at {source} merged into `{base}` by grpo-recipes (`python recipes/export.py`). Loads "
            "with `AutoModelForCausalLM.from_pretrained`, no peft needed."
        ),
        "",
    ]
    state = folder / "trainer_state.json"
    try:
        history = read_history(folder / HISTORY_NAME) or read_history(folder / "heldout" / "history.json")
        step = json.loads(state.read_text(encoding="utf-8"))["global_step"] if state.is_file() else None
    except (CheckpointError, ValueError, KeyError) as e:  # the card goes without the line, not the export
        logger.warning("No held-out accuracy in the merged model's card: %s", e)
        history, step = None, None
    at = {e["step"]: e for e in (history or {}).get("evaluations", [])}

    def accuracy(entry: dict) -> str:  # None: the grader settled no sample of that evaluation
        ungraded = " (the grader settled none of its samples)" if entry["accuracy"] is None else ""
        return accuracy_text(entry["accuracy"]) + ungraded

    if step in at:
        before = f"; the model before training: {accuracy(at[0])}" if 0 in at else ""
        lines += [
            (
                f"Held-out accuracy at step {step} ({questions_by_samples(at[step]['questions'], at[step]['samples'])}, "
                f"never trained on): {accuracy(at[step])}{before}."
            ),
            "",
        ]
    return "\n".join(lines + alarm_and_stop_lines(history or {}))


def export(adapter: str | Path, out: str | Path, *, endpoint_url: str | None = None) -> Path:
    """Merge ``adapter`` (a folder or checkpoint URI) into its base and save the plain model to ``out``.

    Raises:
        ExportError: ``out`` exists or is a URI, or the adapter folder has no adapter.
        CheckpointError: The adapter cannot be fetched or verified.
    """
    from callbacks.fetch import fetch_checkpoint
    from recipes.atomic import write_folder_atomically
    from recipes.evaluation.resume import adapter_sha

    if "://" in str(out):  # Path would keep it as a local folder named s3:/bucket/...
        raise ExportError(
            f"--out {out}: export writes a local folder, not to a URI. Export to a folder here, then upload it "
            f"(for S3: aws s3 cp --recursive FOLDER {out})."
        )
    out = Path(out)
    if out.exists():
        free = next(f for n in range(2, 10**6) if not (f := out.with_name(f"{out.name}-{n}")).exists())
        raise ExportError(
            f"--out {out} already exists; export writes a new folder, never into an existing one: name a new one "
            f"(e.g. --out {free}), or move {out} away first."
        )
    folder = fetch_checkpoint(str(adapter), endpoint_url=endpoint_url)
    # A run prefix or best pointer resolves to one checkpoint: say which (a run without a final adapter gives
    # its newest checkpoint).
    source = f"`{adapter}`" if Path(folder) == Path(adapter) else f"`{folder}` (from `{adapter}`)"
    logger.info("Merging the adapter in %s", source.replace("`", ""))
    if not (folder / "adapter_config.json").is_file():
        raise ExportError(f"{folder} holds no LoRA adapter (no adapter_config.json); nothing to merge.")
    model_section = {**base_model_section(folder), "quantization": "none", "attn_implementation": "sdpa"}

    def save(tmp: Path) -> None:
        from peft import PeftModel

        from recipes.model import load_model, load_tokenizer

        base = load_model(model_section)
        merged = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
        merged.save_pretrained(tmp)
        load_tokenizer(model_section).save_pretrained(tmp)
        card = merged_card(out.name, source, model_section["name_or_path"], folder)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        origin = {
            "base_model": model_section["name_or_path"],
            # Absolute: the merged folder may be read from elsewhere (a URI stays as it is).
            "adapter": str(adapter) if "://" in str(adapter) else str(Path(adapter).resolve()),
            "adapter_sha": adapter_sha(folder),
        }
        (tmp / MERGED_FROM).write_text(json.dumps(origin, indent=2) + "\n", encoding="utf-8")

    return write_folder_atomically(out, save)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("adapter", help="training output_dir, checkpoint-N folder, or s3:// / file:// URI")
    parser.add_argument("--out", required=True, help="new folder for the merged model")
    parser.add_argument("--endpoint-url", help="S3-compatible endpoint for s3:// URIs (MinIO, R2)")
    args = parser.parse_args(argv)
    log_to_stderr()

    def run() -> None:
        path = export(args.adapter, args.out, endpoint_url=args.endpoint_url)
        print(f"wrote {path}: load it with AutoModelForCausalLM.from_pretrained({str(path)!r})")

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
