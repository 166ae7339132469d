"""Batched generation for evaluation: Hugging Face ``generate`` with left padding, or vLLM.

Used by ``recipes/evaluate.py`` and ``benchmarks/evaluate_throughput.py``; not a command of its own.

Every request carries a seed derived from the evaluation seed, the question id and the sample index. vLLM
seeds each request with it, so its draws do not depend on batching. Hugging Face ``generate`` has one random
stream per call, so it is seeded from the seeds of all requests in the batch: the same batch (same requests,
same order) draws the same tokens on the same hardware and library versions, whatever ran before it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from common.errors import UserError
from recipes.compiled_generation import compile_generation

logger = logging.getLogger(__name__)


class EvaluationError(UserError):
    """An evaluation that cannot run as asked; the message says why and how to fix it."""


@dataclass(frozen=True)
class Decoding:
    """Sampling settings; ``temperature == 0`` is greedy decoding. Nothing else (top-k, penalties) applies."""

    temperature: float
    top_p: float
    max_new_tokens: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def decoding_for(
    trainer: dict,
    temperature: float | None,
    top_p: float | None,
    max_new_tokens: int | None,
    *,
    samples: int = 1,
) -> Decoding:
    """Decoding settings; each one not given is the resolved recipe's training sampling.

    Args:
        trainer: The recipe's ``trainer:`` section (``temperature``, ``top_p``, ``max_completion_length``).
        temperature: Sampling temperature; 0 is greedy.
        top_p: Nucleus sampling mass.
        max_new_tokens: Longest completion, in tokens.
        samples: Completions per question; more than one needs sampling (greedy ones would all be equal).
    """

    from recipes.recipe import with_defaults

    trainer = with_defaults({"trainer": trainer})["trainer"]  # a hand-made partial section works too

    def pick(given, key):
        return given if given is not None else trainer[key]

    decoding = Decoding(
        float(pick(temperature, "temperature")),
        float(pick(top_p, "top_p")),
        int(pick(max_new_tokens, "max_completion_length")),
    )
    # Each setting by the name it was given under (the option, or the recipe's key); "not ok" refuses nan too.
    checks = (
        ("--temperature", temperature, "temperature", decoding.temperature, decoding.temperature >= 0, "0 or above"),
        ("--top-p", top_p, "top_p", decoding.top_p, 0 < decoding.top_p <= 1, "above 0 and at most 1"),
        ("--max-new-tokens", max_new_tokens, "max_completion_length", decoding.max_new_tokens,
         decoding.max_new_tokens >= 1, "1 or more"),
    )  # fmt: skip
    bad = [
        (
            f"{flag} {value:g}"
            if given is not None
            else f"trainer.{key} {value:g} (the recipe's; {flag} overrides it)"
        )
        + f": expected {expected}"
        for flag, given, key, value, ok, expected in checks
        if not ok
    ]
    if bad:
        raise EvaluationError(f"Bad decoding setting: {'; '.join(bad)}.")
    if decoding.greedy and samples > 1:
        raise EvaluationError(
            f"--temperature 0 is greedy decoding: all {samples} samples would be the same. "
            "Use --samples 1, or a temperature above 0."
        )
    return decoding


class Completion(NamedTuple):
    """One generated answer: its text (special tokens removed) and its length in tokens, EOS included."""

    text: str
    n_tokens: int


def derive_seed(*parts) -> int:
    """A 31-bit seed from any parts (stable across processes and Python versions, unlike ``hash``).

    >>> derive_seed(0, "gsm8k-test-00042", 1) == derive_seed(0, "gsm8k-test-00042", 1)
    True
    """
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big") & 0x7FFFFFFF


def plan_batches(questions: int, samples: int, batch_size: int) -> list[list[tuple[int, int]]]:
    """(question index, sample) units in plan order, cut into batches of ``batch_size``.

    Batches are cut from the full plan, never from what is left, so a resumed evaluation meets the same batches
    (and so the same per-batch seeds) as an uninterrupted one.
    """
    units = [(q, k) for q in range(questions) for k in range(samples)]
    return [units[i : i + batch_size] for i in range(0, len(units), batch_size)]


def prompt_token_ids(tokenizer, conversations: list[list[dict]]) -> list[list[int]]:
    """Token ids of chat prompts through the tokenizer's chat template, ready for the assistant's turn."""
    texts = tokenizer.apply_chat_template(conversations, add_generation_prompt=True, tokenize=False)
    # The template already writes any BOS token; the tokenizer must not add a second one.
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def adapter_rank(folder: Path) -> int:
    """The LoRA rank of an adapter folder; an error when the folder holds no peft adapter."""
    config = Path(folder) / "adapter_config.json"
    if not config.is_file():
        raise EvaluationError(
            f"{folder} holds no LoRA adapter (no adapter_config.json). Pass --adapter a training output_dir or "
            "checkpoint-N folder; to evaluate a full fine-tuned model instead, set model.name_or_path=<folder>."
        )
    return int(json.loads(config.read_text()).get("r", 8))


def generation_config(base, decoding: Decoding, pad_token_id: int):
    """The model's GenerationConfig with our decoding forced on it: no top-k, no repetition penalty."""
    config = copy.deepcopy(base)
    sampling = {"temperature": decoding.temperature, "top_p": decoding.top_p} if not decoding.greedy else {}
    config.update(
        do_sample=not decoding.greedy,
        max_new_tokens=decoding.max_new_tokens,
        num_beams=1,
        num_return_sequences=1,
        top_k=0 if not decoding.greedy else None,
        repetition_penalty=1.0,
        pad_token_id=pad_token_id,
        use_cache=True,  # training with activation checkpointing turns the model's cache off
        **sampling,
    )
    return config


