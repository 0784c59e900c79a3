"""What a person meets at the command line: --version, Spark's noise kept off the terminal, a closed
pipe, paths that are no lakecdc target, a missing --format, flags checked before anything is
written, and the tables as they are printed."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from rich.console import Console

from lakecdc.cli import main, render
from lakecdc.lake.summary import RunSummary, TableSummary

ROOT = Path(__file__).resolve().parents[1]

#: lines Spark's JVM prints as it starts (log4j, Hadoop, the JVM itself) that a user should not see
NOISE = ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader",
         "To adjust logging level", "WARNING: Using incubator modules", " WARN ")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lakecdc", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """The bundled sample applied by the CLI in a fresh process: (target, summary JSON, the process)."""
    base = tmp_path_factory.mktemp("doors")
    target, summary = base / "lake", base / "run.json"
    out = run_cli("apply", "--format", "ogg-json", "--input", "jobs/sample/landing", "--target", str(target),
                  "--config", "jobs/sample/apply.yaml", "--summary-json", str(summary))
    assert out.returncode == 0, out.stderr
    return target, summary, out


def listing(path: Path) -> list[str]:
    """Every path under ``path`` (relative), or a marker when it does not exist."""
    if not path.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_version():
    """`lakecdc --version` prints lakecdc's version and the engines installed, and exits 0."""
    out = run_cli("--version")
    assert out.returncode == 0, out.stderr
    assert re.match(r"lakecdc \d+\.\d+\.\d+ \(.*pyspark \d+\.\d+", out.stdout), out.stdout


@pytest.mark.spark
def test_spark_noise_is_hidden(applied):
    """A run without --verbose shows lakecdc's progress and summary, none of the JVM's start-up
    lines, and leaves no Spark log behind when it succeeds."""
    _, _, out = applied
    assert "decoding 3 file(s) as ogg-json" in out.stderr and "QASOURCE.TCUSTMER" in out.stdout
    for needle in NOISE:
        assert needle not in out.stderr and needle not in out.stdout, needle
    assert "Spark's own output" not in out.stderr


