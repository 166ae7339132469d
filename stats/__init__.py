"""Statistics over evaluation records and training logs; reads files only (no torch, no transformers)."""
