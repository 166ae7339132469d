"""A tiny Llama-architecture model built locally, for offline runs and tests.

The `gsm8k_tiny` recipe names it as ``model.name_or_path: builtin:tiny-llama``. It has random weights and a
byte-level BPE tokenizer trained on the bundled GSM8K sample, so a full GRPO run works on a CPU with no
network. It cannot do arithmetic; it exists to exercise every code path with a real architecture.

    python -m recipes.builtin.tiny_llama /tmp/tiny-llama [SEED]      # build one by hand (a new folder)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from recipes.atomic import write_folder_atomically

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

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


def _corpus() -> list[str]:
    texts = []
    for name in ("gsm8k_train_sample.jsonl", "gsm8k_test_sample.jsonl"):
        for line in (SAMPLES / name).read_text().splitlines():
            row = json.loads(line)
            texts += [row["question"], row["answer"]]
    return texts


def random_llama(tokenizer, config: dict, seed: int):
    """A Llama of ``config``'s shape with seeded random weights, sized and wired to ``tokenizer``'s tokens."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **config,
        )
    )
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def bpe_tokenizer(texts: list[str], vocab_size: int, pre_tokenizer):
    """A byte-level BPE tokenizer trained on ``texts`` (in about a second), with the chat template and the
    special tokens both tiny models use."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizer
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|begin|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(folder: str | Path, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Build the tiny model and its tokenizer into ``folder`` (written atomically) and return the folder.

    Args:
        folder: Destination folder; it must not exist yet.
        vocab_size: BPE vocabulary size, special tokens included.
        seed: Seed of the random weights.
    """
    from tokenizers import pre_tokenizers

    tokenizer = bpe_tokenizer(_corpus(), vocab_size, pre_tokenizers.ByteLevel(add_prefix_space=False))
    return save_model(folder, random_llama(tokenizer, TINY_CONFIG, seed), tokenizer)


def save_model(folder: Path, model, tokenizer) -> Path:
    """Write a model and its tokenizer to ``folder`` atomically (a crash leaves no half-built cache)."""

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return write_folder_atomically(folder, save)


def build(folder: Path) -> Path:
    """What ``builtin:tiny-llama`` builds (``recipes.builtin`` caches it)."""
    return build_tiny_model(folder)


# Everything that shapes the built model: a change makes a new cache folder, never a stale reuse.
BUILD_KEY = (TINY_CONFIG, SPECIAL_TOKENS, CHAT_TEMPLATE, BUILD_VERSION)
BUILDS = "a BPE tokenizer and a random 2-layer Llama: about a second"


if __name__ == "__main__":
    from recipes.builtin import build_command

    description = "Build the tiny random Llama and its tokenizer into a folder."
    sys.exit(build_command(lambda folder, seed: build_tiny_model(folder, seed=seed), description))
