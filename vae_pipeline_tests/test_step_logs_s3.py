"""VAE_INSTANCE=s3: a step's stdout and stderr land in the bucket and the instance reads them back
from there, as the UI of any machine does."""

import os
import subprocess
import sys
import uuid

import dagster as dg
import pytest
from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline_tests.services import postgres_database

# A run worker's view: a job outside the project, run on the instance $DAGSTER_HOME describes.
JOB = """
import sys
import dagster as dg
import pytest

@dg.op
def speak():
    print(sys.argv[1])
    sys.stderr.write(sys.argv[2] + "\\n")

@dg.job
def talk():
    speak()

with dg.DagsterInstance.get() as instance:
    assert talk.execute_in_process(instance=instance).success
"""
PREFIX = "vae/step-logs"


def test_a_steps_output_is_stored_in_the_bucket_and_read_back_from_it(tmp_path, monkeypatch, s3_environ,
                                                                      s3_client, make_bucket):
    bucket = make_bucket()
    home = tmp_path / "dagster"
    out, err = f"said-{uuid.uuid4().hex}", f"complained-{uuid.uuid4().hex}"
    with postgres_database() as url:
        for name, value in {"DAGSTER_HOME": str(home), "DAGSTER_PG_URL": url, "VAE_STEP_LOG_BUCKET": bucket,
                            "VAE_STEP_LOG_PREFIX": PREFIX}.items():
            monkeypatch.setenv(name, value)
        apply_defaults({"VAE_HOME": str(tmp_path), "DAGSTER_HOME": str(home), "VAE_INSTANCE": "s3"})
        done = subprocess.run([sys.executable, "-c", JOB, out, err], env=dict(os.environ), capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]

        with dg.DagsterInstance.from_config(str(home)) as instance:
            [run] = instance.get_runs()
            assert run.status == dg.DagsterRunStatus.SUCCESS
            [captured] = [event.dagster_event.logs_captured_data
                          for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.LOGS_CAPTURED)]
            assert captured.step_keys == ["speak"]
            stored = f"{PREFIX}/storage/{run.run_id}/compute_logs/{captured.file_key}"
            keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])]
            assert sorted(keys) == [f"{stored}.err", f"{stored}.out"]
            assert out in s3_client.get_object(Bucket=bucket, Key=f"{stored}.out")["Body"].read().decode()
            assert err in s3_client.get_object(Bucket=bucket, Key=f"{stored}.err")["Body"].read().decode()

            manager = instance.compute_log_manager
            assert isinstance(manager, S3ComputeLogManager)
            log_key = [run.run_id, "compute_logs", captured.file_key]
            staged = [home / run.run_id / "compute_logs" / f"{captured.file_key}.{ext}" for ext in ("out", "err")]
            # the staged copies are gone once uploaded, so what the UI reads comes from the bucket
            assert [p.exists() for p in staged] == [False, False]
            data = manager.get_log_data(log_key)
            assert out in data.stdout.decode() and out not in data.stderr.decode()
            assert err in data.stderr.decode() and err not in data.stdout.decode()
            assert [p.is_file() for p in staged] == [True, True]  # downloaded into $DAGSTER_HOME, not the temp folder
            assert manager.get_log_metadata(log_key).stdout_location == f"s3://{bucket}/{stored}.out"


def test_the_variant_refuses_to_open_without_a_bucket(tmp_path, monkeypatch):
    """The bucket is never a default: step logs would go somewhere nobody chose."""
    monkeypatch.setenv("VAE_STEP_LOG_PREFIX", PREFIX)
    monkeypatch.delenv("VAE_STEP_LOG_BUCKET", raising=False)
    apply_defaults({"VAE_HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path), "VAE_INSTANCE": "s3"})
    with postgres_database() as url:  # the run storage opens with the instance, the log manager when first used
        monkeypatch.setenv("DAGSTER_PG_URL", url)
        with (dg.DagsterInstance.from_config(str(tmp_path)) as instance,
              pytest.raises(Exception, match='environment variable "VAE_STEP_LOG_BUCKET" which is not set')):
            _ = instance.compute_log_manager
