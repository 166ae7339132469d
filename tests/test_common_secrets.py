"""Credentials inside URIs are refused at load and never echoed: not in errors, logs or a saved recipe."""

from __future__ import annotations

import pytest
from _evaluate_helpers import run
from conftest import REPO

from callbacks.errors import CheckpointError
from callbacks.stores import open_store
from common.secrets import redact
from recipes.recipe import RecipeError, load_recipe

SECRET = "wJalrXUtnFEMI"


def test_redact_hides_every_userinfo_and_keeps_the_rest():
    assert redact(f"s3://AKIA:{SECRET}@bucket/runs and http://user@host:9000/x") == (
        "s3://***@bucket/runs and http://***@host:9000/x"
    )
    assert redact("/content/drive/me@home/runs s3://bucket/p") == "/content/drive/me@home/runs s3://bucket/p"


@pytest.mark.parametrize(
    "override",
    [
        f"checkpoint.uri=s3://AKIA:{SECRET}@bucket/runs",
        f"checkpoint.endpoint_url=http://minio:{SECRET}@127.0.0.1:9000",
        f"checkpoint.resume=s3://AKIA:{SECRET}@bucket/runs/checkpoint-4",
        f"data.source=https://hf_{SECRET}@example.com/train.jsonl",
        f"checkpoint.uri=s3://bucket/run?X-Amz-Signature={SECRET}",
        f"data.source=https://example.com/train.jsonl?token={SECRET}",
    ],
)
def test_a_uri_with_credentials_is_refused_at_load_and_shown_redacted(override):
    key = override.split("=")[0]
    with pytest.raises(RecipeError) as raised:
        load_recipe("gsm8k_tiny", [override])
    message = str(raised.value)
    assert SECRET not in message
    assert f"{key} carries credentials in its URI" in message and "***" in message
    assert "credentials belong in the environment (AWS_ACCESS_KEY_ID" in message


def test_a_recipe_file_with_credentials_names_the_file(tmp_path):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(
        f"base: {REPO / 'recipes' / '_base.yaml'}\ncheckpoint: {{uri: 's3://AKIA:{SECRET}@b/r'}}\n"
    )
    with pytest.raises(RecipeError, match=rf"checkpoint.uri carries credentials .* \(set in {recipe}\)") as e:
        load_recipe(str(recipe))
    assert SECRET not in str(e.value)


def test_other_errors_about_an_override_do_not_echo_its_credentials():
    with pytest.raises(RecipeError) as raised:
        load_recipe("gsm8k_tiny", [f"checkpoint.uri=s3://AKIA:{SECRET}@bucket/runs", "trainer.lr=1"])
    assert SECRET not in str(raised.value) and "Unknown key trainer.lr" in str(raised.value)
    with pytest.raises(RecipeError, match="Malformed override") as raised:
        load_recipe("gsm8k_tiny", [f"=s3://AKIA:{SECRET}@bucket"])
    assert SECRET not in str(raised.value)


def test_a_store_or_adapter_uri_with_credentials_is_refused(tmp_path, capsys):
    with pytest.raises(
        CheckpointError, match=r"checkpoint URI carries credentials .*s3://\*\*\*@bucket"
    ) as e:
        open_store(f"s3://AKIA:{SECRET}@bucket/runs")
    assert SECRET not in str(e.value)
    code, out, err = run(
        capsys, "gsm8k_tiny", "--adapter", f"s3://AKIA:{SECRET}@bucket/r", "--out", tmp_path / "x.jsonl"
    )
    assert code == 2 and "carries credentials" in err
    assert SECRET not in err + out and "Traceback" not in err


@pytest.mark.parametrize("how", ["override", "malformed override", "value", "number value", "file", "nested"])
def test_a_token_in_a_credential_key_is_refused_and_never_echoed(how, tmp_path):
    """trainer.hub_token would be saved in recipe.yaml (and uploaded with every checkpoint): refused, redacted."""
    token = f"hf_{SECRET}"
    if how == "file":
        recipe = tmp_path / "mine.yaml"
        recipe.write_text(f"base: {REPO / 'recipes' / 'gsm8k_tiny.yaml'}\ntrainer: {{hub_token: {token}}}\n")
        call = {"name_or_path": str(recipe)}
    elif how == "nested":  # a mapping value records only its own key's origin: the file is still named
        recipe = tmp_path / "mine.yaml"
        recipe.write_text(f"base: gsm8k_tiny\ntrainer: {{model_init_kwargs: {{token: {token}}}}}\n")
        with pytest.raises(RecipeError) as raised:
            load_recipe(str(recipe))
        assert SECRET not in str(raised.value)
        assert "trainer.model_init_kwargs.token holds a credential" in str(raised.value)
        assert f"(set in {recipe})" in str(raised.value)
        return
    elif how in ("value", "number value"):  # a wrong type is not echoed either
        value = int(SECRET.encode().hex(), 16) % 10**12 if how == "number value" else token
        token = str(value)
        call = {"name_or_path": "gsm8k_tiny", "values": {"trainer.hub_token": value}}
    else:
        value = (
            f"[{token}" if how == "malformed override" else token
        )  # not valid YAML: no parser error quoting it
        call = {"name_or_path": "gsm8k_tiny", "overrides": [f"trainer.hub_token={value}"]}
    with pytest.raises(RecipeError) as raised:
        load_recipe(**call)
    message = str(raised.value)
    assert SECRET not in message and token not in message
    assert "trainer.hub_token holds a credential" in message and "set HF_TOKEN in the environment" in message
    assert (
        load_recipe("gsm8k_tiny", ["trainer.max_completion_length=40"]).config["trainer"]["hub_token"] is None
    )


def test_a_misspelt_count_is_its_unknown_key_not_a_credential(tmp_path):
    """min_token: 8 (for min_tokens) was refused as "rewards[0].min_token holds a credential ... set HF_TOKEN"."""
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("base: gsm8k_tiny\nrewards:\n  - {name: correctness, min_token: 8}\n")
    with pytest.raises(
        RecipeError, match=r"unknown parameter 'min_token'\. Did you mean 'min_tokens'\?"
    ) as raised:
        load_recipe(str(recipe))
    assert "credential" not in str(raised.value)
    kwargs = load_recipe("gsm8k_tiny", ["trainer.model_init_kwargs={token: true}"]).config["trainer"]
    assert kwargs["model_init_kwargs"] == {
        "token": True
    }  # true reads the stored login: no secret in the recipe


def test_an_override_with_a_misspelt_count_is_echoed_with_its_value():
    """The echo read "rewards=[{name: correctness, min_token: ***}]": the user's own 3 hidden as a credential."""
    with pytest.raises(RecipeError) as raised:
        load_recipe("gsm8k_tiny", ["rewards=[{name: correctness, min_token: 3}]"])
    assert "override 'rewards=[{name: correctness, min_token: 3}]'" in str(raised.value)
    assert redact("x.hub_token=123456789 y.token=hf_abc") == "x.hub_token=*** y.token=***"
    for hidden in ("db.password=123456", "password: 2024", "secret=-12", "api_key=42.5", "min_token=1.5"):
        assert redact(hidden).endswith("***"), hidden
