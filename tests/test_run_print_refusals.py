"""`run.py --print` and `--plan` refuse what a run refuses at its start, offline and with the run's own messages:
trainer.report_to's tracker names, checkpoint.uri and checkpoint.resume (they said the recipe was fine)."""

from __future__ import annotations

from _in_process import run_recipe


def run_cli(*args):
    return run_recipe(*args)


def test_print_refuses_an_unknown_tracker_a_malformed_uri_and_a_missing_resume_path_at_once(tmp_path):
    (tmp_path / "run" / "checkpoint-4").mkdir(parents=True)
    missing = tmp_path / "run" / "checkpoint-99"
    printed = run_cli(
        "gsm8k_tiny", "trainer.report_to=[wandbb]", "checkpoint.uri=s3:///runs", f"checkpoint.resume={missing}",
        "--print",
    )  # fmt: skip
    assert (printed.returncode, printed.stdout) == (2, "")
    assert printed.stderr.splitlines()[-3:] == [
        (
            "error: trainer.report_to: 'wandbb' in override 'trainer.report_to=[wandbb]' is not a tracker "
            "transformers knows. Did you mean wandb? Available: none, all, azure_ml, comet_ml, mlflow, neptune, "
            "tensorboard, trackio, wandb, codecarbon, clearml, dagshub, flyte, dvclive, swanlab, kubeflow."
        ),
        "checkpoint URI 's3:///runs' names no bucket; expected s3://bucket/prefix",
        (
            f"checkpoint.resume='{missing}' is not 'latest', 'never', an s3:// or file:// URI, an existing "
            f"checkpoint folder, or a run's best pointer (.../best). {missing.parent} holds checkpoint-4: name one "
            f"of those, or {missing.parent} itself (its newest complete one)."
        ),
    ]


def test_plan_refuses_a_folder_uri_under_a_file_and_a_resume_uri_that_names_no_bucket(tmp_path):
    (tmp_path / "file").write_text("x")
    planned = run_cli(
        "gsm8k_tiny",
        f"checkpoint.uri={tmp_path}/file/runs",
        "checkpoint.resume=s3:///runs/checkpoint-5",
        "--plan",
    )
    assert (planned.returncode, planned.stdout) == (2, "")
    assert planned.stderr.splitlines()[-2:] == [
        (
            f"error: checkpoint.uri: cannot write checkpoints to folder {tmp_path}/file/runs ({tmp_path}/file is "
            "a file; checkpoint.uri names a folder)"
        ),
        "checkpoint URI 's3:///runs' names no bucket; expected s3://bucket/prefix",
    ]
    assert not (tmp_path / "file" / "runs").exists()


def test_print_refuses_an_unmounted_google_drive_but_opens_no_s3_store():
    drive = run_cli("gsm8k_tiny", "checkpoint.uri=/content/drive/MyDrive/runs/tiny", "--print")
    assert drive.returncode == 2 and drive.stderr.splitlines()[-1] == (
        "error: checkpoint.uri /content/drive/MyDrive/runs/tiny is on Google Drive, but Drive is not mounted. In "
        "Colab run `from google.colab import drive; drive.mount('/content/drive')` first."
    )
    # Whether the bucket exists and the credentials reach it is the run's to find: --print needs no network.
    s3 = run_cli(
        "gsm8k_tiny",
        "checkpoint.uri=s3://bucket/runs",
        "checkpoint.resume=s3://bucket/runs/checkpoint-5",
        "--print",
    )
    assert s3.returncode == 0, s3.stderr
