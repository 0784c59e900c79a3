"""One driver for the oracle round trips of rendered formats.

A format's test renders each run of a :class:`test_property.Scenario` the way its vendor would
write it (Canal, SharePlex, GoldenGate row formatters, DTS, Qlik, ...); :func:`drive` lands
each run as a file, applies every file so far with ``lakecdc.apply`` and compares each table and
count with the oracle fed the events the messages stand for. The renderers differ; this loop does
not, so it lives here once.

    >>> drive(spark, sc, tmp_path, fmt="canal-json", render=my_renderer)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from tests.oracle import Event, Oracle, PrimaryKeyUpdateError
except ModuleNotFoundError:
    from oracle import Event, Oracle, PrimaryKeyUpdateError  # type: ignore[no-redef]


@dataclass(frozen=True)
class Rendered:
    """One run as landed: the file's content and suffix, and the events the oracle must see."""

    content: str | bytes
    suffix: str
    seen: list[Event]
    #: shown with the scenario when a test fails (defaults to the content when it is text)
    shown: str | None = None


#: ``render(indices of sc.events in this run, run number) -> Rendered``
RunRenderer = Callable[[list[int], int], Rendered]
#: ``check(run number, indices, summary)``: the format's own assertions after a good run
RunCheck = Callable[[int, list[int], Any], None]
#: ``deliver(the run's file, every run's file so far) -> what lakecdc.apply reads``: how a run
#: reaches lakecdc (default: the files themselves; e.g. a Kafka topic the run's messages went to)
Deliver = Callable[[Path, list[str]], Any]


def delivered_runs(sc: Any, max_runs: int) -> list[list[int]]:
    """The scenario's runs, those beyond ``max_runs`` delivered together as the last one (to bound
    a test's time)."""
    runs = [list(r) for r in sc.runs[: max_runs - 1]]
    if len(sc.runs) >= max_runs:
        runs.append([i for r in sc.runs[max_runs - 1 :] for i in r])
    return runs


def drive(
    spark: Any, sc: Any, workdir: Path, *, fmt: str, render: RunRenderer, options: Mapping[str, str] | None = None,
    max_runs: int = 3, check: RunCheck | None = None, deliver: Deliver | None = None,
) -> None:
    """Apply each rendered run of ``sc`` (all files so far) and compare tables and counts with the
    oracle after every run. With ``pk_update='abend'`` a run holding a primary-key update must
    fail naming it and commit nothing (and the drive ends there)."""
    import pytest
    from hypothesis import note
    from hypothesis.control import currently_in_test_context

    import lakecdc

    try:
        from tests.test_property import (
            SUMMARY_FIELDS,
            assert_counts,
            assert_names_a_pk_update,
            assert_targets_match,
            delta_tables_under,
            describe,
        )
    except ModuleNotFoundError:
        from test_property import (  # type: ignore[no-redef]
            SUMMARY_FIELDS,
            assert_counts,
            assert_names_a_pk_update,
            assert_targets_match,
            delta_tables_under,
            describe,
        )

    say = note if currently_in_test_context() else print
    say(describe(sc))
    say(f"format={fmt} options={dict(options or {})}")
    target, landing = workdir / "target", workdir / "runs"
    landing.mkdir(parents=True, exist_ok=True)
    oracle = Oracle()
    targets: dict[str, str] = {}
    applied: list[str] = []
    kwargs = dict(format=fmt, keys=sc.keys(), pk_update=sc.pk_update, options=dict(options or {}), spark=spark)
    for number, run in enumerate(delivered_runs(sc, max_runs), start=1):
        out = render(run, number)
        path = landing / f"run-{number:04d}{out.suffix}"
        if isinstance(out.content, bytes):
            path.write_bytes(out.content)
        else:
            path.write_text(out.content, encoding="utf-8")
        shown = out.shown if out.shown is not None else out.content if isinstance(out.content, str) else None
        say(f"run {number}: {shown if shown is not None else [(e.op, e.pos, e.before, e.after) for e in out.seen]}")
        applied.append(str(path))
        inputs = deliver(path, list(applied)) if deliver is not None else list(applied)
        try:
            expected = oracle.apply_run(out.seen, pk_update=sc.pk_update)
        except PrimaryKeyUpdateError:
            committed = delta_tables_under(target)
            with pytest.raises(lakecdc.PrimaryKeyUpdateError) as info:
                lakecdc.apply(inputs, str(target), **kwargs)
            assert_names_a_pk_update(str(info.value), out.seen)
            assert delta_tables_under(target) == committed, f"run {number} abended but committed something"
            assert_targets_match(oracle, targets, f"the failed run {number}")
            return
        summary = lakecdc.apply(inputs, str(target), **kwargs)
        actual = {t.source_table: {f: getattr(t, f, None) for f in SUMMARY_FIELDS} for t in summary.tables}
        targets.update({table: str(entry["target"]) for table, entry in actual.items()})
        assert_counts(number, sc, out.seen, expected, actual)
        assert_targets_match(oracle, targets, f"run {number}")
        if check is not None:
            check(number, run, summary)


__all__ = ["Deliver", "Rendered", "RunCheck", "RunRenderer", "delivered_runs", "drive"]