class HFGenerator:
    """Many prompts per ``model.generate`` call, left-padded to a common length."""

    def __init__(self, model, tokenizer, decoding: Decoding, compiled: bool = False):
        self.model, self.tokenizer = model, tokenizer
        # New tokens are appended on the right, so padding must sit on the left.
        tokenizer.padding_side = "left"
        self.config = generation_config(model.generation_config, decoding, tokenizer.pad_token_id)
        self.compiled = compiled
        if compiled:  # model.compiled_generation
            compile_generation(self.config, model.device.type)
        eos = self.config.eos_token_id if self.config.eos_token_id is not None else tokenizer.eos_token_id
        self.stop_ids = set(eos) if isinstance(eos, list) else {eos}

    def size_cache(self, prompts: list[list[int]]) -> None:
        """Compiled: size the static cache for the longest of ``prompts`` once, so no later, longer batch
        recompiles the decode step."""
        if self.compiled:
            self.config.max_cache_len = max(map(len, prompts)) + self.config.max_new_tokens

    def generate(self, prompts: list[list[int]], seeds: list[int]) -> list[Completion]:
        """Complete each prompt (token ids) once; ``seeds`` has one seed per prompt."""
        import torch

        batch = self.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt")
        batch = batch.to(self.model.device)
        torch.manual_seed(derive_seed(*seeds))  # seeds every device, CUDA included
        # no_grad, never inference_mode: held-out evaluation generates with the training policy, and under
        # inference_mode FSDP2 gathers its weights as inference tensors that the next training forward cannot use
        # ("Inference tensors do not track version counter"); a compiled step would also need a second graph.
        with torch.no_grad():
            output = self.model.generate(**batch, generation_config=self.config)
        return [self._completion(row) for row in output[:, batch["input_ids"].shape[1] :].tolist()]

    def _completion(self, row: list[int]) -> Completion:
        # After the first stop token generate pads the row; the completion ends at (and includes) that token.
        n = next((i + 1 for i, token in enumerate(row) if token in self.stop_ids), len(row))
        return Completion(self.tokenizer.decode(row[:n], skip_special_tokens=True), n)


