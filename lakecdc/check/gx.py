"""Great Expectations plumbing for :mod:`lakecdc.check.quality`: suites, contexts, checkpoints and Data Docs.

A :class:`Suite` is a GX expectation suite plus, per expectation (by its description, the check's
name), the ODCS limits its metric is judged by. Each expectation's severity is GX's own field
(``severity``: ``critical`` for lakecdc's ``fail``, ``warning`` for ``warn``).

:class:`Validator` runs each suite through a GX **Checkpoint** (``lakecdc <suite>``) holding one
ValidationDefinition, in one GX context: an in-memory one; with ``docs_root`` a file context under
``<target>/_lakecdc/gx/`` whose validation results become Data Docs HTML in
``<target>/_lakecdc/data_docs/`` (:meth:`Validator.build_docs`; only the newest :data:`DOCS_KEEP`
results of each suite are kept, so they do not grow without bound); or with ``gx_project`` an
existing GX project (its file context), to which lakecdc's data source, suites, validation
definitions and checkpoints are added and where nothing of its own is removed. The checkpoint's
actions run after each validation: those a checkpoint of that name already has in the project
(attach a ``SlackNotificationAction`` there once and every ``lakecdc check`` notifies), plus the
``actions`` given to the validator.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lakecdc.check.rules import Rule, Severity, meets
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SITE = "lakecdc"
#: lakecdc's severities as GX's ``FailureSeverity`` values, and back
GX_SEVERITY = {"fail": "critical", "warn": "warning"}
FROM_GX_SEVERITY: dict[str, Severity] = {"critical": "fail", "warning": "warn", "info": "warn"}
#: the counts only (no unexpected values: each would cost a Spark job), then samples of failures
COUNTS = {"result_format": "BASIC", "partial_unexpected_count": 0}
SAMPLES = {"result_format": "BASIC", "partial_unexpected_count": 5}
#: validation results kept per suite for the Data Docs (older ones and their pages are removed)
DOCS_KEEP = 30
DOCS_DIR = "data_docs"


def load() -> None:
    """Import Great Expectations, or say why it cannot be.

    GX imports ``pyspark.sql.connect``; from PySpark 4.3 that module ends the process with exit
    status 0 when Spark Connect's client packages are missing and the program has no main file
    (``python -c``, some schedulers and test runners). That is turned into an ImportError here.
    """
    import sys

    if "great_expectations" in sys.modules:
        return
    try:
        import great_expectations  # noqa: F401
    except SystemExit:
        for name in [n for n in sys.modules if n == "great_expectations" or n.startswith("great_expectations.")]:
            del sys.modules[name]
        raise ImportError("Great Expectations could not be imported: it imports pyspark.sql.connect, which on this "
                          "PySpark needs the Spark Connect client's packages (pandas, pyarrow, grpcio, grpcio-status, "
                          "googleapis-common-protos); install them with: pip install 'lakecdc[quality]'") from None


@dataclass(frozen=True)
class Spec:
    """How lakecdc judges one expectation: its severity (also set on the expectation), and the ODCS
    limits of its metric (unexpected rows, or the observed value for ``metric="observed"``); none:
    GX's own verdict."""

    severity: Severity
    limits: tuple[tuple[str, Any], ...] = ()
    unit: Literal["rows", "percent"] = "rows"
    metric: Literal["unexpected", "observed"] = "unexpected"

    @property
    def judged(self) -> bool:
        return bool(self.limits) or self.unit == "percent" or self.metric == "observed"


