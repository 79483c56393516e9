"""Every dagster.yaml variant passes Dagster's own instance validation; queue, pools, executor choice."""

import os
import threading
import time

import dagster as dg
import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config
from dagster._core.run_coordinator import QueuedRunCoordinator

from vae_pipeline.definitions import defs
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.executor import engine_of
from vae_pipeline.engines.pools import ensure_pool_limits
from vae_pipeline.engines.settings import apply_defaults, instance_yaml
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META

VARIANTS = {"sqlite": PROJECT_ROOT / "dagster.yaml",
            **{p.name.removeprefix("dagster.").removesuffix(".yaml"): p
               for p in (PROJECT_ROOT / "deploy").glob("dagster.*.yaml")}}
PG_ENV = {"DAGSTER_PG_URL": "postgresql://vae:secret@db.example:5432/dagster",
          "DAGSTER_PG_HOST": "db.example", "DAGSTER_PG_PORT": "5433", "DAGSTER_PG_USER": "vae",
          "DAGSTER_PG_PASSWORD": "secret", "DAGSTER_PG_DB": "dagster",
          "VAE_STEP_LOG_BUCKET": "step-logs", "VAE_STEP_LOG_PREFIX": "vae/step-logs"}


def test_the_variants_the_readme_names_exist():
    assert set(VARIANTS) == {"sqlite", "postgres", "postgres-env", "s3"}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_passes_dagster_validation(name, tmp_path, monkeypatch):
    for var, value in PG_ENV.items():
        monkeypatch.setenv(var, value)
    (tmp_path / "dagster.yaml").write_bytes(VARIANTS[name].read_bytes())
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    runs = config["concurrency"]["runs"]
    assert runs["max_concurrent_runs"] >= 2
    per_backfill = [limit for limit in runs["tag_concurrency_limits"] if limit["key"] == "dagster/backfill"]
    assert per_backfill and per_backfill[0]["value"] == {"applyLimitPerUniqueValue": True}
    assert config["concurrency"]["pools"]["granularity"] == "op"


@pytest.mark.parametrize("name", ["postgres", "postgres-env", "s3"])
def test_postgres_variants_read_the_connection_from_the_environment(name):
    text = VARIANTS[name].read_text()
    storage = yaml.safe_load(text)["storage"]["postgres"]
    if name in ("postgres", "s3"):
        assert storage == {"postgres_url": {"env": "DAGSTER_PG_URL"}}
    else:
        assert storage["postgres_db"] == {"hostname": {"env": "DAGSTER_PG_HOST"}, "port": {"env": "DAGSTER_PG_PORT"},
                                          "username": {"env": "DAGSTER_PG_USER"},
                                          "password": {"env": "DAGSTER_PG_PASSWORD"},
                                          "db_name": {"env": "DAGSTER_PG_DB"}}


def test_postgres_variant_refuses_to_open_without_its_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    (tmp_path / "dagster.yaml").write_bytes(VARIANTS["postgres"].read_bytes())
    with pytest.raises(Exception, match='environment variable "DAGSTER_PG_URL" which is not set'):
        dg.DagsterInstance.from_config(str(tmp_path))


