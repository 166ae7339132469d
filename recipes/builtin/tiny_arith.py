"""A tiny Llama that starts able but imperfect at the arithmetic word problems of ``recipes.tasks.arithmetic``.

Built locally in about half a minute on two idle CPU cores (35 s from a cold start), for an offline GRPO run that
measurably learns:

1. a byte-level BPE tokenizer trained on generated problems, with every digit its own token (so numbers are
   spelled digit by digit, as arithmetic wants), and the special tokens and chat template of
   ``recipes.builtin.tiny_llama`` (so the project's loader pads on the left and generation stops at ``<|end|>``);
2. a random tiny Llama (``ARITH_CONFIG``);
3. a short supervised warm start with TRL's SFTTrainer on the worked solutions of the train split, stopped
   early (``SFT_STEPS``): the model writes the ``a op b = c`` / ``#### n`` format and gets a share of the
   answers right when sampling at temperature 1.0, leaving GRPO room to improve it.

    python -m recipes.builtin.tiny_arith /tmp/tiny-arith [SEED]
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from recipes.builtin.tiny_llama import CHAT_TEMPLATE, SPECIAL_TOKENS, bpe_tokenizer, random_llama, save_model
from recipes.tasks import arithmetic

logger = logging.getLogger(__name__)
# The system prompt of the arith recipes; the warm start trains with it so prompts look the same in GRPO.
SYSTEM_PROMPT = "Solve the problem. End with '#### <number>'."
ARITH_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 256,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "initializer_range": 0.02,
}
VOCAB_SIZE = 384
SFT_ROWS = 2000  # train-split problems the warm start learns from (repeated over its steps)
# 600 steps of 16 rows, not 450 of 32: the warm start is limited by its number of updates more than by its rows
# per update, and it costs rows x steps (docs/PERFORMANCE.md, "The learning default").
SFT_STEPS = 600
SFT_BATCH = 16
SFT_LR = 3e-3
SFT_LABEL_SMOOTHING = 0.0


def build_tokenizer(texts: list[str]):
    """Byte-level BPE over ``texts`` with digits always split into single tokens."""
    from tokenizers import pre_tokenizers

    split = [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    return bpe_tokenizer(texts, VOCAB_SIZE, pre_tokenizers.Sequence(split))


def warm_start_threads() -> int:
    """Threads for the warm start: 2 when two cores are idle as it begins, else 1.

    The weights come out bit-identical on 1 and 2 threads (so the measured base and gains hold either way). On an
    idle 2-core CPU, 2 threads built the model in 35 s instead of 43 s; with another job busy on one core they
    took 145 s instead of 53 s (measured with an older, longer warm start), so a busy core is left alone. More
    than 2 threads is not verified to give the same weights.
    """
    import psutil

    idle_cores = psutil.cpu_count() * (1 - psutil.cpu_percent(interval=0.5) / 100)
    return 2 if idle_cores >= 1.5 else 1


def build_arith_model(
    folder: str | Path,
    *,
    seed: int = 0,
    sft_steps: int = SFT_STEPS,
    sft_lr: float = SFT_LR,
    data_seed: int = 0,
) -> Path:
    """Build the tokenizer, the tiny Llama and its warm start into ``folder`` (written atomically).

    Args:
        folder: Destination folder; it must not exist yet.
        seed: Seed of the random weights and of the warm start's data order.
        sft_steps: Optimizer steps of the warm start (fewer: a weaker starting model).
        sft_lr: Peak learning rate of the warm start.
        data_seed: Seed of the generated train problems the warm start learns from.
    """
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    folder = Path(folder)
    threads = torch.get_num_threads()
    torch.set_num_threads(warm_start_threads())
    rows = arithmetic.make_rows("train", SFT_ROWS, data_seed)
    tokenizer = build_tokenizer([SYSTEM_PROMPT] + [t for r in rows for t in (r["question"], r["answer"])])

    model = random_llama(tokenizer, ARITH_CONFIG, seed)

    dataset = Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": r["question"]},
                ],
                "completion": [{"role": "assistant", "content": r["answer"]}],
            }
            for r in rows
        ]
    )
    try:
        with tempfile.TemporaryDirectory(prefix="tiny-arith-sft-") as scratch:
            args = SFTConfig(
                output_dir=scratch,
                max_steps=sft_steps,
                per_device_train_batch_size=SFT_BATCH,
                learning_rate=sft_lr,
                lr_scheduler_type="constant_with_warmup",
                warmup_steps=10,
                weight_decay=0.0,
                logging_steps=50,
                save_strategy="no",
                report_to="none",
                use_cpu=True,
                seed=seed,
                data_seed=seed,
                bf16=False,
                activation_checkpointing=False,  # on by TRL's default: recomputing 2 small layers cost 13% of the time
                max_length=128,
                dataloader_num_workers=0,
                disable_tqdm=True,
                label_smoothing_factor=SFT_LABEL_SMOOTHING,
            )
            trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
            trainer.remove_callback(PrinterCallback)  # its loss dicts on stdout; one line below instead
            trainer.train()
        losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
        logger.info("Warm start: %d supervised steps, loss %.2f -> %.2f", sft_steps, losses[0], losses[-1])
    finally:
        torch.set_num_threads(threads)
    model = trainer.model
    model.config.use_cache = True  # the trainer turned the KV cache off for training; generation wants it
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    return save_model(folder, model, tokenizer)


def build(folder: Path) -> Path:
    """What ``builtin:tiny-arith`` builds (``recipes.builtin`` caches it)."""
    return build_arith_model(folder)


BUILDS = "a tokenizer, a random 2-layer Llama and a supervised warm start: about 35 s on 2 idle CPU cores"
BUILD_VERSION = 1  # bump when build_arith_model changes what it writes
# Everything that shapes the built model, the problems it learns from included: a change makes a new cache folder.
BUILD_KEY = (
    ARITH_CONFIG, VOCAB_SIZE, SFT_ROWS, SFT_STEPS, SFT_BATCH, SFT_LR, SFT_LABEL_SMOOTHING, SYSTEM_PROMPT,
    SPECIAL_TOKENS, CHAT_TEMPLATE, arithmetic.MAX_NUMBER, arithmetic.NAMES, arithmetic.ITEMS, arithmetic.PHRASES,
    arithmetic.QUESTIONS, arithmetic.SPLIT_BUCKETS, BUILD_VERSION,
)  # fmt: skip


if __name__ == "__main__":
    import sys

    from recipes.builtin import build_command

    description = "Build the warm-started tiny arithmetic Llama into a folder."
    sys.exit(build_command(lambda folder, seed: build_arith_model(folder, seed=seed), description))
