"""Declarative merge jobs: one YAML file per pipeline (:mod:`lakecdc.jobs.file` says what it
holds), run once, every interval or as streams (:mod:`lakecdc.jobs.run`)::

    lakecdc run jobs/sample.yaml             # apply what is new, maintain when due, print a summary
    lakecdc run jobs/sample.yaml --watch     # the same every --interval (default 60s) until stopped
    lakecdc run jobs/sample.yaml --stream    # each source as a Structured Streaming query (lakecdc.streaming)

Paths in a job file are relative to the file, ``${VAR}`` / ``${VAR:-default}`` come from the
environment, and every key is validated before anything runs. To run a job on a schedule, see
``jobs/examples/``: a Databricks Jobs definition (``databricks_job.json``) and an Airflow DAG
(``airflow_dag.py``), both running ``lakecdc run <job file>``; the job's own ``maintenance:``
decides when its tables are maintained (:mod:`lakecdc.jobs.file`, "Maintenance due").
"""

from lakecdc.jobs.file import Job, Maintenance, Source, Streaming, load_job
from lakecdc.jobs.run import JobResult, run_job, stream_job, watch

__all__ = ["Job", "JobResult", "Maintenance", "Source", "Streaming", "load_job", "run_job", "stream_job", "watch"]
