"""A data contract's accepted values, ranges and quality rules (ODCS v3), as :class:`Rule` objects.

What each ODCS field becomes is described in :mod:`lakecdc.check.contracts`; this module reads them
from the parsed YAML and points every mistake at its line. It knows nothing of Great
Expectations: a rule names its expectation by ``kind`` and carries the expectation's arguments.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import types as T

from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from lakecdc.config.where import Where

Severity = Literal["fail", "warn"]
RuleKind = Literal["between", "pattern", "length", "in_set", "not_null", "unique", "compound_unique", "row_count",
                   "sql", "expectation", "unsupported"]


@dataclass(frozen=True)
class Rule:
    """One accepted-values, range or quality rule of a contract, as :mod:`lakecdc.check.quality` checks it.

    ``options`` are the Great Expectations expectation's own arguments (``min_value``,
    ``value_set``, ``regex``, ...); ``limits`` the ODCS operators the rule's metric (rows breaking
    it, the table's row count, or a ``sql`` rule's value) is compared with, ``()`` meaning "must be 0".
    A ``sql`` rule's ``options`` hold its ``query``; an ``expectation`` rule (``type: custom``,
    ``engine: greatExpectations``) names its GX expectation in ``expectation`` and its arguments in
    ``options``; an ``unsupported`` rule is reported, with the reason in ``options``' ``why``.
    """

    check: str
    kind: RuleKind
    severity: Severity
    column: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    limits: tuple[tuple[str, Any], ...] = ()
    unit: Literal["rows", "percent"] = "rows"
    #: ``file:line`` of the rule in its contract
    where: str = ""
    #: a ``custom`` rule's GX expectation (``expect_column_values_to_be_between``)
    expectation: str | None = None


SEVERITIES: dict[str, Severity] = {
    "error": "fail", "fail": "fail", "critical": "fail",
    "warning": "warn", "warn": "warn", "info": "warn",
}
OPERATORS = ("mustBe", "mustNotBe", "mustBeGreaterThan", "mustBeGreaterOrEqualTo", "mustBeLessThan",
             "mustBeLessOrEqualTo", "mustBeBetween", "mustNotBeBetween")
_OPERATOR_TEXT = {"mustBe": "=", "mustNotBe": "!=", "mustBeGreaterThan": ">", "mustBeGreaterOrEqualTo": ">=",
                  "mustBeLessThan": "<", "mustBeLessOrEqualTo": "<="}
#: ODCS v3 logicalTypeOptions keys; lakecdc checks the first seven
TYPE_OPTIONS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "minLength", "maxLength",
                "format", "multipleOf", "timezone", "defaultTimezone", "maxItems", "minItems", "uniqueItems",
                "maxProperties", "minProperties", "required")
#: library metrics lakecdc runs (v3.1 names; v3.0's rule names map onto them) and those it reports unsupported
PROPERTY_METRICS = {"invalidValues": "invalidValues", "validValues": "invalidValues", "nullValues": "nullValues",
                    "duplicateValues": "duplicateValues", "duplicateCount": "duplicateValues"}
TABLE_METRICS = {"rowCount": "rowCount", "duplicateValues": "duplicateValues", "duplicateCount": "duplicateValues"}
NOT_RUN_METRICS = ("missingValues",)
RULE_TYPES = ("library", "sql", "custom", "text")
#: the ``engine`` names of a ``custom`` rule lakecdc runs as a Great Expectations expectation
GX_ENGINES = ("greatexpectations", "great-expectations", "great_expectations", "gx")
#: the placeholders a ``sql`` rule's query names the checked table with
SQL_PLACEHOLDERS = ("${object}", "{object}", "${table}", "{table}")
_NUMERIC = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DecimalType, T.DoubleType, T.FloatType)


def _line(where: Where, at: tuple[str, ...]) -> str:
    probe = at
    while probe and probe not in where.lines:
        probe = probe[:-1]
    return f"{where.path}:{where.lines.get(probe, '?')}"


def _severity(value: Any, at: tuple[str, ...], where: Where) -> Severity:
    level = SEVERITIES.get(str(value).lower()) if isinstance(value, str) else None
    if level is None:
        raise where.error(at, f"{value!r}: use error or warning (or {', '.join(sorted(set(SEVERITIES) - {'error', 'warning'}))})")
    return level


def _own_severity(props: Any, at: tuple[str, ...], where: Where) -> Severity | None:
    """A property's ``lakecdc.severity`` custom property (the severity of its declared constraints)."""
    if props is None:
        return None
    here = (*at, "customProperties")
    if not isinstance(props, list):
        raise where.error(here, "expected a list of {property: NAME, value: VALUE}")
    level = None
    for k, item in enumerate(props):
        pat = (*here, str(k))
        if not isinstance(item, dict) or "property" not in item:
            raise where.error(pat, "expected {property: NAME, value: VALUE}")
        name = str(item["property"])
        if name == "lakecdc.severity":
            level = _severity(item.get("value"), (*pat, "value"), where)
        elif name.startswith("lakecdc."):
            raise where.error((*pat, "property"), f"{name!r}: a property's lakecdc section knows lakecdc.severity")
    return level


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bound(value: Any, dtype: T.DataType, at: tuple[str, ...], where: Where) -> Any:
    """A minimum or maximum as a value of the column's type."""
    if isinstance(dtype, _NUMERIC):
        if not _is_number(value):
            raise where.error(at, f"{value!r}: expected a number (the column is {dtype.simpleString()})")
        return value
    if isinstance(dtype, T.DateType):
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value
        try:
            return dt.date.fromisoformat(str(value))
        except ValueError:
            raise where.error(at, f"{value!r}: expected a date such as 2024-01-31 (the column is date)") from None
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        if isinstance(value, dt.datetime):
            stamp = value
        elif isinstance(value, dt.date):
            stamp = dt.datetime(value.year, value.month, value.day)
        else:
            try:
                stamp = dt.datetime.fromisoformat(str(value))
            except ValueError:
                raise where.error(at, f"{value!r}: expected a timestamp such as 2024-01-31T12:00:00Z") from None
        if isinstance(dtype, T.TimestampType) and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)  # lakecdc's sessions run in UTC
        if isinstance(dtype, T.TimestampNTZType) and stamp.tzinfo is not None:
            stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return stamp
    raise where.error(at, f"a range applies to number, integer, date and timestamp columns, not {dtype.simpleString()}")


