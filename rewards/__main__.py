"""List the registered rewards, their parameters (with defaults) and one-line docs.

python -m rewards
"""

from __future__ import annotations

import argparse
import inspect
import sys

from common.specs import parameters
from rewards import REWARDS
from rewards._specs import TRL_ARGUMENTS

# Parameters a recipe fills in for every reward that takes them (recipes.recipe.reward_defaults): listed as
# required or None here, a user would repeat them in the spec, where a different value goes unchecked.
FILLED_BY_RECIPE = {"max_completion_length": "trainer.max_completion_length"}


def _parameter(key: str, default) -> str:
    if key in FILLED_BY_RECIPE:
        return f"{key} (in a recipe: its {FILLED_BY_RECIPE[key]})"
    return f"{key} (required)" if default is inspect.Parameter.empty else f"{key}={default!r}"


def describe(name: str, reward: type) -> str:
    """Two lines for one reward: ``name  first docstring line`` and its parameters with defaults.

    >>> print(describe("format", REWARDS["format"]))
    format  Pay up to max_reward for the answer format of style (tags, hash or boxed), in four parts.
        style='tags', max_reward=1.5
    >>> print(describe("soft_overlong", REWARDS["soft_overlong"]).splitlines()[1])
        max_completion_length (in a recipe: its trainer.max_completion_length), soft_punish_cache (required)
    """
    doc = inspect.getdoc(reward).splitlines()[0].replace("``", "")
    params = ", ".join(_parameter(k, p.default) for k, p in parameters(reward, TRL_ARGUMENTS).items())
    return f"{name}  {doc}\n    {params or '(no parameters)'}"


def main(argv: list[str] | None = None) -> int:
    """Print every reward and its parameters; returns the exit code."""
    argparse.ArgumentParser(
        prog="python -m rewards", description="List the registered rewards, their parameters and defaults."
    ).parse_args(argv)
    print("Rewards for a recipe's `rewards:` list, as {name: <name>, weight: <w>, <parameter>: <value>}:\n")
    print("\n\n".join(describe(name, reward) for name, reward in sorted(REWARDS.items())))
    print(
        "\nPlug-ins: {path: 'package.module:function' (or 'file.py:function'), weight: <w>, <parameter>: <value>}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
