"""The reward registry: build_rewards, its errors, plug-ins, pickling, names TRL logs, the CLI, doctests.

python -m pytest tests/test_rewards_registry.py -q
"""

import doctest
import functools
import importlib
import pickle
from pathlib import Path

import pytest
from _rewards_helpers import ConstantReward, chat, length_bonus

import rewards
from rewards import REWARDS, RewardSpecError, build_rewards, reward_name
from rewards.__main__ import main as list_rewards
from rewards.trl_builtins import Repetition, SoftOverlong

REPO = Path(__file__).resolve().parents[1]
ALL_SPECS = [
    {
        "name": "correctness",
        "weight": 1.0,
        "min_tokens": 40,
        "full_credit_tokens": 80,
        "gate_on": "reasoning",
    },
    {"name": "format", "weight": 0.5, "style": "hash", "max_reward": 1.0},
    {"name": "soft_overlong", "weight": 0.25, "soft_punish_cache": 16},
    {"name": "repetition", "weight": 0.1, "ngram_size": 2},
]


def _call(func, texts, lengths, gold="18"):
    return func(prompts=["q"] * len(texts), completions=texts, completion_ids=[[i % 7 for i in range(n)] for n in lengths],
                gold=[gold] * len(texts))  # fmt: skip


def test_the_package_is_this_repository():
    assert Path(rewards.__file__).resolve().is_relative_to(REPO / "rewards")


def test_build_rewards_binds_parameters_names_and_weights():
    funcs, weights = build_rewards(ALL_SPECS, defaults={"max_completion_length": 64})
    assert [reward_name(f) for f in funcs] == ["correctness", "format", "soft_overlong", "repetition"]
    assert weights == [1.0, 0.5, 0.25, 0.1]
    correctness, fmt, _, _ = funcs
    assert (correctness.min_tokens, correctness.full_credit_tokens, correctness.gate_on) == (
        40,
        80,
        "reasoning",
    )
    assert (correctness.max_completion_length, fmt.style, fmt.max_reward) == (64, "hash", 1.0)
    assert _call(funcs[2], ["a", "b"], [40, 56]) == [0.0, -0.5]  # TRL's ramp: 48 + 8 of 16 cache tokens
    assert build_rewards([{"name": "format"}])[1] == [1.0]  # weight defaults to 1.0


def test_defaults_fill_only_what_specs_leave_out():
    spec = {"name": "correctness", "max_completion_length": 64}
    (func,), _ = build_rewards([spec], defaults={"max_completion_length": 512, "unrelated": 1})
    assert func.max_completion_length == 64
    (func,), _ = build_rewards([{"name": "format"}], defaults={"max_completion_length": 512})
    assert not hasattr(func, "max_completion_length")


def test_registry_names_are_the_logged_names():
    for name, cls in REWARDS.items():
        instance = cls(max_completion_length=8, soft_punish_cache=2) if cls is SoftOverlong else cls()
        assert instance.__name__ == name == reward_name(instance)
        assert ">>>" in cls.__doc__, f"{name} needs a runnable example"


@pytest.mark.slow  # importing trl.trainer pulls in transformers and torch (~8 s alone)
def test_names_match_trls_get_callable_name():
    from trl.trainer.utils import get_callable_name

    funcs, _ = build_rewards([*ALL_SPECS, {"path": "_rewards_helpers:length_bonus", "scale": 2.0}],
                             defaults={"max_completion_length": 64})  # fmt: skip
    assert [get_callable_name(f) for f in funcs] == [reward_name(f) for f in funcs]
    assert [get_callable_name(f) for f in funcs][-1] == "length_bonus"


def test_parameterised_rewards_pickle_and_behave_the_same():
    funcs, _ = build_rewards(
        [*ALL_SPECS, {"path": "_rewards_helpers:length_bonus", "scale": 0.5}],
        defaults={"max_completion_length": 64},
    )
    texts = ["9 * 2 = 18 so\n#### 18", chat("r" * 300 + "\n#### 18"), "#### 17"]
    for func in funcs:
        clone = pickle.loads(pickle.dumps(func))
        assert reward_name(clone) == reward_name(func)
        assert _call(clone, texts, [30, 90, 70]) == _call(func, texts, [30, 90, 70])