@dataclass
class Suite:
    """A GX expectation suite and each expectation's :class:`Spec`, by check name; ``broken``: the
    checks that could not become an expectation (a ``custom`` rule naming an unknown expectation or
    wrong arguments), with GX's reason."""

    name: str
    expectations: list[Any] = field(default_factory=list)
    specs: dict[str, Spec] = field(default_factory=dict)
    broken: list[tuple[str, Severity, str]] = field(default_factory=list)

    def add(self, expectation: Any, check: str, spec: Spec | Severity) -> None:
        if check in self.specs:
            raise ValueError(f"check {check!r} is already in suite {self.name!r}")
        spec = Spec(spec) if isinstance(spec, str) else spec
        expectation.description = check
        from great_expectations.expectations.metadata_types import FailureSeverity

        expectation.severity = FailureSeverity(GX_SEVERITY[spec.severity])
        self.expectations.append(expectation)
        self.specs[check] = spec

    def add_rule(self, rule: Rule) -> None:
        """A contract :class:`Rule` as its expectation (``sql`` and ``unsupported`` rules are not GX's)."""
        load()
        import great_expectations.expectations as gxe

        if rule.kind == "expectation":
            self._add_custom(rule)
            return
        options = dict(rule.options)
        kinds: dict[str, Any] = {
            "between": gxe.ExpectColumnValuesToBeBetween, "pattern": gxe.ExpectColumnValuesToMatchRegex,
            "length": gxe.ExpectColumnValueLengthsToBeBetween, "in_set": gxe.ExpectColumnValuesToBeInSet,
            "not_null": gxe.ExpectColumnValuesToNotBeNull, "unique": gxe.ExpectColumnValuesToBeUnique,
            "compound_unique": gxe.ExpectCompoundColumnsToBeUnique, "row_count": gxe.ExpectTableRowCountToBeBetween,
        }
        if rule.kind == "in_set":  # NULLs are not values: required / nullValues judge them
            options["value_set"] = [v for v in options["value_set"] if v is not None]
        if rule.kind == "compound_unique":
            options["column_list"] = list(options["column_list"])
        if rule.kind == "row_count":
            options["min_value"] = 0
        if rule.column is not None:
            options["column"] = rule.column
        spec = Spec(rule.severity, rule.limits, rule.unit, "observed" if rule.kind == "row_count" else "unexpected")
        self.add(kinds[rule.kind](**options), rule.check, spec)

    def _add_custom(self, rule: Rule) -> None:
        """A ``custom`` rule's expectation, by name, with its kwargs (a property's rule gets its column)."""
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
        from great_expectations.expectations.registry import get_expectation_impl

        assert rule.expectation is not None
        kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in rule.options}
        try:
            impl = get_expectation_impl(rule.expectation)
            if rule.column is not None and "column" not in kwargs and "column" in getattr(impl, "__fields__", {}):
                kwargs["column"] = rule.column
            expectation = ExpectationConfiguration(type=rule.expectation, kwargs=kwargs).to_domain_obj()
        except Exception as exc:  # GX raises its own errors for an unknown name or wrong arguments
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            self.broken.append((rule.check, rule.severity, f"not checked: {rule.where}: {first}"))
            return
        self.add(expectation, rule.check, rule.severity)


@dataclass(frozen=True)
class Outcome:
    """One expectation's result, judged."""

    check: str
    severity: Severity
    success: bool
    unexpected: int | None
    details: str


def _quiet() -> None:
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


def project_root(gx_project: str | os.PathLike[str]) -> Path:
    """An existing GX project's root: the directory holding ``gx/`` (the ``gx/`` directory itself,
    the one holding ``great_expectations.yml``, is accepted too)."""
    path = Path(gx_project)
    if (path / "great_expectations.yml").is_file():
        return path.parent
    if (path / "gx" / "great_expectations.yml").is_file():
        return path
    raise ConfigError(f"GX project {str(path)!r} is not a Great Expectations project: neither it nor its gx/ "
                      "holds great_expectations.yml (create one with great_expectations.get_context(mode='file', "
                      "project_root_dir=...))")


