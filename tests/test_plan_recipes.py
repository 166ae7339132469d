"""Every shipped recipe gets a memory plan, through the runner's ``--plan`` flag."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from recipes.planner.launch_config import offloads_optimizer
from recipes.planner.memory import GIB
from recipes.planner.render import CARDS, plan_memory, render_plan
from recipes.recipe import RecipeError, available, load_recipe
from recipes.run import main


@pytest.mark.parametrize("name", sorted(available()))
def test_every_recipe_has_a_plan(name):
    recipe = load_recipe(name)
    text = render_plan(recipe)
    plan = plan_memory(recipe.config)
    assert plan.batch == recipe.config["trainer"]["per_device_train_batch_size"]
    assert plan.prompt_tokens == recipe.config["data"]["max_prompt_tokens"]
    card_rows = [
        line.split()[:2] for line in text.splitlines() if line.split()[:1] in ([n] for n, _ in CARDS)
    ]
    assert card_rows == [[name, f"{card / 2**30:.2f}"] for name, card in CARDS]


def test_run_plan_prints_the_plan(capsys):
    assert main(["gsm8k_qwen", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Memory plan for gsm8k_qwen (Qwen/Qwen2.5-7B-Instruct)")
    assert "\nT4          14.74" in out and "\nH200       139.80" in out


def test_run_plan_reports_a_missing_prompt_budget_without_a_traceback(capsys):
    assert main(["gsm8k_qwen", "data.max_prompt_tokens=null", "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data.max_prompt_tokens is not set") and "Traceback" not in err


def test_zero2_offload_plans_the_optimizer_in_host_ram(capsys):
    config = load_recipe("gsm8k_qwen").config  # adamw_torch on fp32 adapters: 8 bytes of state per parameter
    on_gpu, offloaded = plan_memory(config), plan_memory(config, offload_optimizer=True)
    assert on_gpu.optimizer_states == 8 * on_gpu.trainable_params and on_gpu.host_optimizer == 0
    assert offloaded.optimizer_states == 0
    assert offloaded.host_optimizer == 16 * offloaded.trainable_params  # fp32 master, 2 moments, gradient
    assert on_gpu.peak(80 * GIB) - offloaded.peak(80 * GIB) == on_gpu.optimizer_states
    zero2 = "recipes/accelerate/deepspeed_zero2_offload.yaml"
    assert main(["gsm8k_qwen", "--plan", "--config_file", zero2]) == 0
    out = capsys.readouterr().out
    assert "optimizer states (in host RAM: ZeRO-2 offload)" in out
    assert f"Host RAM for the offloaded optimizer: {offloaded.host_optimizer / GIB:.2f} GB" in out
    assert main(["gsm8k_qwen", "--plan", "--config_file", "recipes/accelerate/multi_gpu.yaml"]) == 0
    assert "Host RAM" not in capsys.readouterr().out


@pytest.mark.parametrize(("config", "named"), [("deepspeed_zero3", "DeepSpeed ZeRO-3"), ("fsdp", "FSDP")])
def test_a_sharded_launch_is_named_as_not_modelled(config, named, capsys):
    """The figures are for whole weights on each GPU: under ZeRO-3 or FSDP the plan must not pass for theirs."""
    assert main(["gsm8k_llama", "--plan", "--config_file", f"recipes/accelerate/{config}.yaml"]) == 0
    assert (
        f"{named} shards the weights across GPUs, which this plan does not model" in capsys.readouterr().out
    )
    assert main(["gsm8k_llama", "--plan", "--config_file", "recipes/accelerate/multi_gpu.yaml"]) == 0
    assert "shards the weights" not in capsys.readouterr().out


def test_the_plan_reads_the_offload_from_accelerate_launch(monkeypatch):
    assert not offloads_optimizer()
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    assert offloads_optimizer()
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "nvme")
    with pytest.raises(RecipeError, match="nvme is not modelled"):
        offloads_optimizer()


def test_an_unreadable_accelerate_config_is_named(capsys):
    assert main(["gsm8k_qwen", "--plan", "--config_file", "missing.yaml"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --config_file missing.yaml: not a readable accelerate config"
    )


def test_an_accelerate_config_without_plan_points_to_the_launcher(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["gsm8k_tiny", "--config_file", "recipes/accelerate/multi_gpu.yaml"])
    assert exit_.value.code == 2
    assert (
        "accelerate launch -q --config_file recipes/accelerate/multi_gpu.yaml recipes/run.py gsm8k_tiny"
        in (capsys.readouterr().err)
    )


def test_colocated_vllm_share_range_leaves_training_its_peak():
    config = load_recipe("gsm8k_qwen", ["trainer.use_vllm=true"]).config
    name, card = CARDS[-2]  # an H100 80GB: 79.65 GiB
    low, high = plan_memory(config).vllm_share_range(card)
    assert 0 < low < high < 1

    # The largest share fits; one hundredth more does not. The smallest holds vLLM; one hundredth less does not.
    def fits(share):
        return plan_memory(
            config | {"trainer": {**config["trainer"], "vllm_gpu_memory_utilization": share}}
        ).fits(card)

    assert fits(high) and not fits(round(high + 0.01, 2))
    assert fits(low) and not fits(round(low - 0.01, 2))
    text = render_plan(
        load_recipe("gsm8k_qwen", ["trainer.use_vllm=true", "trainer.vllm_gpu_memory_utilization=0.9"])
    )
    assert (
        f"{name:<10}{card / GIB:>7.2f}{low:>9.2f}{high:>9.2f}  refused: set trainer.vllm_gpu_memory_utilization={high:g}"
        in text
    )


@pytest.mark.parametrize(
    ("share", "card_gb", "message"),
    [
        (
            0.9,
            80,
            "vllm_gpu_memory_utilization=0.9 leaves training less than its planned peak on this 80 GB GPU",
        ),
        (0.1, 80, "vllm_gpu_memory_utilization=0.1 cannot hold vLLM's weights and KV on this 80 GB GPU"),
        (0.3, 16, "trainer.use_vllm=true (colocate) cannot fit this 16 GB GPU"),
    ],
)
def test_a_colocated_share_that_cannot_fit_is_refused_naming_the_one_that_does(share, card_gb, message):
    from recipes.planner.on_card import check_vllm_share
    from recipes.planner.shapes import config_for

    recipe = load_recipe(
        "gsm8k_qwen", ["trainer.use_vllm=true", f"trainer.vllm_gpu_memory_utilization={share}"]
    )
    model_config = config_for("Qwen/Qwen2.5-7B-Instruct")
    low, high = plan_memory(recipe.config, model_config=model_config).vllm_share_range(card_gb * GIB)
    with pytest.raises(RecipeError, match=re.escape(message)) as refused:
        check_vllm_share(recipe, model_config, card_gb * GIB)
    if low <= high:
        fix = high if share > high else low
        assert f"Set trainer.vllm_gpu_memory_utilization={fix:g}" in str(refused.value)
    check_vllm_share(load_recipe("gsm8k_qwen"), model_config, card_gb * GIB)  # vLLM off: nothing to check


def test_a_share_the_planner_cannot_model_is_trained_with_a_warning(caplog):
    from recipes.planner.on_card import check_vllm_share
    from recipes.planner.shapes import config_for

    recipe = load_recipe("gsm8k_qwen", ["trainer.use_vllm=true", "trainer.optim=adafactor"])
    check_vllm_share(recipe, config_for("Qwen/Qwen2.5-7B-Instruct"), 80 * GIB)
    assert (
        "vllm_gpu_memory_utilization is not checked against this GPU: trainer.optim 'adafactor'"
        in caplog.text
    )


def test_merged_generation_plans_a_copy_of_the_adapted_linears_where_the_card_has_room(capsys):
    from recipes.planner.shapes import config_for, lora_targets, shape_of

    def plan(*overrides):
        return plan_memory(
            load_recipe("gsm8k_llama", list(overrides)).config
        )  # Llama 3.1 8B, all-linear LoRA

    shape = shape_of(config_for("meta-llama/Llama-3.1-8B-Instruct"))
    adapted = sum(x.in_features * x.out_features for x in lora_targets(shape, "all-linear"))
    on, off = plan("lora.merged_generation=true"), plan("lora.merged_generation=false")
    assert on.merge == "on" and on.merged_weights == 2 * adapted  # 13 GB of bf16 copies
    assert off.merge == "off" and off.merged_weights == 0
    small, large = 24 * GIB, 80 * GIB
    assert on.peak(small) > small > off.peak(small)  # merging is what does not fit 24 GB
    assert on.peak(large) == off.peak(large) - off.generation_phase(large) + (
        on.merged_weights + on.kv_cache + on.generation_workspace
    )  # the copies sit beside the KV cache while generating
    assert plan().merge == "off"  # auto: bf16 weights would round small updates away
    fp32 = plan("model.dtype=float32")
    assert fp32.merge == "auto" and not fp32.merges(small) and fp32.merges(large)
    assert fp32.peak(small) == plan("model.dtype=float32", "lora.merged_generation=false").peak(small)
    assert plan("lora.merged_generation=true", "trainer.use_vllm=true").merge == "off"  # vLLM generates
    assert main(["gsm8k_llama", "model.dtype=float32", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "merged LoRA weights (lora.merged_generation=auto: where they fit)   26.00" in out
    # 40 GB holds the run but not the copies; 24 GB holds neither (no note); 80 GB holds both.
    assert re.search(
        r"^A100-40GB .* \(generates unmerged: no room for the merged copies\)$", out, re.MULTILINE
    )
    assert not re.search(r"^(RTX-4090|H100-80GB) .*unmerged", out, re.MULTILINE)
    assert main(["gsm8k_llama", "--plan"]) == 0
    assert (
        "merged LoRA weights (lora.merged_generation=auto: none, bfloat16 weights round small updates)"
        in (capsys.readouterr().out)
    )


def card(name: str, capability=(8, 9)):
    """torch's device properties for a card of CARDS (what check_card reads)."""
    return SimpleNamespace(
        name=name, total_memory=dict(CARDS)[name], major=capability[0], minor=capability[1]
    )


