"""What the recipes/evaluate.py tests share: the tiny run they evaluate and a way to call the command line."""

from __future__ import annotations

import json

from recipes.evaluate import main

# 4 questions x 2 samples in batches of 3: the last batch is partly done after an interruption mid-file.
ARGS = ["gsm8k_tiny", "--questions", "4", "--samples", "2", "--max-new-tokens", "16", "--batch-size", "3"]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def timing_out_verifier(monkeypatch) -> dict:
    """math-verify comparisons in this process time out while the returned ``{"on": True}`` stays on (a busy
    machine); set it to False for a quieter one."""
    from math_verify.errors import TimeoutException

    from rewards import _symbolic

    real, busy = _symbolic._verify, {"on": True}

    def verify(gold, pred):
        if busy["on"]:
            raise TimeoutException("Timeout during comparison")
        return real(gold, pred)

    monkeypatch.setattr(_symbolic, "_verify", verify)
    return busy
