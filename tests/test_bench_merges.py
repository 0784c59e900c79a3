"""The merge-cost benchmark (bench/merges.py, issue 6) runs end to end at a tiny size, and what it
prints, returns and writes to RESULTS.md adds up.

20,000 rows in 100 files of 200 rows (and 2,000 rows in 10 files), 3 merges of 50 keys per
series, a 100-key batch for part b: every figure is checked for consistency with the table
layout (which files a batch's keys fall in), never against a time limit.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import merges, run  # noqa: E402

pytestmark = pytest.mark.spark

ROWS, MERGES, KEYS, SWEEP = 20_000, 3, 50, 100
PER_FILE = ROWS // merges.BIG_FILES  # 200 rows per file in both tables


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("merges")
    results = workdir / "RESULTS.md"
    patch = pytest.MonkeyPatch()
    patch.setattr(run, "RESULTS", results)  # --write-results writes here, not into bench/
    argv = [
        "--rows",
        str(ROWS),
        "--merges",
        str(MERGES),
        "--batch-keys",
        str(KEYS),
        "--sweep-keys",
        str(SWEEP),
    ]
    argv += ["--repeat", "1", "--workdir", str(workdir), "--write-results"]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            out = merges.main(argv, spark=spark)
    finally:
        patch.undo()
    out["printed"] = printed.getvalue()
    out["workdir"] = workdir
    out["results"] = results.read_text()
    return out


def test_generated_tables_hold_one_key_range_per_file(outcome: dict[str, Any]) -> None:
    for rows, files in ((ROWS, merges.BIG_FILES), (ROWS // merges.SMALL_DIVISOR, merges.SMALL_FILES)):
        tables = merges.Tables(outcome["workdir"] / "merges" / f"table_r{rows}_f{files}_s42", rows, files)
        for path in (merges.lakecdc_table(tables.lakecdc_root), tables.plain):
            layout = merges.table_layout(path)
            assert layout.files == files and layout.overlap == pytest.approx(1.0, abs=0.01)
            assert DeltaTable(str(path)).count() == rows
        # the lakecdc target is one lakecdc would write: its keys recorded, its first run's mark kept
        from lakecdc.lake.state import known_tables

        assert known_tables(str(tables.lakecdc_root)) == {"BENCH.ORDERS": ("ID",)}
        assert DeltaTable(str(merges.lakecdc_table(tables.lakecdc_root))).transaction_version("lakecdc") == 1


def test_part_a_series(outcome: dict[str, Any]) -> None:
    series = {(s.contender, s.kind): s for s in outcome["series"]}
    assert set(series) == {(c, k) for c in merges.DEFAULT_CONTENDERS for k in merges.KINDS}
    for s in series.values():
        assert len(s.runs) == MERGES
        assert s.before.files == merges.BIG_FILES
        for r in s.runs:
            # the merge's own time and the run's were both taken (reported in bench/, not judged here)
            assert r.merge.seconds is not None and r.seconds is not None
            assert 1 <= r.rewritten <= r.in_range <= r.files_before
            # a rewritten file is copied whole except the rows the batch updates
            assert r.copied + KEYS >= r.rewritten * PER_FILE * 0.5
            assert r.merge.metrics["num_target_rows_updated"] == KEYS
        target = outcome["target_size"]
        assert s.after_compaction.small(target) <= s.after_merges.small(target)
        assert s.after_compaction.files <= s.after_merges.files
        assert s.read_before > 0 and s.read_after > 0
        assert s.peak > 0
    for kind in merges.KINDS:
        # the same batches into the same layout: both contenders rewrite the same files
        assert [r.rewritten for r in series[("lakecdc", kind)].runs] == [
            r.rewritten for r in series[("peer", kind)].runs
        ]
    clustered = series[("lakecdc", "clustered")].runs
    uniform = series[("lakecdc", "uniform")].runs
    # 50 keys within 100 contiguous ones touch at most 2 files of 200 rows; spread, they touch many
    assert all(r.in_range <= 2 for r in clustered)
    assert uniform[0].rewritten > 10 * max(r.rewritten for r in clustered)


def test_part_b_sweeps(outcome: dict[str, Any]) -> None:
    sweeps = {(s.rows, s.kind, s.contender): s for s in outcome["sweeps"]}
    sizes = (ROWS // merges.SMALL_DIVISOR, ROWS)
    assert set(sweeps) == {(r, k, c) for r in sizes for k in merges.KINDS for c in merges.DEFAULT_CONTENDERS}
    for (rows, kind, contender), s in sweeps.items():
        assert s.files == (merges.BIG_FILES if rows == ROWS else merges.SMALL_FILES)
        (r,) = s.runs
        assert r.merge.metrics["num_target_rows_updated"] == SWEEP
        if kind == "clustered":  # 100 keys within 200 contiguous: at most 2 files of 200 rows
            assert 1 <= r.rewritten <= 2
        else:  # spread keys: the range spans (nearly) every file, pruning cannot help
            assert r.rewritten <= r.in_range and r.in_range >= s.files - 2
        assert r.rewritten == sweeps[(rows, kind, "peer" if contender == "lakecdc" else "lakecdc")].rewritten
    # uniform over the small table's 10 files touches all of them
    assert sweeps[(sizes[0], "uniform", "lakecdc")].rewritten == merges.SMALL_FILES
    result = outcome["verdict"]
    big = sweeps[(ROWS, "clustered", "lakecdc")]
    small = sweeps[(sizes[0], "clustered", "lakecdc")]
    assert result.rewritten_share == big.rewritten / merges.BIG_FILES
    assert result.rewritten_ok == (result.rewritten_share <= 0.05)
    assert result.cost_ratio == pytest.approx(big.seconds / small.seconds)
    assert result.cpu_ratio == pytest.approx(big.cpu / small.cpu)
    assert result.cost_ok == (result.cost_ratio <= 2.0)


def test_printed_and_written(outcome: dict[str, Any]) -> None:
    printed = outcome["printed"]
    assert "Spark start-up" in printed and "== part a" in printed and "== part b" in printed
    for body in outcome["sections"].values():  # the tables written are the ones printed
        for line in body.splitlines():
            if line.startswith("| "):
                assert line in printed
    text = outcome["results"]
    headings = [f"## {h}" for h in outcome["sections"]]
    assert len(headings) == 2
    for heading in headings:
        assert heading in text
    assert text.count("- Machine: ") == 2 and "deltalake" in text
    assert "| clustered | lakecdc | 3 |" in text
    assert "Target 1, a clustered batch" in text and "Target 2" in text
    assert "Other work took" in text
