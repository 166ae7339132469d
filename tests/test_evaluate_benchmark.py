"""Smoke test of benchmarks/evaluate_throughput.py on the tiny model (tiny sizes, no timing assertions)."""

from __future__ import annotations

import pytest

SMALL = ["gsm8k_tiny", "--questions", "2", "--samples", "2", "--max-new-tokens", "4", "--batch-sizes", "1,4",
         "--engines", "hf"]  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    # Imported as the package's module: loaded from its file path, the script's own sys.path[0] fix replaced this
    # process's first path entry (tests/), and later tests could no longer import their plug-ins (_plugins).
    from benchmarks import evaluate_throughput

    return evaluate_throughput


def test_benchmark_times_every_batch_size_on_the_same_work(bench):
    results = bench.run(bench.build_parser().parse_intermixed_args(SMALL))
    assert [(r["engine"], r["batch_size"], r["completions"]) for r in results] == [("hf", 1, 4), ("hf", 4, 4)]
    for r in results:
        assert r["seconds"] > 0 and 4 <= r["tokens"] <= 16  # 4 completions of 1 to 4 tokens each


def test_table_reports_rates_and_speed_up_against_the_first_row(bench):
    table = bench.format_table(
        [{"engine": "hf", "batch_size": 1, "completions": 8, "seconds": 4.0, "tokens": 100},
         {"engine": "hf", "batch_size": 8, "completions": 8, "seconds": 0.5, "tokens": 120}]
    )  # fmt: skip
    header, one, batched = (line.split() for line in table.splitlines())
    assert header == ["engine", "batch", "samples", "seconds", "samples/s", "tokens/s", "speed-up"]
    assert one == ["hf", "1", "8", "4.00", "2.00", "25.0", "1.0x"]
    assert batched == ["hf", "8", "8", "0.50", "16.00", "240.0", "8.0x"]


def test_the_command_prints_the_table(bench, capsys):
    assert bench.main(SMALL) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("engine") and [line.split()[:3] for line in lines[1:]] == [
        ["hf", "1", "4"],
        ["hf", "4", "4"],
    ]


def test_bad_batch_sizes_are_refused(bench, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--batch-sizes", "0,2"])
    assert exit_info.value.code == 2
    assert "expected comma-separated positive integers" in capsys.readouterr().err


def test_an_adapter_is_measured_as_evaluate_generates_it(bench, tiny_model_dir, tmp_path, monkeypatch):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=4)).save_pretrained(
        tmp_path
    )
    loaded = []

    def spy(engine, model, adapter, decoding, *, seed, merged, compiled):
        loaded.append((adapter, merged, compiled))
        return real(engine, model, adapter, decoding, seed=seed, merged=merged, compiled=compiled)

    real = bench.load_generator
    monkeypatch.setattr(bench, "load_generator", spy)
    compiled = ["model.compiled_generation=true", "--batch-sizes", "4"]  # one batch size: one compile
    for override, batch_sizes in (([], 2), (["lora.merged_generation=false"], 2), (compiled, 1)):
        results = bench.run(
            bench.build_parser().parse_intermixed_args([*SMALL, "--adapter", str(tmp_path), *override])
        )
        assert [r["completions"] for r in results] == [4] * batch_sizes
    # auto merges on a CPU; false keeps peft's branch; compiled decoding only when asked
    assert loaded == [(tmp_path, True, False), (tmp_path, False, False), (tmp_path, True, True)]