class Validator:
    """Runs suites through GX Checkpoints in one GX context (see the module docstring): in memory;
    with ``docs_root`` (``<target>/_lakecdc``) a file context there, keeping results for the Data
    Docs; with ``gx_project`` an existing GX project. ``actions``: GX checkpoint actions (such as
    ``SlackNotificationAction``) run after each suite's validation."""

    def __init__(self, docs_root: str | Path | None = None, *, gx_project: str | os.PathLike[str] | None = None,
                 actions: Sequence[Any] = ()) -> None:
        load()
        import great_expectations as gx

        _quiet()
        self.docs_root = Path(docs_root) if docs_root is not None and gx_project is None else None
        self.gx_project = project_root(gx_project) if gx_project is not None else None
        self.actions = list(actions)
        # GX's own annotations name a context's parts as unions it narrows at run time
        self.context: Any
        if self.gx_project is not None:
            self.context = gx.get_context(mode="file", project_root_dir=str(self.gx_project))
        elif self.docs_root is None:
            self.context = gx.get_context(mode="ephemeral")
        else:
            self.context = gx.get_context(mode="file", project_root_dir=str(self.docs_root))
            sites = self.context.get_config().data_docs_sites or {}
            for other in [s for s in sites if s != SITE]:
                self.context.delete_data_docs_site(other)
            if SITE not in sites:
                self.context.add_data_docs_site(SITE, {
                    "class_name": "SiteBuilder", "show_how_to_buttons": False,
                    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                    "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                      "base_directory": f"../{DOCS_DIR}"},  # from the context's root, gx/
                })
        if self.gx_project is None:  # a project's own settings are its owner's
            with contextlib.suppress(Exception):  # cosmetic only
                self.context.variables.progress_bars = {"globally": False}
        load()
        from great_expectations.core.run_identifier import RunIdentifier

        self.run_id = RunIdentifier(run_time=dt.datetime.now(dt.timezone.utc))  # one per check, every suite
        self._suites: list[str] = []

    def run(self, df: DataFrame, suite: Suite) -> list[Outcome]:
        """Validate ``df`` with ``suite``; one judged :class:`Outcome` per expectation, in order."""
        load()
        import great_expectations as gx

        ctx = self.context
        try:
            source: Any = ctx.data_sources.get(SITE)
        except (KeyError, ValueError):
            source = ctx.data_sources.add_spark(SITE)
        try:
            asset = source.get_asset(suite.name)
        except LookupError:
            asset = source.add_dataframe_asset(suite.name)
        try:
            batch = asset.get_batch_definition("whole")
        except (KeyError, LookupError, ValueError):
            batch = asset.add_batch_definition_whole_dataframe("whole")
        # built whole, then stored once (adding to a stored suite writes the store per expectation)
        gx_suite = ctx.suites.add_or_update(gx.ExpectationSuite(name=suite.name, expectations=suite.expectations))
        definition = ctx.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite))
        checkpoint = ctx.checkpoints.add_or_update(gx.Checkpoint(
            name=f"{SITE} {suite.name}", validation_definitions=[definition], result_format=COUNTS,
            actions=self._actions(f"{SITE} {suite.name}")))
        try:
            run = checkpoint.run(batch_parameters={"dataframe": df}, run_id=self.run_id)
            result = next(iter(run.run_results.values()))
            outcomes = [_judge(r, suite.specs) for r in result.results]
            failed = [o.check for o in outcomes if not o.success and o.unexpected]
            samples = self._samples(batch, df, suite, failed) if failed else {}
        finally:
            df.unpersist()  # GX caches the batch; a long-lived session must not keep every table
        self._suites.append(suite.name)
        return [_with_sample(o, samples.get(o.check)) for o in outcomes]

    def _actions(self, name: str) -> list[Any]:
        """The actions of checkpoint ``name``: those it has in the context already (a GX project's
        own), then this validator's (one of the same name replaces the stored one)."""
        from great_expectations.exceptions import DataContextError

        try:
            stored = list(self.context.checkpoints.get(name).actions)
        except (DataContextError, KeyError, LookupError, ValueError):
            stored = []
        mine = {a.name for a in self.actions}
        return [*(a for a in stored if a.name not in mine), *self.actions]

    def _samples(self, batch: Any, df: DataFrame, suite: Suite, checks: list[str]) -> dict[str, list[Any]]:
        """A few unexpected values of each failed check: a second, unrecorded pass over only those
        expectations (the first pass counts only: collecting samples costs a Spark job each)."""
        load()
        import great_expectations as gx

        wanted = [e.copy(update={"id": None}) for e in suite.expectations if e.description in checks]
        probe = gx.ExpectationSuite(name=f"{suite.name} samples", expectations=wanted)
        result = batch.get_batch(batch_parameters={"dataframe": df}).validate(probe, result_format=SAMPLES)
        return {r.expectation_config.description: (r.result or {}).get("partial_unexpected_list") or []
                for r in result.results}

    def build_docs(self) -> Path | None:
        """Render the results of this validator's runs as Data Docs; the index page, or None."""
        if self.gx_project is not None and self._suites:
            self.context.build_data_docs()  # the project's own sites, as it configured them
            return None
        if self.docs_root is None or not self._suites:
            return None
        load()
        from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

        for suite in set(self._suites):
            self._prune(suite)
        mine = self.run_id.to_tuple()
        new: list[Any] = [k for k in self.context.validation_results_store.list_keys() if k.run_id.to_tuple() == mine]
        # only this check's pages are rendered; the index lists every result kept
        self.context.build_data_docs(site_names=[SITE], resource_identifiers=[
            *new, *(ExpectationSuiteIdentifier(name=n) for n in set(self._suites))])
        index = self.docs_root / DOCS_DIR / "index.html"
        return index if index.exists() else None

    def _prune(self, suite: str) -> None:
        """Keep the newest :data:`DOCS_KEEP` results of ``suite`` (their files and pages)."""
        assert self.docs_root is not None
        key = Path(*suite.split("."))  # GX keys a suite by its name's dotted parts
        stored = self.docs_root / "gx" / "uncommitted" / "validations" / key
        pages = self.docs_root / DOCS_DIR / "validations" / key
        runs = sorted((p for p in stored.glob("*/*") if p.is_dir()), key=lambda p: p.name)
        for old in runs[:-DOCS_KEEP]:
            run_name = old.parent.name
            shutil.rmtree(old, ignore_errors=True)
            shutil.rmtree(pages / run_name / old.name, ignore_errors=True)
            for leftover in (old.parent, pages / run_name):
                with contextlib.suppress(OSError):
                    leftover.rmdir()  # only when empty


