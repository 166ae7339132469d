"""The GPU memory planner: ``python recipes/run.py RECIPE --plan`` prints what a run will need.

memory.py       the formulas: weights, optimizer, activations, generation, TRL's log-prob tiles
memory_plan.py  the plan they fill in (MemoryPlan): the parts added up to a peak, and whether it fits a card
render.py       the printed plan and the largest batch that fits a card
fit.py          a plan over a card fitted to it at the same effective batch: the overrides, or why none fits
launch_config.py  what the plan reads of an accelerate launch: optimizer offload, an unmodelled sharding
shapes.py       layers and parameter counts of a model config; configs/ holds the Hub configs of our
                recipes' models
"""
