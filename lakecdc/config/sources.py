""":class:`~lakecdc.config.settings.Settings` from where users write them.

One place turns each source into settings, through the fields' own parsers
(:data:`lakecdc.config.settings.PARSERS`), so a value means the same and a mistake reads the same
wherever it was written, with where it was written:

* keyword arguments (:func:`lakecdc.apply`, :func:`lakecdc.stream`): :meth:`Settings.build`;
  ``pk_update 'x': use abend, update, delete-insert``;
* the CLI's flags over a ``--config`` YAML file (:func:`from_cli`): ``--pk-update 'x': ...``,
  ``apply.yaml:3: pk_update: 'x': use ...``;
* a job file's settings (:func:`from_job`): ``job.yaml:12: tables.pk_update.S.T: 'x': use ...``;
* a data contract's ``lakecdc.*`` custom properties (:func:`declared`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lakecdc.config import values as V
from lakecdc.config.settings import EVERY_TABLE, PARSERS, Settings
from lakecdc.config.values import BadValue, parse_sequence_by
from lakecdc.config.where import Where
from lakecdc.errors import ConfigError

#: Settings kept per table (``{table: value}``): a later source adds to an earlier one's tables.
PER_TABLE = frozenset({
    "options", "keys", "pk_update", "tombstone_retention", "sequence_by", "column_list", "except_column_list",
    "stored_as_scd_type", "track_history_column_list", "track_history_except_column_list", "storage_options",
    "table_paths",
})


def parse(name: str, value: Any, *, flag: str | None = None, where: Where | None = None,
          at: tuple[str, ...] = ()) -> Any:
    """``value`` of setting ``name`` in the form :class:`Settings` keeps, or a :class:`ConfigError`
    worded for where it came from: a ``flag``, a YAML key (``where``, ``at``) or a keyword."""
    try:
        return PARSERS[name](value, name)
    except BadValue as exc:
        if where is not None:
            table = (exc.table,) if exc.table is not None and isinstance(value, Mapping) else ()
            raise where.error((*at, *table), exc.detail) from None
        if flag is not None:
            raise exc.flag(flag) from None
        raise


def layered(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Parsed settings, each layer over the ones before: a per-table setting's tables are added
    to (a table named again takes the later value), any other setting is replaced."""
    out: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if name in PER_TABLE and isinstance(out.get(name), dict):
                out[name] = {**out[name], **value}
            else:
                out[name] = value
    return out


# -- YAML: --config files and job files -------------------------------------------------------


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def read_yaml(path: str | Path, what: str = "a mapping of settings") -> tuple[dict[str, Any], Where]:
    """A YAML file's top-level mapping and the lines of its keys (for errors). ``${NAME}``
    stands for the environment variable ``NAME``, ``${NAME:-default}`` the same with a default
    for when it is unset or empty (one file for dev and prod targets); comments are left as they are."""
    import yaml

    text = _substituted(str(path), Path(path).read_text())
    where = Where(str(path), text)
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise where.error((), f"expected {what} at the top level")
    return data, where


def _substituted(path: str, text: str) -> str:
    """``text`` with each ``${NAME}`` / ``${NAME:-default}`` outside comments replaced by the
    environment variable's value (or the default); an unset variable without one is an error
    naming the file, the line and the variable."""

    def value(m: re.Match[str], number: int) -> str:
        name, default = m.group(1), m.group(2)
        found = os.environ.get(name)
        if found is None or (found == "" and default is not None):
            if default is None:
                raise ConfigError(f"{path}:{number}: ${{{name}}}: the environment variable {name} is not set "
                                  f"(set it, or give a default: ${{{name}:-DEFAULT}})")
            return default
        return found

    lines = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        cut = _comment_start(line)
        lines.append(_VARIABLE.sub(lambda m, n=number: value(m, n), line[:cut]) + line[cut:])  # type: ignore[misc]
    return "".join(lines)


