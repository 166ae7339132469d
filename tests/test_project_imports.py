"""The generic top-level names (recipes, rewards, callbacks, stats) must resolve to this repository."""

import importlib
from pathlib import Path

import pytest
from conftest import REPO


@pytest.mark.parametrize("name", ["common", "recipes", "rewards", "callbacks", "stats", "recipes.run"])
def test_packages_come_from_this_repository(name):
    module = importlib.import_module(name)
    assert REPO in Path(module.__file__).resolve().parents
