"""The notebooks of notebooks/: committed as notebooks/make_notebooks.py writes them, with the
outputs of a run (so GitHub shows their tables and charts), and still running end to end.

The committed files are checked as they are (no Spark): their cells are make_notebooks.py's, every
code cell but the parameters cell has outputs, none is an error, the charts are images and no
output shows a path of the machine that ran them. Then every notebook runs in a Jupyter kernel on
the bundled sample data, with make_notebooks.py's own machinery (one kernel for all, as a cluster's
``spark`` is shared on Databricks; each notebook from an empty namespace), in a scratch copy of the
repository's inputs, and fails the test on any cell error.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from lakecdc.lake.summary import RunSummary, TableSummary

NOTEBOOK_DIR = Path(__file__).parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

_spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOK_DIR / "make_notebooks.py")
assert _spec is not None and _spec.loader is not None
make_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_notebooks)

#: Cells the test appends to a notebook (not saved): checks on the variables its cells left.
CHECK_CELLS = {
    # the chart's events per second divide by each run's time once, though every table of a run
    # has a row (with the run's seconds) in _lakecdc_runs
    "03_monitoring": """run_seconds = {r["run_id"]: r["seconds"] for r in runs.select("run_id", "seconds").distinct().collect()}
assert len(run_seconds) == len(per_run) == 3, (run_seconds, per_run)
assert all(abs(run_seconds[r.run_id] - r.seconds) < 1e-6 for r in per_run.itertuples()), (run_seconds, per_run)
assert runs.count() == 6, "two tables per run: a sum over the rows would count each run's time twice"
print("each run's time counted once")""",
}

#: An absolute path of the machine that ran a notebook: a temporary or a checkout directory.
MACHINE_PATH = re.compile(r"(?<![\w.])/(tmp|work|home|Users|private|var/folders)/")


def _code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code"]


def _outputs(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [o for cell in _code_cells(nb) for o in cell.get("outputs", [])]


def _text(nb: nbformat.NotebookNode, *, streams: bool = True) -> str:
    """What a reader sees as text: printed streams, and the plain text of tables and results."""
    parts = []
    for o in _outputs(nb):
        if o.get("output_type") == "stream" and streams:
            parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
        parts.append(o.get("data", {}).get("text/html", ""))
    return "\n".join(parts)


def _images(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [o for o in _outputs(nb) if "image/png" in o.get("data", {})]


def test_there_are_notebooks():
    """The eight notebooks are in notebooks/, and they are the ones make_notebooks.py writes."""
    names = {p.name for p in NOTEBOOKS}
    assert {"01_quickstart.ipynb", "02_maintenance.ipynb", "03_monitoring.ipynb", "04_goldengate.ipynb",
            "05_debezium.ipynb", "06_dts.ipynb", "07_qlik.ipynb", "08_data_quality.ipynb"} <= names
    assert names == set(make_notebooks.NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_what_make_notebooks_writes(path):
    """Each committed notebook's cells (kind, source, tags) are make_notebooks.py's: a cell edited in
    the .ipynb only, or a make_notebooks.py change not written out, fails."""
    committed = nbformat.read(path, as_version=4)
    built = make_notebooks.build(path.name)
    assert [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in committed.cells] == \
        [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in built.cells]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_has_its_outputs(path):
    """A committed notebook shows what a run gives: every code cell but the parameters cell has
    outputs and an execution count, no output is an error or a traceback, the charts are PNG images,
    and no output names a path of the machine that ran it (a temporary or checkout directory)."""
    nb = nbformat.read(path, as_version=4)
    cells = _code_cells(nb)
    parameters = [c for c in cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1 and cells[0] is parameters[0], "the first code cell holds the parameters"
    empty = [c.id for c in cells[1:] if not c.get("outputs")]
    assert not empty, f"code cells without outputs: {empty} (run notebooks/make_notebooks.py)"
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not [o for o in _outputs(nb) if o.get("output_type") == "error"]
    text = _text(nb)
    assert "Traceback" not in text
    assert not MACHINE_PATH.findall(text), sorted(set(m.group(0) for m in MACHINE_PATH.finditer(text)))
    if path.stem in ("02_maintenance", "03_monitoring"):
        assert _images(nb), "the charts are saved as images"
    if path.stem == "01_quickstart":  # the tables are shown as tables, not printed text
        assert any("text/html" in o.get("data", {}) and "CUST_CODE" in o.data["text/html"] for o in _outputs(nb))


def test_a_summary_shows_paths_as_short_as_the_working_directory_allows(tmp_path, monkeypatch):
    """A run summary, as a notebook prints it, names the quarantine and the input files relative to
    the working directory when they lie under it or beside it (the notebooks' ``../jobs/...`` landing,
    their ``lakecdc-demo/...`` target), so their outputs show no path of the machine that ran them;
    a path elsewhere, or a URL, is shown whole."""
    work = tmp_path / "repo" / "notebooks"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    landing = tmp_path / "repo" / "jobs" / "landing"
    elsewhere = "/srv/landing/c.json"
    summary = RunSummary(
        target=str(work / "lake"), format="ogg-json", runs=(1,), files=3,
        tables=(TableSummary(source_table="S.T", target=str(work / "lake" / "S.T"), events=2, quarantined=1),),
        quarantine=str(work / "lake" / "_quarantine"),
        file_accounts={str(landing / "a.json"): {"applied": 1, "quarantined": 1},
                       elsewhere: {"duplicate_or_late": 1}, "s3://bucket/b.json": {"duplicate_or_late": 1}},
    )
    text = summary.render()
    assert "quarantined records: lake/_quarantine" in text
    assert "  ../jobs/landing/a.json: 1 applied, 1 quarantined" in text
    assert f"  {elsewhere}: 1 duplicate or late" in text and "  s3://bucket/b.json: 1 duplicate or late" in text
    assert str(tmp_path) not in text


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One kernel for every notebook, started in a scratch copy of the repository's inputs."""
    km = make_notebooks.start_kernel(make_notebooks.scratch_copy(tmp_path_factory.mktemp("notebooks")))
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)