def _text(value: Any) -> str:
    return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else str(value)


def _range_check(column: str, low: Any, high: Any, strict_low: bool, strict_high: bool, what: str = "") -> str:
    name = f"{column} {what}".rstrip()
    if low is not None and high is not None:
        return f"{name} in {'(' if strict_low else '['}{_text(low)}, {_text(high)}{')' if strict_high else ']'}"
    if low is not None:
        return f"{name} {'>' if strict_low else '>='} {_text(low)}"
    return f"{name} {'<' if strict_high else '<='} {_text(high)}"


def _type_option_rules(opts: Any, name: str, dtype: T.DataType, at: tuple[str, ...], where: Where,
                       severity: Severity) -> list[Rule]:
    if opts is None:
        return []
    if not isinstance(opts, dict):
        raise where.error(at, "expected a mapping such as {minimum: 0, maximum: 100}")
    for key in opts:
        if key not in TYPE_OPTIONS:
            raise where.error((*at, str(key)), f"not an ODCS logicalTypeOptions key; ODCS knows {', '.join(TYPE_OPTIONS)}")
    here = _line(where, at)
    out: list[Rule] = []
    low = high = None
    strict_low = strict_high = False
    for key, inclusive, exclusive in (("low", "minimum", "exclusiveMinimum"), ("high", "maximum", "exclusiveMaximum")):
        bound, strict = opts.get(inclusive), False
        excl = opts.get(exclusive)
        if isinstance(excl, bool):  # ODCS v3.0: a flag on minimum / maximum
            if excl and bound is None:
                raise where.error((*at, exclusive), f"true needs {inclusive}")
            strict = excl
        elif excl is not None:      # ODCS v3.1: the bound itself
            if bound is not None:
                raise where.error((*at, exclusive), f"give {inclusive} or {exclusive}, not both")
            bound, strict, inclusive = excl, True, exclusive
        if bound is not None:
            value = _bound(bound, dtype, (*at, inclusive), where)
            if key == "low":
                low, strict_low = value, strict
            else:
                high, strict_high = value, strict
    if low is not None and high is not None and (low > high or (low == high and (strict_low or strict_high))):
        raise where.error(at, f"no value fits between {_text(low)} and {_text(high)}")
    if low is not None or high is not None:
        out.append(Rule(_range_check(name, low, high, strict_low, strict_high), "between", severity, name,
                        (("min_value", low), ("max_value", high), ("strict_min", strict_low),
                         ("strict_max", strict_high)), where=here))
    text_only = [k for k in ("pattern", "minLength", "maxLength") if k in opts]
    if text_only and not isinstance(dtype, T.StringType):
        raise where.error((*at, text_only[0]), f"applies to string columns, not {dtype.simpleString()}")
    if "pattern" in opts:
        out.append(_pattern_rule(name, opts["pattern"], severity, (*at, "pattern"), where))
    lengths = []
    for key in ("minLength", "maxLength"):
        value = opts.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise where.error((*at, key), f"{value!r}: expected a whole number >= 0")
        lengths.append(value)
    if lengths[0] is not None and lengths[1] is not None and lengths[0] > lengths[1]:
        raise where.error((*at, "minLength"), f"minLength {lengths[0]} is above maxLength {lengths[1]}")
    if lengths != [None, None]:
        out.append(Rule(_range_check(name, lengths[0], lengths[1], False, False, "length"), "length", severity, name,
                        (("min_value", lengths[0]), ("max_value", lengths[1])), where=here))
    return out