def test_a_plan_beyond_the_card_is_warned_of_with_the_overrides_that_fit(caplog):
    from recipes.planner.fit import same_batch_overrides
    from recipes.planner.on_card import check_card
    from recipes.planner.shapes import config_for

    model_config = config_for("meta-llama/Llama-3.1-8B-Instruct")
    with caplog.at_level("WARNING", logger="recipes.planner.on_card"):
        check_card(load_recipe("gsm8k_llama"), model_config, card("A100-40GB", (8, 0)))  # fits: nothing said
        assert caplog.text == ""
        check_card(load_recipe("gsm8k_llama"), model_config, card("L4"))
        assert caplog.text == ""
        # vLLM generates on another GPU: the training phase is the peak, which a smaller batch shrinks
        server = ["trainer.use_vllm=true", "trainer.vllm_mode=server"]
        big_batch = load_recipe("gsm8k_llama", ["trainer.per_device_train_batch_size=12", *server])
        check_card(big_batch, model_config, card("L4"))
        fix = same_batch_overrides(big_batch.config, dict(CARDS)["L4"], model_config=model_config)
        assert fix == ["trainer.per_device_train_batch_size=8", "trainer.gradient_accumulation_steps=6"]
        assert "gsm8k_llama plans a peak of " in caplog.text and "more than this L4's 21.96 GB" in caplog.text
        assert (
            "expect CUDA out of memory once training starts. trainer.per_device_train_batch_size=8 "
            "trainer.gradient_accumulation_steps=6 fits and keeps the effective batch (48 completions per optimizer "
            "step per device) and the generation batch (48)" in caplog.text
        )
        caplog.clear()
        fp16 = ["model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true"]
        check_card(load_recipe("gsm8k_llama", fp16), model_config, card("T4", (7, 5)))
        assert (
            "gsm8k_llama plans a peak of 19.53 GB of GPU memory, more than this T4's 14.74 GB: expect CUDA out of "
            "memory once training starts. No batch fits: the resident part alone (weights, adapter, optimizer "
            "states: " in caplog.text  # 16 GiB of weights: no generation batch is to blame
        )
        assert "use a 4-bit recipe (model.quantization=4bit) or a larger GPU" in caplog.text


