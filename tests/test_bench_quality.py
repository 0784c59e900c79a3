"""The quality-check benchmark (bench/quality.py, issue 7) runs end to end at a tiny size: the
merge, the generated suites with and without Data Docs, every check passing, the ratios it
reports and the RESULTS.md section it writes."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import quality, run  # noqa: E402

pytestmark = pytest.mark.spark


def test_quality_bench_runs_at_a_tiny_size(spark, tmp_path, monkeypatch):
    results = tmp_path / "RESULTS.md"
    monkeypatch.setattr(run, "RESULTS", results)  # --write-results writes here, not into bench/
    printed = io.StringIO()
    argv = ["--events", "2000", "--keys", "500", "--workdir", str(tmp_path), "--warmup", "0", "--write-results"]
    with contextlib.redirect_stdout(printed):
        out = quality.main(argv, spark=spark)
    outcome = out["outcome"]
    assert not outcome.failed and outcome.checks >= 12 + 2 + 7 + 2  # columns, key, rules, schema + reconcile
    assert len(outcome.merge) == len(outcome.docs) == len(outcome.memory) == 1
    assert out["ratio"] == pytest.approx(outcome.docs[0] / outcome.merge[0])
    text = results.read_text()
    assert "## Quality checks after a merge of 2,000 events over 500 keys" in text
    assert "| checks with Data Docs (default) |" in text and "checks, all passed" in text
    template = tmp_path / "targets" / "ogg_e2000_k500_s42" / "quality-template"
    assert (template / ".preloaded").exists() and "preloaded 500 keys" in printed.getvalue()
