"""One spec builder for rewards and callbacks: plug-ins by path for both, every error at once, one error type."""

from __future__ import annotations

import pytest
from _plugins import StepCounter

from callbacks import CallbackSpecError, build_callbacks
from common.errors import UserError
from rewards import RewardSpecError, build_rewards


def test_callback_plugins_by_path_class_or_factory():
    counter, made = build_callbacks(
        [{"path": "_plugins:StepCounter", "start": 2}, {"path": "_plugins:make_counter"}]
    )
    assert isinstance(counter, StepCounter) and counter.steps == 2
    assert isinstance(made, StepCounter) and made.steps == 5


def test_callback_errors_are_all_reported_and_name_the_entry():
    with pytest.raises(CallbackSpecError) as error:
        build_callbacks(
            [
                {"path": "_plugins:StepCountr"},
                {"name": "reward_table", "every_steps": 2},
                {"path": "_plugins:not_a_callback"},
                {"path": "_plugins:StepCounter", "strat": 1},
            ]
        )
    lines = str(error.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("callbacks[0] (_plugins:StepCountr): module '_plugins' has no 'StepCountr'")
    assert "Did you mean 'StepCounter'?" in lines[0]
    assert lines[1].startswith(
        "callbacks[2] (_plugins:not_a_callback): built a int, not a transformers.TrainerCallback"
    )
    assert "unknown parameter 'strat'. Did you mean 'start'?" in lines[2]


def test_plugin_that_raises_on_import_is_a_spec_error(tmp_path, monkeypatch):
    (tmp_path / "buggy_plugin.py").write_text('raise RuntimeError("plug-in bug at import")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        RewardSpecError, match=r"importing module 'buggy_plugin' raised RuntimeError: plug-in bug"
    ):
        build_rewards([{"path": "buggy_plugin:anything"}])


def test_plugin_correctness_reward_is_checked_by_what_it_declares():
    # A plug-in correctness reward paying 10 x 0.5 = 5; a declared shaping reward paying 3 x 2 = 6 is refused.
    with pytest.raises(
        RewardSpecError, match=r"rewards\[1\] \(shaping\): can pay 6 .* pays 5 \(rewards\[0\] bonus_correct"
    ):
        build_rewards(
            [{"path": "_plugins:bonus_correct", "weight": 0.5}, {"path": "_plugins:shaping", "weight": 2.0}]
        )
    # The built-in format reward too: at most 1.5 x 4 = 6 against the plug-in's 5.
    with pytest.raises(RewardSpecError, match=r"rewards\[1\] \(format\): can pay 6 "):
        build_rewards([{"path": "_plugins:bonus_correct", "weight": 0.5}, {"name": "format", "weight": 4.0}])
    funcs, weights = build_rewards([{"path": "_plugins:bonus_correct"}, {"path": "_plugins:shaping"}])
    assert len(funcs) == 2
    assert weights == [1.0, 1.0]


@pytest.mark.parametrize(
    "error_type",
    [
        "recipes.recipe:RecipeError",
        "recipes.data:DataError",
        "recipes.evaluation.generation:EvaluationError",
        "recipes.colab:ColabError",
        "callbacks.errors:CheckpointError",
        "callbacks:CallbackSpecError",
        "rewards:RewardSpecError",
        "stats.records:InputError",
    ],
)
def test_every_user_error_type_is_a_user_error(error_type):
    import importlib

    module, name = error_type.split(":")
    assert issubclass(getattr(importlib.import_module(module), name), UserError)