def test_bfloat16_on_a_gpu_without_it_is_refused_with_the_float16_overrides():
    from recipes.planner.on_card import check_card
    from recipes.planner.shapes import config_for

    model_config = config_for("Qwen/Qwen2.5-1.5B-Instruct")
    with pytest.raises(RecipeError) as refused:
        check_card(load_recipe("gsm8k_qwen_small"), model_config, card("T4", (7, 5)))
    assert str(refused.value) == (
        "gsm8k_qwen_small: model.dtype=bfloat16 and trainer.bf16=true ask for bfloat16, which this T4 (compute "
        "capability 7.5) does not have. Run it with model.dtype=float16 trainer.bf16=false trainer.fp16=true, or "
        "on an Ampere or newer GPU (A100, L4, A10, RTX 30xx or 40xx)."
    )
    with pytest.raises(
        RecipeError, match=r"gsm8k_qwen_small: trainer.bf16=true asks for bfloat16, which this T4"
    ):
        check_card(load_recipe("gsm8k_qwen_small", ["model.dtype=float16"]), model_config, card("T4", (7, 5)))
    fp16 = ["model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true"]
    check_card(load_recipe("gsm8k_qwen_small", fp16), model_config, card("T4", (7, 5)))  # the fix runs
    check_card(
        load_recipe("gsm8k_qwen_small"), model_config, card("A100-40GB", (8, 0))
    )  # Ampere has bfloat16


