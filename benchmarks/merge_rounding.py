"""How much of a LoRA update a bf16 merge keeps: why lora.merged_generation=auto merges float32 weights only.

    python benchmarks/merge_rounding.py                  # a 4096 x 4096 projection, rank 16, a few seconds

A base weight already in bf16 sits exactly on bf16's grid, so ``bf16(W + delta)`` rounds back to ``W`` wherever the
update is below half a unit in the last place of ``W`` (about ``|W| / 512``): that part of the update is lost, and a
model generating with the merged weights samples a policy closer to the base than the one being trained. Rows:
LoRA B drawn at growing scales (B starts at 0 and grows as training goes on; A at peft's initial scale), with the
share of the update the merged weight keeps (its projection on the update) and the relative error of the update
in a layer's output. float32 weights keep all of it.
"""

from __future__ import annotations

import argparse
import sys

import torch


def rounding_rows(
    width: int = 4096, rank: int = 16, scales=(1e-5, 1e-4, 1e-3, 1e-2), seed: int = 0
) -> list[dict]:
    """One row per B scale: mean |update|, share kept, output error (bf16 merge of a N(0, 0.02) weight)."""
    generator = torch.Generator().manual_seed(seed)
    weight = (torch.randn(width, width, generator=generator) * 0.02).to(torch.bfloat16).float()
    a = (torch.rand(rank, width, generator=generator) * 2 - 1) / width**0.5  # peft's kaiming-uniform range
    x = torch.randn(64, width, generator=generator)
    rows = []
    for scale in scales:
        update = 2.0 * (torch.randn(width, rank, generator=generator) * scale) @ a  # lora_alpha / r = 2
        kept = (weight + update).to(torch.bfloat16).float() - weight
        rows.append(
            {
                "b_scale": scale,
                "mean_update": update.abs().mean().item(),
                "kept": ((kept * update).sum() / (update * update).sum()).item(),
                "output_error": ((x @ (kept - update).T).norm() / (x @ update.T).norm()).item(),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=4096, help="square projection size (default 4096)")
    args = parser.parse_args(argv)
    print(f"A {args.width} x {args.width} bf16 projection, N(0, 0.02) weights, LoRA rank 16, alpha/r 2:")
    print(
        "| LoRA B scale | mean abs update | update kept by a bf16 merge | error of the update in the output |"
    )
    print("|---|---|---|---|")
    for r in rounding_rows(args.width):
        print(f"| {r['b_scale']:g} | {r['mean_update']:.1e} | {r['kept']:.0%} | {r['output_error']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
