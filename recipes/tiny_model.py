"""A tiny Llama-architecture model built locally, for offline runs and tests.

The `gsm8k_tiny` recipe names it as ``model.name_or_path: builtin:tiny-llama``. It has random weights and a
byte-level BPE tokenizer trained on the bundled GSM8K sample, so a full GRPO run works on a CPU with no
network. It cannot do arithmetic; it exists to exercise every code path with a real architecture.

    python -m recipes.tiny_model /tmp/tiny-llama      # build one by hand
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

BUILTIN_PREFIX = "builtin:"
SAMPLES = Path(__file__).parent / "samples"

# Special tokens of the tiny chat format. `<|end|>` closes every turn and is the EOS token, so a completion
# ends when the model emits it, as with a real instruct model.
SPECIAL_TOKENS = ["<|pad|>", "<|begin|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
BUILD_VERSION = 1  # bump when build_tiny_model changes what it writes
# initializer_range 0.1 (not Llama's 0.02) makes the random model's next-token distribution peaked enough that a
# LoRA adapter can move it within a few dozen GRPO steps, which the learning tests rely on.
# Small enough that a GRPO step takes well under a second on one CPU core, large enough to be a real transformer.
TINY_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "initializer_range": 0.1,
}


def cache_dir() -> Path:
    """Where built-in models are cached (``$GRPO_RECIPES_CACHE``, default ``~/.cache/grpo-recipes``)."""
    return Path(os.environ.get("GRPO_RECIPES_CACHE", Path.home() / ".cache" / "grpo-recipes"))


def _corpus() -> list[str]:
    texts = []
    for name in ("gsm8k_train_sample.jsonl", "gsm8k_test_sample.jsonl"):
        for line in (SAMPLES / name).read_text().splitlines():
            row = json.loads(line)
            texts += [row["question"], row["answer"]]
    return texts


def build_tiny_model(folder: str | Path, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Build the tiny model and its tokenizer into ``folder`` (written atomically) and return the folder.

    Args:
        folder: Destination folder; it must not exist yet.
        vocab_size: BPE vocabulary size, special tokens included.
        seed: Seed of the random weights.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|begin|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def resolve_builtin(name_or_path: str) -> str:
    """Map ``builtin:tiny-llama`` to a cached local folder, building it on first use; pass other names through."""
    if not name_or_path.startswith(BUILTIN_PREFIX):
        return name_or_path
    name = name_or_path[len(BUILTIN_PREFIX) :]
    if name != "tiny-llama":
        raise ValueError(f"Unknown built-in model {name_or_path!r}. Available: builtin:tiny-llama")
    # The folder name carries a digest of everything that shapes the model, so a changed recipe never reuses a stale one.
    digest = hashlib.sha256(
        repr((TINY_CONFIG, SPECIAL_TOKENS, CHAT_TEMPLATE, BUILD_VERSION)).encode()
    ).hexdigest()[:10]
    folder = cache_dir() / f"tiny-llama-{digest}"
    if not folder.exists():
        try:
            build_tiny_model(folder)
        except OSError:
            if not folder.exists():  # another process may have won the rename race; that is fine
                raise
    return str(folder)


if __name__ == "__main__":
    print(build_tiny_model(sys.argv[1]))