def _pattern_rule(name: str, pattern: Any, severity: Severity, at: tuple[str, ...], where: Where,
                  **extra: Any) -> Rule:
    if not isinstance(pattern, str) or not pattern:
        raise where.error(at, f"{pattern!r}: expected a regular expression")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise where.error(at, f"{pattern!r} is not a valid regular expression: {exc}") from None
    return Rule(f"{name} matches {pattern}", "pattern", severity, name, (("regex", pattern),),
                where=_line(where, at), **extra)


def _values_rule(name: str, values: Any, severity: Severity, at: tuple[str, ...], where: Where, **extra: Any) -> Rule:
    if not isinstance(values, list) or not values:
        raise where.error(at, "expected a list of the accepted values")
    shown = ", ".join("null" if v is None else str(v) for v in values[:6]) + (", ..." if len(values) > 6 else "")
    return Rule(f"{name} in {{{shown}}}", "in_set", severity, name, (("value_set", tuple(values)),),
                where=_line(where, at), **extra)


def _limits(item: dict, at: tuple[str, ...], where: Where) -> tuple[tuple[tuple[str, Any], ...], Literal["rows", "percent"]]:
    limits = []
    for op in OPERATORS:
        if op not in item:
            continue
        value = item[op]
        if op.endswith("Between"):
            if not (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value)) and value[0] <= value[1]):
                raise where.error((*at, op), f"{value!r}: expected [LOW, HIGH], two numbers")
            value = tuple(value)
        elif not _is_number(value):
            raise where.error((*at, op), f"{value!r}: expected a number")
        limits.append((op, value))
    unit = item.get("unit", "rows")
    if unit not in ("rows", "percent"):
        raise where.error((*at, "unit"), f"{unit!r}: use rows or percent")
    return tuple(limits), unit