def test_embedded_instance_opens_with_the_queue_and_pools(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("VAE_INSTANCE", raising=False)
    apply_defaults({"VAE_HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path)})
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config.max_concurrent_runs == 2
        assert [(limit["key"], limit["limit"]) for limit in concurrency.run_queue_config.tag_concurrency_limits] == [
            ("dagster/backfill", 1)]
        assert concurrency.pool_config.default_pool_limit == 1
        ensure_pool_limits(instance)
        limits = {pool.name: pool.limit for pool in instance.event_log_storage.get_pool_limits()}
        assert limits["renders"] == 1
        assert limits["bundles"] == os.cpu_count()
        assert limits["warehouse"] == 1  # the DuckDB roll-up: one writer
        # a limit an operator set stays
        instance.event_log_storage.set_concurrency_slots("renders", 3)
        ensure_pool_limits(instance)
        assert {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}["renders"] == 3


def test_vae_instance_picks_a_variant_and_names_the_choices(tmp_path):
    home = tmp_path / "dagster"
    apply_defaults({"VAE_HOME": str(tmp_path), "DAGSTER_HOME": str(home), "VAE_INSTANCE": "postgres"})
    assert (home / "dagster.yaml").read_bytes() == (PROJECT_ROOT / "deploy" / "dagster.postgres.yaml").read_bytes()
    apply_defaults({"VAE_HOME": str(tmp_path), "DAGSTER_HOME": str(home), "VAE_INSTANCE": "sqlite"})
    assert (home / "dagster.yaml").read_bytes() == (PROJECT_ROOT / "dagster.yaml").read_bytes()
    with pytest.raises(ValueError, match="VAE_INSTANCE='mysql' names no instance configuration; "
                                         "use one of sqlite, postgres, postgres-env, s3"):
        instance_yaml("mysql")
    with pytest.raises(ValueError):
        instance_yaml("../dagster")


def test_decoding_bundling_and_the_duckdb_roll_up_claim_their_pools():
    # the ops of the job the builds, sensors, schedule and backfills run
    pools = {node.name: node.definition.pool for node in defs.resolve_job_def("refresh").nodes}
    assert pools["renders"] == "renders"
    assert pools["bundles"] == "bundles"
    assert pools["episode_table"] == "warehouse"  # one DuckDB writer at a time
    assert {name for name, pool in pools.items() if pool} == {"renders", "bundles", "episode_table"}


def test_engine_is_in_process_unless_configured(monkeypatch):
    monkeypatch.delenv("VAE_EXECUTOR", raising=False)
    assert engine_of({}) == "in_process"
    monkeypatch.setenv("VAE_EXECUTOR", "celery")
    assert engine_of({}) == "celery"
    assert engine_of({"engine": "in_process"}) == "in_process"  # the run config wins
    monkeypatch.setenv("VAE_EXECUTOR", "k8s")
    with pytest.raises(dg.DagsterInvalidConfigError, match="VAE_EXECUTOR='k8s' is not an engine"):
        engine_of({})


def test_every_job_runs_on_the_configurable_executor():
    """Every job but `publish`, which is in-process whatever the engine: the release is one short
    step, run where it is launched (its checks run before, in `publish_checks` or a build)."""
    for job in defs.resolve_all_job_defs():
        if job.name not in ("__ASSET_JOB", "publish"):
            assert job.executor_def.name == "vae_executor", job.name
    assert defs.resolve_job_def("publish").executor_def.name == "in_process"
    refresh = defs.resolve_job_def("refresh")
    assert refresh.executor_def.config_schema.config_type.fields["engine"].is_required is False


def test_celery_broker_settings_come_from_the_environment():
    from vae_pipeline.engines.executor import celery_executor_from_env

    executor = celery_executor_from_env(environ={"VAE_CELERY_BROKER": "redis://queue.example:6379/3",
                                                 "VAE_CELERY_PREFIX": "night-"})
    args = executor.app_args()
    assert args["broker"] == args["backend"] == "redis://queue.example:6379/3"
    assert args["config_source"].broker_transport_options["global_keyprefix"] == "night-"
    assert args["config_source"].result_backend_transport_options == {"global_keyprefix": "night-"}
    default = celery_executor_from_env(environ={}).app_args()
    assert default["broker"] == "redis://127.0.0.1:6379/0"


def test_a_renders_step_waits_while_the_renders_slot_is_taken(pipeline_env, tmp_path):
    """The pool binds every launch path, `vae build`'s in-process runs included."""
    from vae_pipeline.cli.build import build

    runs = generate(tmp_path / "runs", META, series=1, episodes=1, seed=5, bad=False)
    apply_defaults(dict(os.environ))  # the embedded instance in DAGSTER_HOME, as `vae build` makes it
    with dg.DagsterInstance.get() as instance:
        ensure_pool_limits(instance)
        storage = instance.event_log_storage
        assert storage.claim_concurrency_slot("renders", "another-run", "renders").is_claimed
        result: dict = {}
        builder = threading.Thread(target=lambda: result.update(build(runs.root, pipeline_env["dataset"])))
        builder.start()
        deadline = time.monotonic() + 240
        while not storage.get_concurrency_info("renders").pending_steps:
            assert builder.is_alive() and time.monotonic() < deadline, "the renders step never waited"
            time.sleep(0.2)
        time.sleep(2)
        assert instance.get_latest_materialization_event(dg.AssetKey("renders")) is None
        assert [s.run_id for s in storage.get_concurrency_info("renders").claimed_slots] == ["another-run"]
        storage.free_concurrency_slots_for_run("another-run")
        builder.join(300)
        assert not builder.is_alive() and result["failed_runs"] == []
        assert instance.get_latest_materialization_event(dg.AssetKey("renders")) is not None
        assert storage.get_concurrency_info("renders").claimed_slots == []
