"""The decoder contract, for every registered format: what becomes of an empty file, a record that
is no row change, an unknown operation, a broken record, a missing key, a truncate and a duplicate
(``cases.py`` writes them), told per file by one ``lakecdc.apply`` of all of them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc

try:
    from tests.decode.contract.cases import CASES, KEY, UNKNOWN_OPS, table_of, writers
    from tests.decode.helpers import FORMATS
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.contract.cases import CASES, KEY, UNKNOWN_OPS, table_of, writers  # type: ignore[no-redef]
    from decode.helpers import FORMATS  # type: ignore[no-redef]

WRITERS = writers()


def test_every_registered_format_has_contract_cases():
    """A format joins the registry with its contract cases: a writer for each of the seven cases or
    the reason it cannot express one; and no writer names a format that is not registered."""
    assert sorted(set(FORMATS) - set(WRITERS)) == [], "formats without contract cases (tests/decode/contract/cases.py)"
    assert sorted(set(WRITERS) - set(FORMATS)) == [], "contract cases for formats not registered"
    for name, writer in WRITERS.items():
        assert set(writer.cannot) <= set(CASES) - {"empty", "broken", "duplicate"}, (name, writer.cannot)
        assert all(len(reason) > 20 for reason in writer.cannot.values()), (name, writer.cannot)


@pytest.mark.spark
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_case_is_accounted_for_per_file(spark, tmp_path, fmt):
    """One apply over every case file of ``fmt``: each file's records become exactly what the case
    says (applied, quarantined, skipped with its kind, duplicate/late), they add up to the records
    written, no other file is reported, and no file counts as unreadable. A quarantined record is
    there for its case's reason: the unknown operation named, the key column named."""
    if fmt not in WRITERS:
        pytest.fail(f"{fmt} has no contract cases in tests/decode/contract/cases.py")
    written, options = WRITERS[fmt].write_all(tmp_path / "landing", tmp_path / "scratch")
    keys = {table_of(case): [KEY] for case in CASES}
    summary = lakecdc.apply(tmp_path / "landing", tmp_path / "lake", format=fmt, options=options, keys=keys,
                            spark=spark)
    accounts = {Path(f).name: acc for f, acc in summary.file_accounts.items()}
    got = {w.case: accounts.get(w.path.name, {}) for w in written}
    assert got == {w.case: w.expected for w in written}
    assert {name: sum(acc.values()) for name, acc in accounts.items()} == {
        w.path.name: w.records for w in written if w.records}
    assert summary.unreadable_files == ()
    assert summary.ok, summary.render()
    reasons = {Path(r["file"]).stem: r["reason"] for r in pa.table(DeltaTable(summary.quarantine).to_pyarrow_table()).to_pylist()}
    assert set(reasons) == {w.case for w in written if "quarantined" in w.expected}, reasons
    if "unknown-op" in reasons:
        assert any(op in reasons["unknown-op"] for op in UNKNOWN_OPS), reasons["unknown-op"]
    assert f"'{KEY}'" in reasons["missing-key"], reasons["missing-key"]