def _judge(r: Any, specs: dict[str, Spec]) -> Outcome:
    config = r.expectation_config
    check = config.description or config.type
    spec = specs.get(check, Spec("fail"))
    severity = getattr(config, "severity", None)
    if severity is not None:  # GX's own field decides
        spec = replace(spec, severity=FROM_GX_SEVERITY.get(str(getattr(severity, "value", severity)), spec.severity))
    result = r.result or {}
    unexpected = result.get("unexpected_count")
    details = ""
    if r.exception_info and r.exception_info.get("raised_exception"):
        message = str(r.exception_info.get("exception_message") or "").splitlines()
        return Outcome(check, spec.severity, False, None, f"not checked: {message[0] if message else 'error'}")
    success = bool(r.success)
    if spec.judged:
        if spec.metric == "observed":
            value = float(result.get("observed_value") or 0)
            details = f"observed {result.get('observed_value')}"
        elif spec.unit == "percent":
            rows = int(result.get("element_count") or 0)
            value = 100.0 * int(unexpected or 0) / rows if rows else 0.0
            details = f"{value:.2f}% of {rows} rows"
        else:
            value = float(unexpected or 0)
        success = meets(value, spec.limits)
    return Outcome(check, spec.severity, success, int(unexpected) if unexpected is not None else None, details)


def _with_sample(outcome: Outcome, sample: list[Any] | None) -> Outcome:
    if not sample:
        return outcome
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in sample[:5])
    details = f"{outcome.details + '; ' if outcome.details else ''}e.g. {shown}"
    return Outcome(outcome.check, outcome.severity, outcome.success, outcome.unexpected, details)
