"""An Airflow DAG that runs a lakecdc job every 15 minutes through the CLI.

Copy this file into Airflow's ``dags/`` folder on a worker where lakecdc is installed (``pip
install "lakecdc[spark]"`` and a Java runtime, or a Spark of its own), and point ``JOB_FILE`` at
the job file. Each run is ``lakecdc run JOB_FILE``: the job's new change files are applied exactly
once, then its tables are maintained when due (the job file's ``maintenance.every_runs`` /
``max_files``: lakecdc counts the runs itself, so the DAG needs no maintenance task of its own).
A run that finds nothing new starts no Spark and takes a second.

Paths inside the job file are relative to the job file, so the task's working directory does not
matter; ``LAKE_ROOT`` (the bundled jobs' ``${LAKE_ROOT:-..}``) moves the target for this
deployment. The command exits non-zero when a table failed or a ``fail`` data-quality check
failed, which fails the task (and Airflow retries it: lakecdc resumes an interrupted run on
exactly its files). ``max_active_runs=1``: one writer per target (lakecdc's lease would make a
second one wait or fail anyway).
"""

from __future__ import annotations

import datetime as dt

from airflow import DAG

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

#: The job file to run (an absolute path on the Airflow workers).
JOB_FILE = "/opt/lakecdc/jobs/sample.yaml"
#: How often the job runs.
EVERY = dt.timedelta(minutes=15)

with DAG(
    dag_id="lakecdc_sample",
    description="lakecdc run: change files into Delta tables, exactly once",
    schedule=EVERY,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=2)},
    tags=["lakecdc", "cdc"],
) as dag:
    BashOperator(
        task_id="lakecdc_run",
        bash_command=f"lakecdc run {JOB_FILE} --quiet",
        env={"LAKE_ROOT": "/data"},
        append_env=True,  # PATH, JAVA_HOME and the rest of the worker's environment stay
        execution_timeout=dt.timedelta(hours=1),
    )