def test_plugins_by_path():
    (func, cls_func), weights = build_rewards(
        [
            {"path": "_rewards_helpers:length_bonus", "weight": 0.5, "scale": 2.0},
            {"path": "_rewards_helpers:ConstantReward", "value": -1.0},
        ]
    )
    assert isinstance(func, functools.partial) and func.func is length_bonus
    assert _call(func, ["a", "b"], [3, 30]) == [6.0, 20.0]
    assert isinstance(cls_func, ConstantReward) and _call(cls_func, ["a"], [1]) == [-1.0]
    assert weights == [0.5, 1.0]
    (plain,), _ = build_rewards([{"path": "_rewards_helpers:length_bonus"}])
    assert plain is length_bonus


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ({"name": "correctness"}, "rewards must be a non-empty list"),
        ([], "rewards must be a non-empty list"),
        (["correctness"], r"rewards\[0\]: expected a mapping like \{name: correctness, weight: 1.0\}, got 'correctness'"),
        ([{"weight": 1.0}], r"rewards\[0\]: give exactly one of `name` .* or `path`"),
        ([{"name": "format", "path": "a.b:c"}], r"rewards\[0\] \(format\): give exactly one of"),
        ([{"name": "corectness"}], (r"unknown reward 'corectness'. Did you mean 'correctness'\? "
                                   r"Available: correctness, format, repetition, soft_overlong\.")),
        ([{"name": "correctness", "min_token": 3}], (r"rewards\[0\] \(correctness\): unknown parameter 'min_token'. "
                                                    r"Did you mean 'min_tokens'\? Parameters: reward, full_credit_tokens")),
        ([{"name": "format", "wieght": 2}], r"unknown parameter 'wieght'. Did you mean 'weight'\?"),
        ([{"name": "format", "weight": "1"}], r"rewards\[0\] \(format\): weight must be a finite number, got '1'"),
        ([{"name": "format", "weight": float("inf")}], "weight must be a finite number"),
        ([{"name": "format", "style": "tag"}], r"rewards\[0\] \(format\): Unknown format style 'tag'. Did you mean 'tags'"),
        ([{"name": "correctness", "min_tokens": 200}], r"min_tokens \(200\) must be <= full_credit_tokens \(100\)"),
        ([{"name": "soft_overlong"}], r"missing required parameter\(s\): max_completion_length, soft_punish_cache"),
        ([{"name": "repetition", "max_penalty": 1}], "max_penalty must be a number <= 0, got 1"),
        ([{"name": "format"}, {"name": "format", "style": "hash"}],
         r"rewards\[1\] \(format\): repeats rewards\[0\]: .* Keep one entry with the parameters you want\.$"),
        ([{"name": "format", "max_reward": 5.0}, {"name": "correctness"}],
         r"rewards\[0\] \(format\): can pay 5 .* a correct answer pays 5 .*must earn less"),
        ([{"name": "format", "weight": 4.0}, {"name": "correctness", "weight": 1.0}], "can pay 6 "),
        ([{"path": "nowhere"}], r"rewards\[0\] \(nowhere\): path must look like 'package.module:function'"),
        ([{"path": "no_such_pkg.mod:f"}], r"cannot import module 'no_such_pkg.mod' \(No module named 'no_such_pkg'\)"),
        ([{"path": "_rewards_helpers:lenght_bonus"}], r"has no 'lenght_bonus'. Did you mean 'length_bonus'\?"),
        ([{"path": "_rewards_helpers:NOT_CALLABLE"}], r"'NOT_CALLABLE' in '_rewards_helpers' is not callable \(a int: 3\)"),
        ([{"path": "_rewards_helpers:length_bonus", "scael": 2}], (r"unknown parameter 'scael'. Did you mean 'scale'\? "
                                                                  r"Parameters: scale, cap\.")),
        ([{"path": "_rewards_helpers:unpicklable_lambda"}], r"not picklable .*\(no lambda or closure\)"),
        ([{"path": "_rewards_helpers:unpicklable_closure"}], r"not picklable .*\(no lambda or closure\)"),
    ],
)  # fmt: skip
def test_spec_errors(specs, message):
    with pytest.raises(RewardSpecError, match=message):
        build_rewards(specs)