def load_generator(
    engine: str,
    model: dict,
    adapter: Path | None,
    decoding: Decoding,
    *,
    seed: int,
    merged: bool = False,
    compiled: bool = False,
):
    """(generator, tokenizer) for ``engine`` (``hf`` or ``vllm``), with the adapter applied when given.

    Args:
        engine: ``hf`` (transformers ``generate``) or ``vllm``.
        model: The recipe's ``model:`` section (the base model).
        adapter: A local peft adapter folder, or None for the base model.
        decoding: Sampling settings.
        seed: Engine-wide seed (vLLM); per-request seeds go to ``generate``.
        merged: ``hf`` with an adapter: generate with it merged, as training does (``lora.merged_generation``).
        compiled: ``hf``: decode with a static cache and a compiled step (``model.compiled_generation``).
    """
    from recipes.model import adapter_base_section, load_model_and_tokenizer, load_tokenizer

    if engine == "vllm":
        from recipes.evaluation.vllm_engine import VLLMGenerator, require_vllm

        require_vllm()
        return VLLMGenerator(model, adapter, decoding, seed=seed), load_tokenizer(model)
    import torch

    trained_from = (adapter_base_section(Path(adapter)) or {}).get("name_or_path") if adapter else None
    # Another name: the same weights in another place (a local copy of a Hub model), or a wrong pairing that may
    # load all the same (a model of the same shape) and be evaluated as if it were the run's.
    if trained_from and trained_from != model["name_or_path"]:
        logger.warning(
            "The adapter in %s was trained from %s; this evaluation applies it to %s (model.name_or_path). Unless "
            "that is the same model, set model.name_or_path=%s.", adapter, trained_from, model["name_or_path"],
            trained_from,
        )  # fmt: skip
    cuda = torch.cuda.is_available()
    base, tokenizer = load_model_and_tokenizer(model, device_index=0 if cuda else None)
    if cuda and model["quantization"] == "none":
        base = base.to("cuda")  # quantized weights were placed on the GPU as they loaded
    if adapter is not None:
        from peft import PeftModel

        try:
            base = PeftModel.from_pretrained(base, str(adapter))
        except (RuntimeError, ValueError, KeyError) as e:
            raise EvaluationError(
                f"Cannot apply the adapter in {adapter} to {model['name_or_path']}: {_load_failure(e)}. It was "
                f"trained from {trained_from or 'another base model'}: set model.name_or_path to that, or evaluate "
                "with the recipe it was trained with."
            ) from None
        if merged:
            from recipes.merged_lora import merge_adapters

            merge_adapters(base)  # for good: this model only generates, and the unmerged layers are freed
    base.eval()
    return HFGenerator(base, tokenizer, decoding, compiled), tokenizer


def _load_failure(error: Exception) -> str:
    """peft's failure in one line: torch lists every weight of another shape on a line of its own."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    mismatches = [line for line in lines if line.startswith("size mismatch for ")]
    if mismatches:
        first = mismatches[0].removeprefix("size mismatch for ").rstrip(".")
        return f"{len(mismatches)} of its weights have other shapes than this model's (first: {first})"
    return lines[0] if lines else type(error).__name__


def check_context(
    model_section: dict, prompts: list[list[int]], max_new_tokens: int, ids: list[str] | None = None
) -> None:
    """Refuse completions that would run past the model's context, as run.py does for training: past it the
    model generates from positions it never saw, and the records would grade that as its answer. ``ids`` (one per
    prompt) name the longest prompt's question, so that a question too long for the model can be found."""
    from recipes.planner.shapes import load_model_config

    context = getattr(load_model_config(model_section), "max_position_embeddings", None)
    longest = max(map(len, prompts))
    if context and longest + max_new_tokens > context:
        room = (
            f"use --max-new-tokens {context - longest} or fewer" if longest < context
            else "the prompt alone fills it: use shorter questions or a longer-context model"
        )  # fmt: skip
        which = f"question {ids[list(map(len, prompts)).index(longest)]}, " if ids else ""
        raise EvaluationError(
            f"--max-new-tokens {max_new_tokens} after the longest prompt ({which}{longest} tokens) is "
            f"{longest + max_new_tokens} tokens, but {model_section['name_or_path']} holds at most {context}: {room}."
        )