def _comment_start(line: str) -> int:
    """Where ``line``'s YAML comment starts (a ``#`` at the start or after a blank, outside
    quotes), or its length."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"" and (i == 0 or line[i - 1] in " \t:[{,"):  # (an apostrophe inside a word is text)
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return len(line)


def from_config(path: str | Path | None) -> dict[str, Any]:
    """The settings of a ``--config`` YAML file (keys: the settings' names), parsed."""
    if not path:
        return {}
    data, where = read_yaml(path)
    known = [n for n in Settings.names() if n != "reapply"]
    out: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            raise where.error((str(name),), f"unknown setting; the settings are {', '.join(known)}")
        out[name] = parse(name, value, where=where, at=(name,))
    return out


#: A job file's settings: (section, key) -> setting. A key at the top sets a per-table setting's
#: value for every table; the same key under ``tables:`` sets it per table, over that.
JOB_KEYS: dict[tuple[str, ...], str] = {
    ("pk_update",): "pk_update", ("tombstone_retention",): "tombstone_retention",
    ("sequence_by",): "sequence_by", ("apply_as_truncates",): "apply_as_truncates",
    ("complete_transactions",): "complete_transactions", ("engine",): "engine", ("contracts",): "contracts",
    ("min_file_age",): "min_file_age", ("change_data_feed",): "change_data_feed",
    ("parallel_tables",): "parallel_tables",
    ("tables", "include"): "include_tables", ("tables", "exclude"): "exclude_tables", ("tables", "keys"): "keys",
    ("tables", "column_list"): "column_list", ("tables", "except_column_list"): "except_column_list",
    ("tables", "stored_as_scd_type"): "stored_as_scd_type",
    ("tables", "track_history_column_list"): "track_history_column_list",
    ("tables", "track_history_except_column_list"): "track_history_except_column_list",
    ("tables", "paths"): "table_paths", ("tables", "pk_update"): "pk_update",
    ("tables", "tombstone_retention"): "tombstone_retention", ("tables", "sequence_by"): "sequence_by",
}

#: Job keys whose value is ``{TABLE: [COLUMN, ...]}`` and nothing else.
_TABLE_LISTS = {"keys", "column_list", "except_column_list", "track_history_column_list",
                "track_history_except_column_list"}


def from_job(data: Mapping[str, Any], where: Where) -> dict[str, Any]:
    """The settings of a job file (:mod:`lakecdc.jobs`: its top-level keys and ``tables:``), parsed;
    a mistake names the file, the line and the key."""
    layers: list[dict[str, Any]] = [{}, {}]  # job-wide first, per table over it
    for at, name in JOB_KEYS.items():
        section = data.get(at[0]) if len(at) > 1 else data
        if not isinstance(section, Mapping) or section.get(at[-1]) is None:
            continue
        value = section[at[-1]]
        if len(at) > 1 and at[-1] in _TABLE_LISTS and (
                not isinstance(value, dict) or not all(isinstance(v, list) and v for v in value.values())):
            raise where.error(at, "expected {TABLE: [COLUMN, ...]}")
        if len(at) > 1 and name in ("pk_update", "tombstone_retention", "sequence_by", "table_paths"):
            if not isinstance(value, dict):
                raise where.error(at, "expected {TABLE: VALUE}")
            value = {str(t): v for t, v in value.items() if t != EVERY_TABLE}
        layers[len(at) > 1][name] = parse(name, value, where=where, at=at)
    return layered(*layers)


#: The settings a data contract may give its table, as ``customProperties`` (``lakecdc.<name>``).
DECLARED = ("lakecdc.pk_update", "lakecdc.tombstone_retention", "lakecdc.target", "lakecdc.sequence_by")


def declared(prop: str, value: Any, where: Where, at: tuple[str, ...]) -> tuple[str, Any]:
    """A data contract's ``lakecdc.<setting>`` custom property (one of :data:`DECLARED`) as
    ``(setting, value)``; ``at``: the property's value in the file, for errors."""
    name = prop.removeprefix("lakecdc.")
    try:
        if name == "sequence_by":
            return name, parse_sequence_by(value if isinstance(value, list) else str(value or ""), what=prop)
        if name == "target":
            if not value:
                raise where.error(at, "expected the table's path")
            return name, str(value)
        if name == "pk_update":
            return name, V.pk_update(value, prop)
        return name, V.duration(value, prop)
    except BadValue as exc:
        raise where.error(at, exc.detail) from None


# -- the CLI's flags ---------------------------------------------------------------------------


def pairs(values: Sequence[str], flag: str, *, optional_table: bool = False, split: bool = True,
          last: bool = False) -> dict[str, Any]:
    """``TABLE=A,B`` flag values as ``{TABLE: ["A", "B"]}`` (``optional_table``: a value without
    ``TABLE=`` is every table's, ``"*"``; ``split=False``: the text after ``=`` as it is; ``last``:
    the table is what stands before the last ``=``)."""
    out: dict[str, Any] = {}
    for v in values:
        table, sep, rest = v.rpartition("=") if last else v.partition("=")
        if not sep and optional_table:
            table, rest = EVERY_TABLE, v
        items = [c.strip() for c in rest.split(",") if c.strip()]
        if (not sep and not optional_table) or not table.strip() or not items:
            form = "[TABLE=]" if optional_table else "TABLE="
            raise ConfigError(f"{flag} {v!r}: expected {form}{'NAME=VALUE' if not split else 'COL[,COL...]'}")
        out[table.strip()] = items if split else rest
    return out


def options(values: Sequence[str]) -> dict[str, str]:
    """``--option NAME=VALUE`` flags as format options."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--option {v!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


def _table_names(pairs_: Sequence[str], schema: str | None) -> Any:
    out: dict[str, Any] = {}
    for pair in pairs_:
        table, sep, name = pair.partition("=")
        if not sep or not table.strip() or not name.strip():
            raise ConfigError(f"--table-name {pair!r}: expected TABLE=CATALOG_TABLE (or TABLE=CATALOG_TABLE@LOCATION)")
        catalog_table, at, location = name.partition("@")
        out[table.strip()] = (catalog_table.strip(), location.strip()) if at else catalog_table.strip()
    if schema and out:
        raise ConfigError("--catalog-schema and --table-name: give one of them (per-table names, or one schema)")
    return schema or out or None


#: Each settings flag: (attribute of the parsed arguments, setting, the flag's value -> the
#: setting's value as given; None: the flag was not given).
FLAGS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("key", "keys", lambda v: pairs(v, "--key") or None),
    ("pk_update", "pk_update", lambda v: v),
    ("option", "options", lambda v: options(v) or None),
    ("column_list", "column_list", lambda v: pairs(v, "--column-list") or None),
    ("except_column_list", "except_column_list", lambda v: pairs(v, "--except-column-list") or None),
    ("ignore_truncates", "apply_as_truncates", lambda v: False if v else None),
    ("complete_transactions", "complete_transactions", lambda v: True if v else None),
    ("tombstone_retention", "tombstone_retention", lambda v: v),
    ("scd2", "stored_as_scd_type", lambda v: {t.strip(): 2 for x in v for t in x.split(",") if t.strip()} or None),
    ("track_history", "track_history_column_list",
     lambda v: pairs(v, "--track-history", optional_table=True, last=True) or None),
    ("track_history_except", "track_history_except_column_list",
     lambda v: pairs(v, "--track-history-except", optional_table=True, last=True) or None),
    ("change_data_feed", "change_data_feed",
     lambda v: None if v is None else [t.strip() for t in v.split(",") if t.strip()]),
    ("sequence_by", "sequence_by",
     lambda v: pairs(v, "--sequence-by", optional_table=True, split=False) or None),
    ("parallel_tables", "parallel_tables", lambda v: v),
    ("contract", "contracts", lambda v: v),
    ("engine", "engine", lambda v: v),
    ("wait", "wait", lambda v: v),
    ("min_file_age", "min_file_age", lambda v: v),
    ("reapply", "reapply", lambda v: v or None),
)


def from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags of ``args`` give (those not given are left out), parsed."""
    out: dict[str, Any] = {}
    for attr, name, read in FLAGS:
        if not hasattr(args, attr):
            continue
        value = read(getattr(args, attr))
        if value is not None:
            out[name] = parse(name, value, flag="--" + attr.replace("_", "-"))
    if getattr(args, "table_name", None) or getattr(args, "catalog_schema", None):
        out["table_names"] = parse("table_names", _table_names(args.table_name, args.catalog_schema),
                                   flag="--table-name")
    return out


def from_cli(args: argparse.Namespace, gg_properties: Callable[[str, str | None], tuple[str, dict[str, str]]]) -> Settings:
    """The settings of ``lakecdc apply`` / ``stream``: the flags over ``--config``'s, over the
    format and options of ``--gg-properties`` (read by ``gg_properties``)."""
    config = from_config(args.config)
    flags = from_flags(args)
    fmt = args.format
    gg: dict[str, Any] = {}
    if args.gg_properties:
        gg_format, gg_options = gg_properties(args.gg_properties, args.gg_handler)
        if fmt and fmt != gg_format:
            raise ConfigError(f"--format {fmt} contradicts {args.gg_properties}, whose handler writes {gg_format}")
        fmt, gg = gg_format, {"options": gg_options}
    fmt = fmt or config.get("format")
    if not fmt:
        from lakecdc.decode import DECODERS

        raise ConfigError("say which format the files are in: --format NAME, or --gg-properties FILE; the "
                          f"formats: {', '.join(sorted(DECODERS))}")
    if isinstance(config.get("table_names"), str) and flags.get("table_names"):
        raise ConfigError("--catalog-schema and --table-name: give one of them (per-table names, or one schema)")
    merged = layered(gg, config, flags)
    if isinstance(config.get("table_names"), dict) and isinstance(flags.get("table_names"), dict):
        merged["table_names"] = {**config["table_names"], **flags["table_names"]}
    return Settings.build(**{**merged, "format": fmt})
