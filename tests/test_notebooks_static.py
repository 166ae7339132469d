"""The notebooks as files: stripped of outputs, one parameters cell, an install cell, no logic of their own, a
timed markdown step before every code cell, no credentials, and a README that links and explains each one."""

from __future__ import annotations

import ast
import itertools
import re

import nbformat
import pytest
from _notebooks_helpers import NAMES, NOTEBOOKS, REPO_URL, code_cells, read
from papermill.translators import PythonTranslator

from recipes.colab import SECRETS

PARAMETERS = {
    "1_baseline": {
        "recipe",
        "overrides",
        "questions",
        "samples",
        "max_new_tokens",
        "results_dir",
        "baseline_file",
    },
    "2_train": {"recipe", "overrides", "checkpoint_uri", "endpoint_url", "output_dir"},
    "3_evaluate_checkpoint": {
        *("recipe", "overrides", "checkpoint", "endpoint_url", "questions", "samples", "max_new_tokens"),
        *("results_dir", "tuned_file"),
    },
    "4_compare": {"results_dir", "baseline_file", "tuned_file", "training_run", "endpoint_url"},
}
MAX_CODE_LINES = 12
# Logic belongs in the packages: no functions, classes, loops, comprehensions or exception handling in a cell.
LOGIC = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.For, ast.AsyncFor, ast.While,
         ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Try)  # fmt: skip
TYPED_CREDENTIAL = re.compile(
    r"AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|HF_TOKEN|AKIA[0-9A-Z]{12}|hf_[A-Za-z0-9]{20}"
)
DURATION = re.compile(r"\b(instant|seconds?|minutes?|hours?|\d+ h)\b", re.IGNORECASE)


def code_lines(cell) -> list[str]:
    return [line for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_folder_holds_the_four_notebooks_and_nothing_generated():
    # Hidden entries (.ipynb_checkpoints of a local Jupyter) are not part of the repository.
    files = sorted(p.name for p in NOTEBOOKS.iterdir() if not p.name.startswith("."))
    assert files == sorted([f"{n}.ipynb" for n in NAMES] + ["README.md"])


@pytest.mark.parametrize("name", NAMES)
def test_valid_and_stripped_of_outputs(name):
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert "papermill" not in nb.metadata
    for cell in code_cells(nb):
        assert cell.outputs == [] and cell.execution_count is None, cell.source
        assert set(cell.metadata) <= {"tags"}, cell.metadata  # no execution times or papermill state


@pytest.mark.parametrize("name", NAMES)
def test_one_parameters_cell_of_plain_assignments(name):
    tagged = [cell for cell in read(name).cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0].cell_type == "code"
    body = ast.parse(tagged[0].source).body
    assert all(isinstance(node, ast.Assign) for node in body)
    assert all(isinstance(node.value, (ast.Constant, ast.List)) for node in body)  # values, not expressions
    assert {node.targets[0].id for node in body} == PARAMETERS[name]
    # papermill reads them too (papermill --help-notebook): a second '=' on a line hides that parameter from it
    assert {p.name for p in PythonTranslator.inspect(tagged[0])} == PARAMETERS[name]


@pytest.mark.parametrize("name", NAMES)
def test_first_code_cell_installs_unless_importable(name):
    cells = code_cells(read(name))
    install = cells[0].source
    assert f'REPO_URL = "{REPO_URL}"' in install
    assert 'f"grpo-recipes[notebooks] @ git+{REPO_URL}"' in install and '"pip", "install"' in install
    assert 'importlib.util.find_spec("recipes.colab") is None' in install
    assert sum(cell.source.count("github.com/") for cell in cells) == 1  # the URL is one constant
    assert "parameters" in cells[1].metadata.get("tags", [])


@pytest.mark.parametrize("name", NAMES)
def test_code_cells_hold_no_logic(name):
    for cell in code_cells(read(name)):
        assert len(code_lines(cell)) <= MAX_CODE_LINES, cell.source
        found = [type(node).__name__ for node in ast.walk(ast.parse(cell.source)) if isinstance(node, LOGIC)]
        assert not found, f"{found} in:\n{cell.source}"


# The project's calls that refuse a user's input (a recipe typo, a missing checkpoint): through colab.run_step, Run
# all stops on the message alone; called directly, on a traceback through the project's code.
REFUSING_STEPS = {"load_recipe", "fetch_checkpoint", "evaluate", "train", "compare", "plot_curves"}


@pytest.mark.parametrize("name", NAMES)
def test_steps_that_can_refuse_input_run_through_run_step(name):
    for cell in code_cells(read(name)):
        for node in ast.walk(ast.parse(cell.source)):
            called = node.func if isinstance(node, ast.Call) else None
            called = getattr(called, "id", None) or getattr(called, "attr", None)
            assert called not in REFUSING_STEPS, f"{called}() called directly in:\n{cell.source}"


@pytest.mark.parametrize("name", NAMES)
def test_each_step_has_a_markdown_cell_saying_what_and_how_long(name):
    cells = read(name).cells
    assert cells[0].cell_type == "markdown" and "estimate" in cells[0].source and "A100" in cells[0].source
    for before, cell in itertools.pairwise(cells):
        if cell.cell_type == "code":
            assert before.cell_type == "markdown" and DURATION.search(before.source), cell.source


@pytest.mark.parametrize("name", NAMES)
def test_credentials_come_from_secrets_only(name):
    source = "\n".join(cell.source for cell in code_cells(read(name)))
    assert "colab.load_credentials(" in source
    assert "os.environ" not in source and "userdata" not in source
    assert not TYPED_CREDENTIAL.search(source)


@pytest.mark.parametrize("name", NAMES[:3])
def test_gpu_notebooks_check_the_runtime(name):
    nb = read(name)
    assert "colab.check_runtime(resolved, purpose=" in "\n".join(cell.source for cell in code_cells(nb))
    assert nb.metadata.accelerator == "GPU" and nb.metadata.colab.gpuType == "A100"


def test_readme_links_each_notebook_and_lists_secrets_time_and_cost():
    readme = (NOTEBOOKS / "README.md").read_text()
    base = REPO_URL.replace("https://github.com/", "https://colab.research.google.com/github/")
    links = re.findall(r"\[Open in Colab\]\(([^)]+)\)", readme)
    assert links == [f"{base}/blob/main/notebooks/{name}.ipynb" for name in NAMES]
    assert all(f"`{secret}`" in readme for secret in SECRETS)
    assert "$1.50 per A100 hour" in readme and "estimates" in readme and "~24 h for ~1,200 steps" in readme
