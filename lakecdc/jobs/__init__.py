"""Declarative merge jobs: one YAML file per pipeline (:mod:`lakecdc.jobs.file` says what it
holds), run once, every interval or as streams (:mod:`lakecdc.jobs.run`)::

    lakecdc run jobs/sample.yaml             # apply what is new, maintain when due, print a summary
    lakecdc run jobs/sample.yaml --watch     # the same every --interval (default 60s) until stopped
    lakecdc run jobs/sample.yaml --stream    # each source as a Structured Streaming query (lakecdc.streaming)
"""

from lakecdc.jobs.file import Job, Maintenance, Source, Streaming, load_job
from lakecdc.jobs.run import JobResult, run_job, stream_job, watch

__all__ = ["Job", "JobResult", "Maintenance", "Source", "Streaming", "load_job", "run_job", "stream_job", "watch"]
