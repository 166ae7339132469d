"""Hub downloads that fail for a fixable reason end in one error naming the recipe key and the fix.

transformers, datasets and huggingface_hub run for real against a local server standing in for the Hub
(``HF_ENDPOINT``), answering as the Hub does for a gated repo, a missing repo and a missing revision.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO

# The Hub's answers, chosen by a word in the requested path; huggingface_hub reads X-Error-Code.
ANSWERS = {
    "gated-org": (401, "GatedRepo", "Access to model gated-org/model is restricted."),
    "no-such-branch": (404, "RevisionNotFound", "Invalid rev id: no-such-branch"),
    "no-such-org": (404, "RepoNotFound", "Repository not found"),
}

SCRIPT = """
import sys
from common.errors import UserError
from recipes.model import load_config, load_tokenizer
from recipes.tasks.sources import read_raw

def model(name, revision=None):
    return {"name_or_path": name, "revision": revision, "trust_remote_code": False}

calls = {
    "gated config": lambda: load_config(model("gated-org/model")),
    "missing tokenizer": lambda: load_tokenizer(model("no-such-org/model")),
    "missing revision": lambda: load_config(model("some-org/model", "no-such-branch")),
    "missing dataset": lambda: read_raw("no-such-org/data", "test"),
}
for name, call in calls.items():
    try:
        call()
        print(name, "=> loaded")
    except UserError as e:
        print(name, "=>", type(e).__name__, e)
"""


def python(args: list[str], env: dict) -> subprocess.CompletedProcess:
    """The project's Python on ``args`` in a fresh process (Hub settings are read once, at import)."""
    return subprocess.run(
        [sys.executable, *args], check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )


class FakeHub(BaseHTTPRequestHandler):
    def answer(self, body: bool) -> None:
        status, code, message = next(
            (answer for word, answer in ANSWERS.items() if word in self.path), ANSWERS["no-such-org"]
        )
        payload = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def do_HEAD(self):
        self.answer(body=False)

    def do_GET(self):
        self.answer(body=True)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hub_messages(tmp_path_factory) -> dict[str, str]:
    """What each failing load said, run in a fresh process pointed at the fake Hub with an empty cache."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = tmp_path_factory.mktemp("hf_home")
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_TOKEN": "hf_NotARealTokenForTheFakeHub",
    }
    try:
        done = python(["-c", SCRIPT], env)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.partition(" => ") for line in done.stdout.splitlines() if " => " in line]
    return {name: said for name, _, said in lines}


def test_gated_model_names_key_license_and_login(hub_messages):
    said = hub_messages["gated config"]
    assert said.startswith("HubError model.name_or_path: gated-org/model is gated on the Hugging Face Hub")
    assert "https://huggingface.co/gated-org/model" in said and "hf auth login" in said
    assert "hf_NotARealToken" not in said


def test_missing_repo_and_revision_name_their_keys(hub_messages):
    assert hub_messages["missing tokenizer"].startswith(
        "HubError model.name_or_path: no-such-org/model is not on the Hugging Face Hub, or is private."
    )
    assert hub_messages["missing revision"].startswith(
        "HubError model.revision: some-org/model has no such revision on the Hugging Face Hub."
    )


def test_missing_dataset_names_data_source(hub_messages):
    said = hub_messages["missing dataset"]
    assert said.startswith("HubError data.source: ") and "no-such-org/data" in said
    assert "hf auth login" in said


def test_offline_without_cache_says_so_in_one_line(tmp_path):
    """A command line, offline with an empty cache: exit 2 and one error naming the key, no traceback."""
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = python(
        ["recipes/evaluate.py", "gsm8k_tiny", "data.source=openai/gsm8k", "data.config=main"]
        + ["--out", str(tmp_path / "base.jsonl"), "--samples", "1"],
        env,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert (
        "error: data.source: HF_HUB_OFFLINE is set, and openai/gsm8k (dataset) is not in the local cache "
        f"({tmp_path / 'hub'})" in done.stderr
    )
    assert not (tmp_path / "base.jsonl").exists()


def test_a_model_path_that_is_no_folder_is_named_not_a_traceback(tmp_path):
    """transformers takes a path it cannot find for a Hub id and raises HFValidationError: a typo in a folder
    name ended the run in a traceback about repo id formats."""
    from common.errors import UserError
    from recipes.model import load_config

    missing = tmp_path / "no-such-model"
    for name in (str(missing), "./no-such-model"):
        with pytest.raises(
            UserError, match=rf"^model.name_or_path: {re.escape(name)} is not a folder on this machine"
        ):
            load_config({"name_or_path": name, "revision": None, "trust_remote_code": False})


UNREACHABLE_SCRIPT = """
import httpx2
from common.errors import UserError
from recipes.model import load_config, load_model, load_tokenizer
from recipes.planner.shapes import load_model_config
from recipes.tasks.sources import read_raw

attempts = []  # every request that reached the network layer, whichever library made it
send = httpx2.HTTPTransport.handle_request
httpx2.HTTPTransport.handle_request = lambda self, request: attempts.append(request.url) or send(self, request)
model = {"name_or_path": "some-org/model", "revision": None, "trust_remote_code": False, "dtype": "float32",
         "attn_implementation": "sdpa", "quantization": "none"}