def test_a_colocated_share_at_either_end_of_the_range_is_accepted_and_a_card_too_small_says_why():
    from recipes.planner.on_card import check_vllm_share
    from recipes.planner.shapes import config_for

    model_config = config_for("Qwen/Qwen2.5-7B-Instruct")

    def recipe(*overrides):
        return load_recipe("gsm8k_qwen", ["trainer.use_vllm=true", *overrides])

    low, high = plan_memory(recipe().config, model_config=model_config).vllm_share_range(80 * GIB)
    for share in (low, high):
        check_vllm_share(recipe(f"trainer.vllm_gpu_memory_utilization={share}"), model_config, 80 * GIB)
    card = 146 * GIB // 4  # 36.5 GiB: the one share that fits is both the smallest and the largest
    assert plan_memory(recipe().config, model_config=model_config).vllm_share_range(card) == (0.44, 0.44)
    check_vllm_share(recipe("trainer.vllm_gpu_memory_utilization=0.44"), model_config, card)
    with pytest.raises(RecipeError) as refused:
        check_vllm_share(recipe(), model_config, 16 * GIB)
    assert (
        "cannot fit this 16 GB GPU: vLLM needs a share of at least 1 for its weights and KV cache, and training "
        "leaves at most 0. Use a smaller trainer.per_device_train_batch_size" in str(refused.value)
    )
    # A vLLM server runs on its own GPUs: the training GPU's share is not its.
    check_vllm_share(
        recipe("trainer.vllm_mode=server", "trainer.vllm_gpu_memory_utilization=0.99"), model_config, 80 * GIB
    )


def test_a_plan_the_planner_cannot_model_starts_without_a_word_from_the_card_check(caplog):
    from recipes.planner.on_card import check_card
    from recipes.planner.shapes import config_for

    with caplog.at_level("WARNING", logger="recipes.planner.on_card"):
        fp16 = ["model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true"]
        check_card(
            load_recipe("gsm8k_llama", ["trainer.optim=adafactor", *fp16]),
            config_for("meta-llama/Llama-3.1-8B-Instruct"),
            card("T4", (7, 5)),
        )  # --plan says what it cannot model; the run goes on
    assert caplog.text == ""
