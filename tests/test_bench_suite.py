"""The one bench command of issue 37 (bench/suite.py): every workload and contender, then the
targets, each with its measured ratio and met or missed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import merges, suite  # noqa: E402
from bench import run as bench_run  # noqa: E402


def _outcome(name: str, seconds: float, wrong: int = 0) -> bench_run.Outcome:
    check = bench_run.Check(100, 100 - wrong, 0, 0, wrong, {}, [])
    return bench_run.Outcome(bench_run.CONTENDERS[name], 0, [seconds], [seconds], 3 << 30, 1 << 30, [check])


def test_one_command_runs_every_workload_and_contender_then_prints_the_targets(tmp_path: Path, monkeypatch, capsys) -> None:
    calls: list[list[str]] = []

    def fake_run(argv):  # noqa: ANN001, ANN202
        calls.append(argv)
        images = argv[argv.index("--images") + 1]
        events = int(argv[argv.index("--events") + 1])
        workload = bench_run.Workload(tmp_path, events, 10)  # (only .events is read)
        names = argv[argv.index("--only") + 1].split(",")
        seconds = {"peer": 5.0, "correct": 8.0, "lakecdc": 10.0, "autocdc": 40.0, "floor": 1.0}
        outcomes = [_outcome(n, seconds.get(n.replace("-delta-spark", ""), 20.0), wrong=30 if n == "peer" and images == "partial" else 0)
                    for n in names]
        return [(bench_run.Batch(workload, images, tmp_path / "events.json"), bench_run.Measured(outcomes, 0.0, "", ""))]

    merge_calls: list[list[str]] = []

    def fake_merges(argv):  # noqa: ANN001, ANN202
        merge_calls.append(argv)
        return {"verdict": merges.Verdict(0.01, True, 0.8, 1.1, 0.9, True)}

    monkeypatch.setattr(suite, "autocdc_reason", lambda: None)
    monkeypatch.setattr(bench_run, "main", fake_run)
    monkeypatch.setattr(merges, "main", fake_merges)
    suite.main(["--quick", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    # partial images first, then whole; each with both engines' notebooks and lakecdc, AUTO CDC on whole only
    assert [(c[c.index("--images") + 1], c[c.index("--events") + 1]) for c in calls] == [("partial", "200000"), ("whole", "200000")]
    partial_only = calls[0][calls[0].index("--only") + 1].split(",")
    whole_only = calls[1][calls[1].index("--only") + 1].split(",")
    assert "autocdc" not in partial_only and "autocdc" in whole_only
    assert {"peer", "correct", "lakecdc", "peer-delta-spark", "correct-delta-spark", "lakecdc-delta-spark", "floor"} <= set(partial_only)
    assert merge_calls and merge_calls[0][merge_calls[0].index("--rows") + 1] == "1000000"
    # the targets: lakecdc 10 s against the correct notebook's 8 s (0.80, missed), AUTO CDC 40 s (4.00,
    # met), the typical notebook 5 s on whole images (0.50 against 0.83, missed)
    assert "| 200,000 events, partial images | lakecdc vs correct | >= 1.00 | 0.80 | missed |" in out
    assert "| 200,000 events, whole images | lakecdc vs autocdc | >= 1.00 | 4.00 | met |" in out
    assert "| 200,000 events, whole images | lakecdc vs peer | >= 0.83 | 0.50 | missed |" in out
    assert "lakecdc-delta-spark vs correct-delta-spark" in out
    assert "files rewritten 1% (met, goal <= 5%)" in out


def test_sizes_and_engines_are_checked(monkeypatch) -> None:
    args = suite.parse_args(["--sizes", "1000:100", "--whole-sizes", "", "--engines", "delta-rs"])
    assert args.sizes == [(1000, 100)] and args.whole_sizes == [] and args.engines == ["delta-rs"]
    assert suite.contenders(["delta-rs"], "whole") == ["peer", "correct", "lakecdc", "autocdc", "floor"]
    assert "autocdc" not in suite.contenders(["delta-rs"], "whole", autocdc=False)
    with pytest.raises(SystemExit):
        suite.parse_args(["--sizes", "1000"])
    with pytest.raises(SystemExit):
        suite.parse_args(["--engines", "polars"])
