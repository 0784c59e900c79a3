"""Every notebook in notebooks/ runs end to end in a Jupyter kernel, on the bundled sample data,
and fails the test on any cell error.

The notebooks share one kernel, as they would share a cluster's ``spark`` in Databricks: each
starts from an empty namespace (``%reset -f``), so none can lean on another's variables, but the
Spark session (and its warm JVM) carries over. The first notebook starts the kernel and Spark
itself, which is what a fresh kernel does for every one of them; a JVM and kernel per notebook cost
CI about ten minutes on two cores."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.spark


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert {"01_quickstart.ipynb", "02_maintenance.ipynb", "03_monitoring.ipynb", "04_goldengate.ipynb",
            "05_debezium.ipynb", "06_dts.ipynb", "07_qlik.ipynb", "08_data_quality.ipynb"} <= set(names)


@pytest.fixture(scope="module")
def kernel():
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(NOTEBOOKS[0].parent))
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)


def _run(nb: nbformat.NotebookNode, km: KernelManager) -> None:
    """Run ``nb``'s cells in the shared kernel, after clearing the namespace the last one left."""
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        "%reset -f\nimport sys\nif 'matplotlib.pyplot' in sys.modules:\n    sys.modules['matplotlib.pyplot'].close('all')"))
    # no cell time limit: a slow machine is not a failure (errors are)
    client = NotebookClient(nb, km=km, timeout=None)
    try:
        client.execute()
    finally:
        if client.kc is not None:
            client.kc.stop_channels()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_end_to_end(path, kernel):
    nb = nbformat.read(path, as_version=4)
    _run(nb, kernel)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "Traceback" not in text
    if path.stem in ("02_maintenance", "03_monitoring"):  # file counts; throughput and lag: as charts
        assert [o for o in outputs if "image/png" in o.get("data", {})], "the notebook draws its charts"
    if path.stem == "01_quickstart":
        assert "QASOURCE.TCUSTORD" in text and "none (nothing new)" in text
    if path.stem == "02_maintenance":
        assert "z-ordered by ID" in text
        before, after = (int(x) for x in text.split("files: ")[-1].split()[0:3:2])
        assert before >= 10 and after == 1
    if path.stem == "03_monitoring":
        assert "QASOURCE.TCUSTMER" in text and "lag" in text
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