@pytest.mark.spark
def test_spark_noise_with_verbose(tmp_path):
    """--verbose (after the command or before it) lets Spark's own start-up lines through."""
    landing = tmp_path / "in"
    landing.mkdir()
    shutil.copy(ROOT / "jobs/sample/landing/2024-03-01T0900-0001.json", landing)
    out = run_cli("--verbose", "apply", "--format", "ogg-json", "--input", str(landing), "--target",
                  str(tmp_path / "lake"), "--config", "jobs/sample/apply.yaml", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "Using Spark's default log4j profile" in out.stderr or "NativeCodeLoader" in out.stderr, out.stderr
    assert "decoding" not in out.stderr  # --quiet still hides lakecdc's own progress
    parsed = __import__("lakecdc.cli", fromlist=["build_parser"]).build_parser().parse_args(
        ["apply", "--verbose", "--format", "ogg-json", "--target", "x"])
    assert parsed.verbose is True


def test_closed_pipe_exits_quietly(tmp_path):
    """`lakecdc status --json | head -0`: the reader is gone before lakecdc writes; no traceback,
    no 'Exception ignored', the shell's SIGPIPE status. (A target with a ledger and no runs yet:
    status prints [] without reading a Delta table.)"""
    (tmp_path / "_lakecdc").mkdir()
    child = subprocess.Popen([sys.executable, "-m", "lakecdc", "status", "--target", str(tmp_path), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("kind", ["missing", "empty", "delta-table", "other-files"])
def test_not_a_target_exits_2_and_creates_nothing(tmp_path, capsys, kind):
    """status, maintain, doctor, repair and check on a path no lakecdc run wrote to: exit 2, a
    message naming the path and why, and the path's listing unchanged."""
    path = tmp_path / "t"
    if kind == "empty":
        path.mkdir()
    elif kind == "delta-table":
        import pyarrow as pa

        write_deltalake(str(path), pa.table({"ID": [1, 2]}))
    elif kind == "other-files":
        path.mkdir()
        (path / "notes.txt").write_text("hello")
    why = {"missing": "it does not exist", "empty": "it is empty", "delta-table": "it is a Delta table",
           "other-files": "it holds notes.txt"}[kind]
    before = listing(path)
    for command in (["status"], ["status", "--json"], ["doctor"], ["repair"], ["maintain"],
                    ["check", "--contract", str(ROOT / "data_contracts")], ["check", "--unblock", "S.T"]):
        capsys.readouterr()
        assert main([*command, "--target", str(path)]) == 2, command
        err = capsys.readouterr().err
        assert f"{path} is not a lakecdc target (no _lakecdc/ ledger): {why}" in err, (command, err)
        assert listing(path) == before, command


def test_format_is_required(tmp_path, capsys):
    """apply and stream without --format (nor --gg-properties, nor format: in --config) stop with a
    usage error listing the formats, before anything is read or created."""
    for command in ("apply", "stream"):
        with pytest.raises(SystemExit) as stopped:
            main([command, "--input", str(tmp_path), "--target", str(tmp_path / "lake")])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert "usage:" in err and "the input's format is required" in err
        line = err.strip().splitlines()[-1]
        for name in ("ogg-json", "debezium-json", "canal-json", "qlik-json", "dts-avro"):
            assert name in line, name
        assert not (tmp_path / "lake").exists()
    # a --config that names the format is enough: the run goes on (and meets the missing input)
    assert main(["apply", "--config", str(ROOT / "jobs/sample/apply.yaml"), "--input", str(tmp_path / "none"),
                 "--target", str(tmp_path / "lake")]) == 2
    assert "usage:" not in capsys.readouterr().err


@pytest.mark.spark
def test_maintain_checks_every_flag_before_writing(applied, tmp_path, capsys):
    """A vacuum retention below the tables' minimum is refused before the Z-order runs: no table's
    Delta version moves."""
    target = tmp_path / "lake"
    shutil.copytree(applied[0], target)
    tables = sorted(p for p in target.iterdir() if (p / "_delta_log").is_dir() and not p.name.startswith("_"))
    assert tables
    versions = [DeltaTable(str(p)).version() for p in tables]
    assert main(["maintain", "--target", str(target), "--zorder", "keys", "--vacuum-retention", "1h"]) == 2
    assert "below the table's minimum" in capsys.readouterr().err
    assert [DeltaTable(str(p)).version() for p in tables] == versions
    assert main(["maintain", "--target", str(target), "--zorder", "NO_SUCH_COLUMN"]) == 2
    assert "no such column" in capsys.readouterr().err
    assert [DeltaTable(str(p)).version() for p in tables] == versions


@pytest.mark.spark
def test_the_summary_a_person_sees(applied):
    """The apply summary on a 100-column terminal (rich's recorder): the header, one row per table
    with its counts, the status coloured, the totals under it; the same run's stdout (a pipe) is
    the plain table, without escape codes."""
    _, summary_json, out = applied
    summary = RunSummary.from_dict(json.loads(summary_json.read_text()))
    term = Console(record=True, width=100, force_terminal=True, color_system="standard", file=io.StringIO())
    render.summary(summary, term)
    styled = term.export_text(styles=True, clear=False)
    screen = term.export_text()
    lines = screen.splitlines()
    assert max(len(line) for line in lines) <= 100
    header = next(line for line in lines if line.startswith("table"))
    for word in ("events", "inserted", "updated", "deleted", "dup/late", "quarantined", "version", "status"):
        assert word in header, word
    assert re.search(r"^QASOURCE\.TCUSTMER +9 +4 +0 +0 +1 +0 +0/0/0 +1 applied", screen, re.M), screen
    assert re.search(r"^QASOURCE\.TCUSTORD +6 +2 +0 +0 +1 +0 +0/0/0 +1 applied", screen, re.M), screen
    assert re.search(r"^3 file\(s\), run\(s\) 1, [\d.]+s, engine delta-rs$", screen, re.M), screen
    assert "1 record(s) quarantined that name no table" in screen
    assert "\x1b[32mapplied" in styled
    assert "\x1b[" not in out.stdout
    assert re.search(r"^QASOURCE\.TCUSTMER +9 +4 +0 +0 +1 +0 +0/0/0 +1 +applied", out.stdout, re.M), out.stdout
    assert re.search(r"^-+ -+ ", out.stdout, re.M), out.stdout


def test_a_failed_table_is_shown_red_and_its_error_said():
    """A failed table's status is bold red on a terminal, and its error is printed under the table."""
    s = RunSummary(target="lake", format="ogg-json", runs=(4,), files=1, seconds=1.0, tables=(
        TableSummary("S.[OK]", "lake/S.OK", events=2, inserted=2, delta_version=3),
        TableSummary("S.BAD", "lake/S.BAD", events=1, status="failed", error="no primary key"),
    ))
    term = Console(record=True, width=100, force_terminal=True, color_system="standard", file=io.StringIO())
    render.summary(s, term)
    styled = term.export_text(styles=True, clear=False)
    assert "\x1b[1;31mfailed" in styled
    text = term.export_text()
    assert re.search(r"^S\.\[OK\] +2 +2 +0 +0 +0 +0 +- +3 applied", text, re.M), text  # [OK] is no markup
    assert "ERROR S.BAD: no primary key" in text


def test_plain_when_no_color(monkeypatch):
    """NO_COLOR gives the plain table even on a terminal; otherwise a terminal gets colours."""
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert render.console().color_system is not None
    monkeypatch.setenv("NO_COLOR", "1")
    out = render.console()
    assert out.color_system is None
    out.print(render.table(["table", "rows"], [["S.A", "3"]], out=out, right={1}))
    assert sys.stdout.getvalue().splitlines() == ["table   rows", "------ -----", "S.A        3"]


def test_progress_lines_never_share_a_line(capsys):
    """Eight threads reporting at once (tables merged in parallel): every line is one whole message."""
    say = render.progress_printer(quiet=False)

    def work(n: int) -> None:
        for i in range(200):
            say(f"table-{n}: step {i} " + "x" * 50)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1600
    assert all(re.fullmatch(r"\[ *\d+\.\ds\] table-\d: step \d+ x{50}", line) for line in lines)
    render.progress_printer(quiet=True)("nothing")
    assert capsys.readouterr().err == ""


@pytest.mark.spark
def test_status_doctor_and_maintain_print_tables(applied, tmp_path, capsys):
    """status, doctor and maintain on a real target: plain tables with their headers and a row per
    table (stdout is not a terminal here); --json unchanged."""
    target = tmp_path / "lake"
    shutil.copytree(applied[0], target)
    assert main(["status", "--target", str(target)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^table +last run +status +finished \(UTC\) +newest op_ts \(UTC\) +lag +runs +events", out, re.M)
    assert re.search(r"^QASOURCE\.TCUSTMER +1 +applied +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +2024-03-01 09:00:21 ", out, re.M), out
    assert main(["status", "--target", str(target), "--json"]) == 0
    assert [r["source_table"] for r in json.loads(capsys.readouterr().out)] == ["QASOURCE.TCUSTMER", "QASOURCE.TCUSTORD"]
    assert main(["doctor", "--target", str(target)]) == 0
    assert "the ledger and the tables agree" in capsys.readouterr().out
    assert main(["maintain", "--target", str(target), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^table +done +files +rewritten +size \(MiB\) +vacuumed +tombstones expired +version +seconds", out, re.M), out
    assert re.search(r"^QASOURCE\.TCUSTORD +compacted +\d+ -> \d+ ", out, re.M), out
