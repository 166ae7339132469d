"""vLLM's offline engine for evaluation (``--engine vllm``): each request seeded on its own, the adapter as a LoRA
request. Loaded only when asked for: vLLM is an optional extra, Linux and CUDA only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from common.suggestions import install_extra
from recipes.evaluation.generation import Completion, Decoding, EvaluationError, adapter_rank

# vLLM compiles LoRA kernels for these ranks only; an adapter needs the smallest one at least its rank.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
# vLLM reserves KV cache for the model's full context (128k tokens for Llama 3.1) unless told less; GSM8K
# prompts take ~200 tokens, so this leaves ample room while fitting small GPUs.
VLLM_PROMPT_TOKENS = 2048


def require_vllm() -> None:
    """Raise a clear error when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        raise EvaluationError(
            f"--engine vllm needs vLLM, which is not installed: {install_extra('vllm')}, on Linux with a CUDA GPU; "
            "or use --engine hf."
        )


class VLLMGenerator:
    """vLLM's offline engine, one request per prompt, each seeded on its own."""

    def __init__(self, model: dict, adapter: Path | None, decoding: Decoding, *, seed: int):
        from vllm import LLM
        from vllm.lora.request import LoRARequest

        from recipes.model import load_config, model_path

        if model["quantization"] == "8bit":
            raise EvaluationError(
                "--engine vllm cannot load model.quantization=8bit; use 4bit, none, or --engine hf."
            )
        kwargs = {}
        if adapter is not None:
            rank = adapter_rank(adapter)
            kwargs = {
                "enable_lora": True,
                "max_lora_rank": next((r for r in VLLM_LORA_RANKS if r >= rank), rank),
            }
        context = getattr(load_config(model), "max_position_embeddings", None)
        wanted = VLLM_PROMPT_TOKENS + decoding.max_new_tokens
        self.llm = LLM(
            model=model_path(model),
            max_model_len=min(wanted, context) if context else wanted,
            revision=model.get("revision"),
            dtype=model["dtype"],
            trust_remote_code=model["trust_remote_code"],
            quantization="bitsandbytes" if model["quantization"] == "4bit" else None,
            seed=seed,
            **kwargs,
        )
        self.lora = LoRARequest("adapter", 1, str(adapter)) if adapter is not None else None
        self.decoding = decoding

    def generate(self, prompts: list[list[int]], seeds: list[int]) -> list[Completion]:
        """Complete each prompt (token ids) once; ``seeds`` has one seed per prompt."""
        from vllm import SamplingParams

        d = self.decoding
        params = [
            SamplingParams(
                n=1,
                temperature=d.temperature,
                top_p=d.top_p if not d.greedy else 1.0,
                max_tokens=d.max_new_tokens,
                seed=seed,
            )
            for seed in seeds
        ]
        # Token ids, not text: vLLM would tokenize text again and could add a second BOS token.
        requests = [{"prompt_token_ids": ids} for ids in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora)
        return [Completion(out.outputs[0].text, len(out.outputs[0].token_ids)) for out in outputs]