def test_a_plugin_package_in_the_working_folder_is_named_with_the_fix(tmp_path, monkeypatch):
    """sub/r.py (no __init__.py) as sub.r:fn said only "No module named 'sub'"."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.py").write_text(
        "def fn(completions, **kwargs):\n    return [0.0 for _ in completions]\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        RewardSpecError, match=r"sub is in the working folder, .* write the file's path \(sub/r\.py:"
    ):
        build_rewards([{"path": "sub.r:fn"}])
    funcs, _ = build_rewards([{"path": "sub/r.py:fn"}])
    assert funcs[0](completions=[[{"role": "assistant", "content": "x"}]]) == [0.0]


def test_two_plugins_of_one_name_are_refused_with_a_way_out(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"r_{folder}.py").write_text(
            "def fn(completions, **kwargs):\n    return [0.0] * len(completions)\n"
        )
    specs = [{"path": f"{tmp_path}/a/r_a.py:fn"}, {"path": f"{tmp_path}/b/r_b.py:fn"}]
    with pytest.raises(
        RewardSpecError,
        match=r"rewards\[1\] \(fn\): repeats rewards\[0\]: .* \(def fn_2\(\*\*kwargs\): return fn",
    ):
        build_rewards(specs)


def test_every_bad_spec_is_reported_at_once():
    with pytest.raises(RewardSpecError) as error:
        build_rewards([{"name": "corectness"}, {"name": "format"}, {"name": "format", "stlye": "hash"}])
    lines = str(error.value).splitlines()
    assert [line.split(":")[0] for line in lines] == ["rewards[0] (corectness)", "rewards[2] (format)"]
    assert isinstance(error.value, ValueError)


def test_trl_builtins_match_trl_and_need_token_ids():
    from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

    ids = [[1, 2, 3, 4], [5] * 5, [1] * 95, list(range(120))]
    texts = [chat("a"), "b", chat("c"), "d"]
    assert SoftOverlong(max_completion_length=100, soft_punish_cache=20)(
        completions=texts, completion_ids=ids
    ) == (get_soft_overlong_punishment(100, 20)(ids))
    assert Repetition(ngram_size=2)(completions=texts, completion_ids=ids) == get_repetition_penalty_reward(
        2
    )(ids)
    with pytest.raises(ValueError, match="The repetition reward needs the `completion_ids` argument"):
        Repetition()(completions=["a"])
    with pytest.raises(ValueError, match="got 1 `completion_ids` values for 2 completions"):
        SoftOverlong(max_completion_length=10, soft_punish_cache=2)(
            completions=["a", "b"], completion_ids=[[1]]
        )


def test_cli_lists_rewards_parameters_and_docs(capsys):
    assert list_rewards([]) == 0
    out = capsys.readouterr().out
    for name, cls in REWARDS.items():
        assert f"{name}  {cls.__doc__.strip().splitlines()[0].replace('``', '')}" in out
    assert "reward=5.0, full_credit_tokens=100, min_tokens=50, gate_on='completion'" in out
    # A recipe fills max_completion_length from its trainer: listed as required, users would repeat it.
    assert (
        "max_completion_length (in a recipe: its trainer.max_completion_length), soft_punish_cache (required)"
        in out
    )
    assert "style='tags', max_reward=1.5" in out
    with pytest.raises(SystemExit) as exited:
        list_rewards(["--bogus"])
    assert exited.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        list_rewards(["--help"])
    assert exited.value.code == 0 and "List the registered rewards" in capsys.readouterr().out


@pytest.mark.parametrize(
    "module",
    ["rewards", "rewards.answers", "rewards.correctness", "rewards.format", "rewards.trl_builtins", "rewards._args",
     "rewards._parsing", "rewards._precedence", "rewards._symbolic", "rewards._layout", "rewards.__main__"],
)  # fmt: skip
def test_doctests(module):
    """The same examples `python -m pytest --doctest-modules rewards` runs, in the default test run."""
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "wrong_signature",
            "cannot take the arguments TRL passes (missing a required argument: 'completion')",
        ),
        (
            "crashes",
            "raised AttributeError: 'list' object has no attribute 'strip' when called on one completion",
        ),
        ("returns_a_number", "returned 1.0 for one completion; a reward returns a list with one float"),
        ("returns_inf", "returned inf for one completion; a reward must be finite"),
        (
            "scores_the_first_only",
            "returned [1.0] for two completions; a reward returns one float (or None) per",
        ),
    ],
)
def test_a_plugin_that_would_fail_at_step_1_is_refused_at_load_naming_its_file(function, message):
    path = f"{REPO / 'tests' / '_plugins.py'}:{function}"
    with pytest.raises(RewardSpecError) as raised:
        build_rewards([{"path": path}])
    assert str(raised.value).startswith(f"rewards[0] ({path}): {message}")


def test_numpy_numbers_and_bools_are_rewards_as_trl_reads_them():
    funcs, _ = build_rewards([{"path": f"{REPO / 'tests' / '_plugins.py'}:numpy_scores"}])
    assert [float(v) for v in funcs[0](completions=[[], []])] == [1.0, 0.5]


def test_a_plugin_in_the_working_folder_says_how_to_name_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cwd_rewards.py").write_text(
        "def brevity(completions, **kwargs):\n    return [0.0] * len(completions)\n"
    )
    with pytest.raises(
        RewardSpecError, match=r"cwd_rewards is in the working folder, .* \(cwd_rewards\.py:\.\.\.\)"
    ):
        build_rewards([{"path": "cwd_rewards:brevity"}])
    with pytest.raises(
        RewardSpecError, match=rf"no file {tmp_path}/nope\.py: a plug-in file's path is relative to"
    ):
        build_rewards([{"path": "nope.py:brevity"}])
    assert build_rewards([{"path": "cwd_rewards.py:brevity"}])[0][0].__name__ == "brevity"


def test_a_plugin_file_that_raises_on_import_is_one_line_naming_it(tmp_path):
    (tmp_path / "broken_rewards.py").write_text("import numpy\nraise RuntimeError('API key missing')\n")
    with pytest.raises(
        RewardSpecError, match=r"importing module '\S+broken_rewards.py' raised RuntimeError: API key"
    ):
        build_rewards([{"path": f"{tmp_path / 'broken_rewards.py'}:score"}])


def test_a_plugin_by_file_path_is_built_probed_and_picklable(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "def mentions_gold(completions, gold, **kwargs):\n"
        "    return [float(g in c[0]['content']) for c, g in zip(completions, gold)]\n"
    )
    (func,), _ = build_rewards([{"path": f"{tmp_path / 'my_rewards.py'}:mentions_gold"}])
    assert pickle.loads(pickle.dumps(func))(completions=[[{"content": "it is 5"}]], gold=["5"]) == [1.0]