def limits_text(limits: tuple[tuple[str, Any], ...], unit: str, what: str) -> str:
    """``"rows breaking it < 5%"`` for the operators of an ODCS rule."""
    suffix = "%" if unit == "percent" else ""
    parts = []
    for op, value in limits:
        if op == "mustBeBetween":
            parts.append(f"in ({value[0]}{suffix}, {value[1]}{suffix})")
        elif op == "mustNotBeBetween":
            parts.append(f"not in [{value[0]}{suffix}, {value[1]}{suffix}]")
        else:
            parts.append(f"{_OPERATOR_TEXT[op]} {value}{suffix}")
    return f"{what} {' and '.join(parts)}"


def meets(value: float, limits: tuple[tuple[str, Any], ...]) -> bool:
    """Whether a metric satisfies every ODCS operator (none: it must be 0).

    ``mustBeBetween: [a, b]`` is ``a < value < b``, as ODCS defines it (``mustBeGreaterThan: a``
    and ``mustBeLessThan: b``).
    """
    if not limits:
        return value == 0
    tests = {
        "mustBe": lambda v, x: v == x, "mustNotBe": lambda v, x: v != x,
        "mustBeGreaterThan": lambda v, x: v > x, "mustBeGreaterOrEqualTo": lambda v, x: v >= x,
        "mustBeLessThan": lambda v, x: v < x, "mustBeLessOrEqualTo": lambda v, x: v <= x,
        "mustBeBetween": lambda v, x: x[0] < v < x[1], "mustNotBeBetween": lambda v, x: not x[0] <= v <= x[1],
    }
    return all(tests[op](value, x) for op, x in limits)


def _quality_items(items: Any, at: tuple[str, ...], where: Where, column: str | None = None,
                   ) -> tuple[list[tuple[tuple[str, ...], dict, str]], list[Rule]]:
    """A ``quality`` list: its library rules to run as (where, the rule, its metric), and its other
    rules as :class:`Rule` objects (``sql``, ``custom`` and those lakecdc reports unsupported)."""
    if items is None:
        return [], []
    if not isinstance(items, list):
        raise where.error(at, "expected a list of quality rules")
    library, others = [], []
    for k, item in enumerate(items):
        pat = (*at, str(k))
        if not isinstance(item, dict):
            raise where.error(pat, "expected a quality rule such as {metric: nullValues, mustBe: 0}")
        kind = item.get("type", "library")
        if kind not in RULE_TYPES:
            raise where.error((*pat, "type"), f"{kind!r}: ODCS knows {', '.join(RULE_TYPES)}")
        if kind != "library":
            others.append(_other_rule(kind, item, pat, where, column))
            continue
        metric = item.get("metric", item.get("rule"))
        if not isinstance(metric, str) or not metric:
            raise where.error(pat, "a library rule needs a metric, such as metric: nullValues")
        if metric in NOT_RUN_METRICS:
            others.append(_unsupported(item, pat, where, f"metric {metric}", f"lakecdc does not run the {metric} metric"))
        else:
            library.append((pat, item, metric))
    return library, others


def _level(item: dict, pat: tuple[str, ...], where: Where) -> Severity:
    """A quality rule's severity; without one ``fail``: a quality rule is written to be enforced."""
    return _severity(item["severity"], (*pat, "severity"), where) if "severity" in item else "fail"


def _named(item: dict, fallback: str) -> str:
    name = item.get("name") or item.get("description")
    return str(name).strip().splitlines()[0][:80] if name else fallback


def _unsupported(item: dict, pat: tuple[str, ...], where: Where, what: str, why: str) -> Rule:
    return Rule(_named(item, what), "unsupported", _level(item, pat, where),
                options=(("why", why),), where=_line(where, pat))


