"""Evaluation internals under ``recipes/evaluate.py``: batched generation and graded JSONL records.

generation.py   transformers generate (left-padded batches) or vLLM, seeded per request
records.py      the record schema, resumable appends, and the summary printed at the end
"""
