"""neardup nightly run as an Airflow 2 DAG (Airflow 2.4 or later).

Install: copy this file into the DAGs folder of a deployment whose workers have
`neardup` on PATH (or NEARDUP set to the binary) and can read the job file
JOB below. Object-store credentials (AWS_*, GOOGLE_*, AZURE_*) must be in the
workers' environment: neardup inherits it, and the job file holds none.

Each DAG run handles its logical date ``{{ ds }}``: the run scheduled at
2026-11-22 02:15 UTC has ds = 2026-11-21, the same night the cron and
Kubernetes examples pick (Airflow 3 changes what ds is for a cron schedule;
this file is for Airflow 2). Clearing a past run's ``run`` task reruns that
night, which replaces the night's store partition and report.

Exit codes of ``neardup run``: 0 succeeds; 2 (bad input or configuration)
raises AirflowFailException, which fails the task without retries; any other
(1: may succeed when retried, or killed by a signal) raises AirflowException,
which Airflow retries (``retries=3``, backoff from 30 s). A BashOperator would
retry exit code 2 as well, hence the Python task.

``check_report`` then reads the night's summary.json and pushes its counts to
XCom (keys ``documents`` and ``duplicates``; the return value is the number of
duplicates).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections import deque
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.decorators import dag, task
from airflow.exceptions import AirflowException, AirflowFailException

NEARDUP = os.environ.get("NEARDUP", "neardup")
JOB = "/opt/neardup/jobs/nightly.toml"
# The folder holding the reports: the job file's `output` is REPORTS/{run_id}.
# (For a report in object storage, read summary.json with the provider's hook
# instead, e.g. S3Hook().read_key.)
REPORTS = "/data/neardup/reports"
# The store the job file names (for the weekly compaction).
STORE = "/data/neardup/store"

log = logging.getLogger(__name__)


def run_neardup(cmd: list[str], what: str) -> None:
    """Run neardup, its JSON lines into the task log; map its exit code to Airflow's retry rules."""
    log.info("running %s", " ".join(cmd))
    last = deque(maxlen=20)
    # neardup's JSON lines (standard error) go to the task log as they come.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            log.info("%s", line)
            last.append(line)
        rc = proc.wait()
    except BaseException:
        # The task was killed or timed out: stop neardup too.
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    if rc == 0:
        return
    tail = "\n".join(last)
    if rc == 2:
        raise AirflowFailException(f"{what}: bad input or configuration (exit code 2); not retried\n{tail}")
    if rc == 3:
        # The run is committed, without the input files its summary.json
        # names (skipped_files): a rerun would skip them again.
        raise AirflowFailException(f"{what}: done, but partial (exit code 3): input files were skipped; not retried\n{tail}")
    cause = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
    raise AirflowException(f"{what} failed ({cause}); retried while tries remain\n{tail}")



@dag(
    dag_id="neardup_nightly",
    schedule="15 2 * * *",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    # Missed nights are not run on their own; catchup=True would run them,
    # oldest first, one at a time.
    catchup=False,
    # Never two runs at once: they would write the same store.
    max_active_runs=1,
    default_args={
        "retries": 3,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
    },
    tags=["neardup"],
)
def neardup_nightly():
    @task(execution_timeout=timedelta(hours=6))
    def run(ds: str | None = None) -> str:
        """Run `neardup run JOB --run-id {{ ds }} --log-format json`; return the run id."""
        run_neardup([NEARDUP, "run", JOB, "--run-id", ds, "--log-format", "json"], f"neardup run {ds}")
        return ds

    @task
    def check_report(run_id: str, ti=None) -> int:
        """Read the night's summary.json; push documents and duplicates to XCom."""
        report = Path(REPORTS) / run_id
        if not (report / "_SUCCESS").exists():
            raise AirflowFailException(f"{report} has no _SUCCESS: the report is missing or incomplete")
        summary = json.loads((report / "summary.json").read_text())
        # The run id sits in the summary's `store` object.
        found = (summary.get("store") or {}).get("run_id", summary.get("run_id"))
        if found != run_id:
            raise AirflowFailException(f"{report}/summary.json is for run {found!r}, not {run_id!r}")
        log.info("run %s: %s documents, %s duplicates", run_id, summary["documents"], summary["duplicates"])
        ti.xcom_push(key="documents", value=summary["documents"])
        ti.xcom_push(key="duplicates", value=summary["duplicates"])
        return summary["duplicates"]

    check_report(run())

    # Alternative: neardup in its own pod (apache-airflow-providers-cncf-kubernetes),
    # with the ConfigMap and Secret of jobs/kubernetes/cronjob.yaml. The operator
    # fails the same way whatever the exit code, so Airflow retries exit code 2 too.
    #
    # from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    # from kubernetes.client import models as k8s
    #
    # run_pod = KubernetesPodOperator(
    #     task_id="run",
    #     name="neardup-nightly",
    #     image="localhost/neardup:0.1.0",  # the Containerfile's image, pushed to your registry
    #     cmds=["neardup"],
    #     arguments=["run", "/etc/neardup/nightly.toml", "--run-id", "{{ ds }}", "--log-format", "json"],
    #     env_from=[k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(name="neardup-store-credentials"))],
    #     volumes=[k8s.V1Volume(name="job", config_map=k8s.V1ConfigMapVolumeSource(name="neardup-nightly-job"))],
    #     volume_mounts=[k8s.V1VolumeMount(name="job", mount_path="/etc/neardup", read_only=True)],
    #     container_resources=k8s.V1ResourceRequirements(
    #         requests={"cpu": "2", "memory": "4Gi"}, limits={"cpu": "2", "memory": "4Gi"}
    #     ),
    #     get_logs=True,
    #     execution_timeout=timedelta(hours=6),
    # )
    # run_pod >> check_report("{{ ds }}")


neardup_nightly()


@dag(
    dag_id="neardup_compact",
    schedule="30 4 * * 0",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # A night still running holds the store's lease: the compaction exits 1 and is retried later.
    default_args={"retries": 3, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True},
    tags=["neardup"],
)
def neardup_compact():
    @task(execution_timeout=timedelta(hours=6))
    def compact() -> None:
        """Merge the store's nightly partitions into one segment (`neardup store compact`)."""
        run_neardup([NEARDUP, "store", "compact", "--store", STORE], f"neardup store compact {STORE}")

    compact()


neardup_compact()