def _other_rule(kind: str, item: dict, pat: tuple[str, ...], where: Where, column: str | None) -> Rule:
    """A ``sql``, ``custom`` or ``text`` quality rule as a :class:`Rule` (see the module docstring
    of :mod:`lakecdc.check.contracts`)."""
    level = _level(item, pat, where)
    if kind == "text":
        return _unsupported(item, pat, where, "text rule", "a text rule is read by people, not run")
    if kind == "sql":
        query = item.get("query")
        if not isinstance(query, str) or not query.strip():
            raise where.error((*pat, "query"), "expected a SQL query such as SELECT COUNT(*) FROM ${object} WHERE ...")
        limits, _ = _limits(item, pat, where)
        shown = " ".join(query.split())
        check = _named(item, f"sql {shown[:60]}{'...' if len(shown) > 60 else ''}")
        rule = Rule(check, "sql", level, column, (("query", query),), limits, where=_line(where, pat))
        return replace(rule, check=f"{check}: {limits_text(limits, 'rows', 'value')}" if limits else f"{check}: value = 0")
    engine = str(item.get("engine", ""))
    if engine.lower() not in GX_ENGINES:
        return _unsupported(item, pat, where, f"custom {engine or 'rule'}",
                            f"engine {engine!r}: lakecdc runs custom rules of engine greatExpectations")
    return _expectation_rule(item, pat, where, column, level)