@pytest.mark.spark
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_end_to_end(path, kernel):
    """The notebook runs without an error on a plain local session, and says what it shows: the
    tables applied, nothing new on a second pass, the charts drawn, the family's point made."""
    nb = nbformat.read(path, as_version=4)
    if path.stem in CHECK_CELLS:
        nb.cells.append(nbformat.v4.new_code_cell(CHECK_CELLS[path.stem]))
    make_notebooks.run(nb, kernel)
    assert not [o for o in _outputs(nb) if o.get("output_type") == "error"]
    text = _text(nb)
    assert "Traceback" not in text
    # (a library's warnings on stderr name where it is installed: PySpark 4.3 warns about pandas 3)
    shown = "\n".join(o.get("text", "") if o.get("output_type") == "stream" else "" for o in _outputs(nb)
                      if not (o.get("name") == "stderr" and "Warning" in o.get("text", "")))
    assert not MACHINE_PATH.findall(shown + _text(nb, streams=False)), "outputs show relative paths only"
    if path.stem in ("02_maintenance", "03_monitoring"):  # file counts; throughput and lag: as charts
        assert _images(nb), "the notebook draws its charts"
    if path.stem == "01_quickstart":
        assert "QASOURCE.TCUSTORD" in text and "none (nothing new)" in text
    if path.stem == "02_maintenance":
        assert "z-ordered by ID" in text
        before, after = (int(x) for x in text.split("files: ")[-1].split()[0:3:2])
        assert before >= 10 and after == 1
    if path.stem == "03_monitoring":  # one run per sample file, each run's seconds counted once
        assert "QASOURCE.TCUSTMER" in text and "lag" in text
        assert "events_per_second" in text and text.count("-> run(s) (") == 3
        assert "each run's time counted once" in text
    if path.stem == "04_goldengate":  # the key change joined back and completed from the old row
        assert "ogg-delimited" in text and "customer 30 kept TIER: bronze" in text and "none (nothing new)" in text
    if path.stem == "05_debezium":  # a transaction cut by a file waits, then applies whole
        assert "held: {'public.customers': 1" in text and "customer 2 kept notes: VIP since 2019" in text
    if path.stem == "06_dts":
        assert "['SALES.INVOICES', 'shop.customers', 'shop.orders', 'shop.payments']" in text
        assert "tables in one target: 4 - nothing new on the second pass" in text
    if path.stem == "07_qlik":
        assert "columnMask 05" in text and "the columnMask kept Bob's TIER: silver" in text
    if path.stem == "08_data_quality":
        assert "FAIL QASOURCE.TCUSTMER: key CUST_CODE unique (2 unexpected)" in text
        assert "blocked by data quality since" in text
