#!/usr/bin/env bash
# The GPU measurements of docs/PERFORMANCE.md ("Compiled decoding"), one part at a time:
#   bash benchmarks/gpu_tables.sh OUT_DIR [PART ...]
# PART: llama qlora qwen_small decode evaluate (default: all of them; an estimated 35 minutes on an H100 or H200).
# Each part prints its tables and keeps them in OUT_DIR/PART.txt. Random weights of the real shapes: nothing is
# downloaded, and every completion runs to its full length, the case the hardware floor describes.
set -euo pipefail
out=$(realpath -m "${1:?usage: bash benchmarks/gpu_tables.sh OUT_DIR [PART ...]}")  # before the cd below
shift
cd "$(dirname "$0")/.."
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(llama qlora qwen_small decode evaluate)
mkdir -p "$out"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'error: no CUDA GPU visible')"

llama=meta-llama/Llama-3.1-8B-Instruct
qwen_small=Qwen/Qwen2.5-1.5B-Instruct

# One GRPO benchmark per generation setting ("A B" is two overrides): 4 steps, the mean of steps 2-4 is the row.
rows() {
    local recipe=$1 shape=$2
    shift 2
    for setting in "$@"; do
        echo "== $recipe, $setting"
        # shellcheck disable=SC2086  # $setting holds one or more overrides
        python benchmarks/grpo_step.py "$recipe" --random-weights "$shape" --steps 4 $setting
    done
}
branch="lora.merged_generation=false"  # peft's LoRA branch, the shipped default for bf16 and 4-bit
merged="lora.merged_generation=true"
compiled="lora.merged_generation=true model.compiled_generation=true"
# transformers does not compile bitsandbytes models: the 4-bit recipes get a bf16 row (quantization=none) to compile.
unquantized="model.quantization=none $compiled"

for part in "${parts[@]}"; do
    case $part in
        llama) rows gsm8k_llama "$llama" "$branch" "$merged" "$compiled" ;;
        qlora) rows gsm8k_llama_qlora "$llama" "$branch" "$merged" ;;
        qwen_small) rows gsm8k_qwen_small "$qwen_small" "$branch" "$merged" "$unquantized" ;;
        decode) python benchmarks/decode_ops.py gsm8k_llama --random-weights "$llama" --batch 24 --steps 32 \
                    --compiled ;;
        evaluate)
            folder=$(mktemp -d)
            trap 'rm -rf "$folder"' EXIT
            python -c "
import sys; from pathlib import Path
from benchmarks.step_timer import build_random_model
from recipes.planner.shapes import config_for
build_random_model(config_for('$qwen_small'), Path(sys.argv[1]), 'bfloat16')" "$folder"
            for setting in "" "model.compiled_generation=true"; do
                echo "== evaluate, gsm8k_qwen_small in bf16 on random weights ${setting:-(plain generate)}"
                # shellcheck disable=SC2086
                python benchmarks/evaluate_throughput.py gsm8k_qwen_small "model.name_or_path=$folder" \
                    model.quantization=none data.eval_source=samples/gsm8k_test_sample.jsonl $setting \
                    --questions 64 --samples 4 --max-new-tokens 256 --batch-sizes 64,256 --engines hf
            done ;;
        *) echo "error: unknown part '$part'; the parts are llama qlora qwen_small decode evaluate" >&2; exit 2 ;;
    esac 2>&1 | tee "$out/$part.txt"
done