def _expectation_rule(item: dict, pat: tuple[str, ...], where: Where, column: str | None, level: Severity) -> Rule:
    """A ``custom`` rule of engine ``greatExpectations``: its ``implementation`` names the
    expectation (``type``, or GX 0.x's ``expectation_type``) and its ``kwargs``, as a mapping or as
    YAML text."""
    import yaml

    at = (*pat, "implementation")
    impl = item.get("implementation")
    if isinstance(impl, str):
        try:
            impl = yaml.safe_load(impl)
        except yaml.YAMLError as exc:
            raise where.error(at, f"not valid YAML: {exc}") from None
    if not isinstance(impl, dict):
        raise where.error(at, "expected {type: expect_..., kwargs: {...}} (a Great Expectations expectation)")
    name = impl.get("type", impl.get("expectation_type"))
    if not isinstance(name, str) or not re.fullmatch(r"expect_[a-z0-9_]+", name):
        raise where.error(at, f"{name!r}: expected the name of a Great Expectations expectation, such as "
                              "expect_column_values_to_be_between")
    kwargs = impl.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise where.error(at, "kwargs: expected a mapping of the expectation's arguments")
    shown = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    check = _named(item, f"{name}({shown[:60]}{'...' if len(shown) > 60 else ''})")
    options = tuple((str(k), tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items())
    return Rule(check, "expectation", level, column, options, where=_line(where, pat), expectation=name)


def _unknown_metric(metric: str, known: dict[str, str], pat: tuple[str, ...], item: dict, where: Where) -> ConfigError:
    field = "metric" if "metric" in item else "rule"
    names = sorted({*known.values(), *NOT_RUN_METRICS})
    return where.error((*pat, field), f"{metric!r}: lakecdc knows the ODCS metrics {', '.join(names)} here")


def property_rules(prop: dict, name: str, dtype: T.DataType, at: tuple[str, ...], where: Where) -> list[Rule]:
    """The rules one ODCS property declares (logicalTypeOptions, unique, quality)."""
    declared: Severity = _own_severity(prop.get("customProperties"), at, where) or "warn"
    out = _type_option_rules(prop.get("logicalTypeOptions"), name, dtype, (*at, "logicalTypeOptions"), where, declared)
    if prop.get("unique") is True and not prop.get("primaryKey"):
        out.append(Rule(f"{name} unique", "unique", declared, name, where=_line(where, (*at, "unique"))))
    library, others = _quality_items(prop.get("quality"), (*at, "quality"), where, name)
    for pat, item, metric in library:
        kind = PROPERTY_METRICS.get(metric)
        if kind is None:
            raise _unknown_metric(metric, PROPERTY_METRICS, pat, item, where)
        level = _level(item, pat, where)
        limits, unit = _limits(item, pat, where)
        made: list[Rule] = []
        if kind == "nullValues":
            made.append(Rule(f"{name} not null", "not_null", level, name, where=_line(where, pat),
                             limits=limits, unit=unit))
        elif kind == "duplicateValues":
            made.append(Rule(f"{name} unique", "unique", level, name, where=_line(where, pat),
                             limits=limits, unit=unit))
        else:
            args = item.get("arguments") or {}
            if not isinstance(args, dict):
                raise where.error((*pat, "arguments"), "expected a mapping such as {validValues: [...]}")
            wanted, pattern = args.get("validValues"), args.get("pattern")
            if wanted is None and pattern is None:
                raise where.error(pat, f"{metric} needs arguments.validValues or arguments.pattern")
            if wanted is not None:
                made.append(_values_rule(name, wanted, level, (*pat, "arguments", "validValues"), where,
                                         limits=limits, unit=unit))
            if pattern is not None:
                pat_at = (*pat, "arguments", "pattern")
                if not isinstance(dtype, T.StringType):
                    raise where.error(pat_at, f"a pattern applies to string columns, not {dtype.simpleString()}")
                made.append(_pattern_rule(name, pattern, level, pat_at, where, limits=limits, unit=unit))
        out += [_with_limits(r, item) for r in made]
    return out + [replace(r, check=f"{name} {r.check}") for r in others]


def _with_limits(rule: Rule, item: dict) -> Rule:
    check = rule.check
    if rule.limits:
        check += ": " + limits_text(rule.limits, rule.unit, "rows breaking it")
    if item.get("name"):
        check += f" ({item['name']})"
    return replace(rule, check=check)


def table_rules(items: Any, columns: set[str], at: tuple[str, ...], where: Where) -> list[Rule]:
    """The rules of a schema object's ``quality`` list (rowCount, compound duplicateValues, sql,
    custom; the others reported unsupported)."""
    out = []
    library, others = _quality_items(items, at, where)
    for pat, item, metric in library:
        kind = TABLE_METRICS.get(metric)
        if kind is None:
            raise _unknown_metric(metric, TABLE_METRICS, pat, item, where)
        level = _level(item, pat, where)
        limits, unit = _limits(item, pat, where)
        if kind == "rowCount":
            if not limits:
                raise where.error(pat, "rowCount needs an operator such as mustBeGreaterThan: 0")
            if unit != "rows":
                raise where.error((*pat, "unit"), "rowCount counts rows")
            rule = Rule(limits_text(limits, unit, "row count"), "row_count", level, limits=limits,
                        where=_line(where, pat))
        else:
            props = (item.get("arguments") or {}).get("properties") if isinstance(item.get("arguments"), dict) else None
            if not isinstance(props, list) or not props or not all(isinstance(p, str) for p in props):
                raise where.error(pat, "duplicateValues on a table needs arguments.properties: [COLUMN, ...]")
            missing = [p for p in props if p not in columns]
            if missing:
                raise where.error((*pat, "arguments", "properties"), f"{', '.join(missing)}: not a property of the table")
            rule = Rule(f"({', '.join(props)}) unique", "compound_unique", level,
                        options=(("column_list", tuple(props)),), limits=limits, unit=unit, where=_line(where, pat))
            rule = _with_limits(rule, {})
        out.append(replace(rule, check=rule.check + (f" ({item['name']})" if item.get("name") else "")))
    return out + others


def distinct_checks(rules: list[Rule]) -> tuple[Rule, ...]:
    """The rules, each check named once (a repeated name gets its contract line)."""
    seen: dict[str, int] = {}
    for r in rules:
        seen[r.check] = seen.get(r.check, 0) + 1
    return tuple(replace(r, check=f"{r.check} [line {r.where.rsplit(':', 1)[-1]}]") if seen[r.check] > 1 else r
                 for r in rules)