cached = {**model, "name_or_path": "some-org/cached"}  # in the cache: loads as under HF_HUB_OFFLINE=1
for name, call in [("config", load_config), ("tokenizer", load_tokenizer), ("weights", load_model),
                   ("plan", load_model_config), ("dataset", lambda model: read_raw("some-org/data", "test")),
                   ("cached", lambda model: (load_config(cached), load_tokenizer(cached), load_model(cached)))]:
    try:
        call(model)
        print(name, "=> loaded")
    except UserError as e:
        print(name, "=>", type(e).__name__, e)
print("attempts =>", len(attempts), *attempts)
"""


def test_an_unreachable_hub_fails_at_once_naming_the_model_and_the_fixes(tmp_path, tiny_model_dir):
    """HF_ENDPOINT on a port nothing listens on: one request, not huggingface_hub's six per file with backoff (about
    25 s each), then the message for every load: run.py's, evaluate.py's and --plan's, the model's and the data's.
    A model in the cache still loads."""
    snapshot = tmp_path / "hub" / "models--some-org--cached" / "snapshots" / ("0" * 40)
    shutil.copytree(tiny_model_dir, snapshot)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0" * 40)
    # A port held bound and not listening, so connecting to it is refused. A port freed again (free_port) could be
    # taken meanwhile by another worker's server or a gloo connection, and the "Hub" would answer.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{held.getsockname()[1]}"
        env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "0"}
        done = python(["-c", UNREACHABLE_SCRIPT], env)
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.partition(" => ")[::2] for line in done.stdout.splitlines() if " => " in line)
    assert said["attempts"] == f"1 {endpoint}"  # the one probe, no retries, and no file requested after it
    for what in ("config", "tokenizer", "weights"):
        assert said[what].startswith(
            f"HubError model.name_or_path: the Hugging Face Hub could not be reached ({endpoint}: "
        )
        assert f"and some-org/model ({what}) is not in the local cache ({tmp_path / 'hub'})" in said[what]
    for fix in ("Connect this machine to the network", "hf auth login", "hf download some-org/model",
                "HF_HUB_OFFLINE=1", "set model.name_or_path to a local folder"):  # fmt: skip
        assert fix in said["config"]
    assert said["plan"].startswith("RecipeError " + said["config"].removeprefix("HubError "))
    assert "The planner also works offline for meta-llama/Llama-3.1-8B-Instruct" in said["plan"]
    assert said["dataset"].startswith(
        f"HubError data.source: the Hugging Face Hub could not be reached ({endpoint}: "
    )
    assert "`hf download some-org/data --repo-type dataset`" in said["dataset"]
    assert said["cached"] == "loaded"


def test_a_local_folder_never_asks_the_hub(monkeypatch):
    from common import hub

    monkeypatch.setattr(hub, "hub_unreachable", lambda: pytest.fail("a local folder needs no network"))
    with hub.offline_if_unreachable(str(REPO)):
        pass


def test_the_hub_is_asked_once_without_retries_within_its_metadata_timeout(monkeypatch):
    """A network that drops packets: the probe waits huggingface_hub's HF_HUB_ETAG_TIMEOUT once, where a download
    would wait its 60 s retry timeout six times per file."""
    import httpx2
    from huggingface_hub import constants

    from common import hub

    asked = []

    class DroppingSession:
        def head(self, url, **settings):
            asked.append((url, settings))
            raise httpx2.ConnectTimeout("timed out")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.utils.get_session", DroppingSession)
    monkeypatch.setattr(hub, "_probe", {})
    assert hub.hub_unreachable() == hub.hub_unreachable() == f"{constants.ENDPOINT}: timed out"
    assert asked == [
        (constants.ENDPOINT, {"timeout": constants.HF_HUB_ETAG_TIMEOUT, "follow_redirects": False})
    ]


def test_an_unreachable_hub_is_asked_again_after_a_while_and_a_reachable_one_never(monkeypatch):
    """A notebook's kernel outlives a network outage: a failed probe remembered for the process made every later
    load in it read the cache alone."""
    from huggingface_hub import constants

    from common import hub

    clock, answers, asked = [1000.0], ["down", "up"], []

    class Session:
        def head(self, url, **settings):
            import httpx2

            asked.append(url)
            if answers.pop(0) == "down":
                raise httpx2.ConnectError("refused")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.utils.get_session", Session)
    monkeypatch.setattr(hub, "_probe", {})
    monkeypatch.setattr(hub.time, "monotonic", lambda: clock[0])
    assert hub.hub_unreachable() == f"{constants.ENDPOINT}: refused"
    clock[0] += hub._RECHECK_S - 1
    assert hub.hub_unreachable() == f"{constants.ENDPOINT}: refused" and len(asked) == 1
    clock[0] += 2
    assert hub.hub_unreachable() is None and len(asked) == 2  # the network is back
    clock[0] += 10 * hub._RECHECK_S
    assert hub.hub_unreachable() is None and len(asked) == 2  # an answer holds for the process
