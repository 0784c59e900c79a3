"""What a vendor format says about itself: its ops, which images each op carries, how its events
are ordered, how its reasons name its members, and its options.

A decoder built on :class:`lakecdc.decode.base.Decoder` states these once as a
:class:`VendorSpec`; the base flow and :func:`lakecdc.decode.event.project` apply them the same way
for every format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakecdc.errors import ConfigError

#: A canonical op: insert, update, delete, truncate, snapshot read (an upsert).
Op = Literal["I", "U", "D", "T", "R"]
OPS: frozenset[str] = frozenset(get_args(Op))
#: How an op text is made comparable before it is looked up (the text as written is tried first).
Normal = Literal["exact", "upper-trim", "lower-trim-underscore"]

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
_SKIP = "~"
_REFUSE = "!"


def normal_text(text: str, normal: Normal) -> str:
    """``text`` in the form :class:`OpTable` stores its texts in (see :data:`Normal`)."""
    if normal == "upper-trim":
        return text.strip().upper()
    if normal == "lower-trim-underscore":
        return text.strip().lower().replace("_", " ")
    return text


def _normal_column(text: Column, normal: Normal) -> Column:
    if normal == "upper-trim":
        return F.upper(F.trim(text))
    if normal == "lower-trim-underscore":
        return F.replace(F.lower(F.trim(text)), F.lit("_"), F.lit(" "))
    return text


@dataclass(frozen=True)
class OpTable:
    """A format's op texts: the row ops, the non-row messages skipped with their kind, and the texts
    refused with a reason. One table, evaluated in SQL (:meth:`sql`) or in Python (:meth:`lookup`).

    ``refused`` maps a text to the reason a record carrying it is quarantined; ``%s`` in the reason
    is the op text as written. ``expected`` is what the unknown-op reason says was expected
    (by default ``one of`` the row op texts). Texts are stored in their ``normal`` form.
    """

    ops: Mapping[str, Op]
    skipped: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    normal: Normal = "exact"
    expected: str = ""

    def __post_init__(self) -> None:
        texts = [*self.ops, *self.skipped, *self.refused]
        twice = sorted({t for t in texts if texts.count(t) > 1})
        if twice:
            raise ValueError(f"op text(s) {', '.join(twice)} listed more than once")
        odd = sorted(t for t in texts if normal_text(t, self.normal) != t)
        if odd:
            raise ValueError(f"op text(s) {', '.join(map(repr, odd))} not in their {self.normal} form")
        wrong = sorted(op for op in self.ops.values() if op not in OPS)
        if wrong:
            raise ValueError(f"op(s) {', '.join(wrong)} are not canonical ops ({', '.join(sorted(OPS))})")
        if not self.expected:
            object.__setattr__(self, "expected", "one of " + ", ".join(self.ops))

    @property
    def _reasons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.refused.values()))

    def _codes(self) -> dict[str, str]:
        reasons = self._reasons
        return {
            **self.ops,
            **{t: _SKIP + kind for t, kind in self.skipped.items()},
            **{t: f"{_REFUSE}{reasons.index(r)}" for t, r in self.refused.items()},
        }

    def code(self, text: Column) -> Column:
        """One map lookup of ``text`` (as written, else in its normal form): the op letter,
        ``~kind`` for a skipped text, ``!n`` for a refused one, NULL for an unknown text.
        Worth a column of its own when :meth:`sql` reads it (it is read up to three times)."""
        codes = F.create_map(*[F.lit(x) for kv in self._codes().items() for x in kv])
        found = F.element_at(codes, text)
        if self.normal == "exact":
            return found
        return F.coalesce(found, F.element_at(codes, _normal_column(text, self.normal)))

    def sql(self, text: Column, code: Column | None = None) -> tuple[Column, Column, Column]:
        """``(op, skipped kind, refusal reason)`` of the op text ``text``; all three NULL for an
        unknown text. ``code``: :meth:`code` of ``text`` when it is already a column."""
        code = self.code(text) if code is None else code
        op = F.when(F.length(code) == 1, code)
        skipped = F.when(code.startswith(_SKIP), F.substring(code, 2, 1 << 16))
        reason: Column = F.lit(None).cast("string")
        for n, template in enumerate(self._reasons):
            reason = F.when(code == f"{_REFUSE}{n}", F.format_string(template, text)).otherwise(reason)
        return op, skipped, reason

    def lookup(self, text: str | None) -> tuple[str | None, str | None, str | None]:
        """:meth:`sql` for one text in Python (the Python-row readers)."""
        if text is None:
            return None, None, None
        for candidate in (text, normal_text(text, self.normal)):
            if candidate in self.ops:
                return self.ops[candidate], None, None
            if candidate in self.skipped:
                return None, self.skipped[candidate], None
            if candidate in self.refused:
                return None, None, self.refused[candidate].replace("%s", text)
        return None, None, None


@dataclass(frozen=True)
class Images:
    """Which ops keep which image; the other ops' images are dropped (NULL).

    ``single``: the format carries one image per record (row-modeled); the vendor gives it as
    ``Parts.after`` and it becomes the before image of the ops in ``before`` and the after image
    of the ops in ``after``. ``whole`` tells whether a format's after images hold every column of
    the row (``always``: Debezium, Canal, DTS), may omit columns (``per-record``), or never do.
    ``skipped_after``: a skipped record keeps the after image the vendor gives it (a schema change
    naming the table's columns as NULLs, which the pipeline adds to the table).
    """

    before: frozenset[str] = frozenset({"U", "D"})
    after: frozenset[str] = frozenset({"I", "U", "R"})
    single: bool = False
    whole: Literal["always", "per-record", "never"] = "per-record"
    skipped_after: bool = False


@dataclass(frozen=True)
class Ordering:
    """How ``seq`` is made from an event's ``op_ts``, ``pos`` and ``idx``.

    * ``default``: :func:`lakecdc.changes.events.default_seq` (``op_ts``, then ``pos``, then ``idx``);
    * ``pos-idx``: ``<pos>|<idx>`` (``pos`` padded to ``pos_width`` digits when given, else as is;
      ``idx`` padded to ``idx_width``): for formats whose position alone orders commits;
    * ``given``: the vendor's own ``Parts.seq``.

    ``idx``: where an event's index inside its message orders it. ``seq`` (the default): it is the
    last part of ``seq``, for formats whose position is the message's own. ``arrival``: it is left
    out of ``seq`` and orders only the rows of one message, after the message's arrival (see
    :data:`lakecdc.consolidate.fold.ARRIVAL`), for formats whose position several messages share
    (a Canal batch's ``id``): there the order the messages were written in comes first.
    """

    seq: Literal["default", "pos-idx", "given"] = "default"
    pos_width: int | None = None
    idx_width: int = 6
    idx: Literal["seq", "arrival"] = "seq"


@dataclass(frozen=True)
class Names:
    """How the standard reasons (:mod:`lakecdc.decode.checks`) name the vendor's members."""

    table: str = "table"
    op: str = "op_type"
    op_ts: str = "op_ts"


@dataclass(frozen=True)
class Option:
    """One decoder option, with its default as text (the way a properties file gives it).

    ``flag``: true/false (also yes/no, 1/0, on/off); ``choice``: one of ``choices``.
    """

    name: str
    default: str
    kind: Literal["text", "flag", "choice"] = "text"
    choices: tuple[str, ...] = ()


def unwrap_cdata(value: str) -> str:
    """GoldenGate property values may be wrapped as ``CDATA[...]`` to keep whitespace."""
    if value.startswith("CDATA[") and value.endswith("]"):
        return value[len("CDATA[") : -1]
    return value


def flag_value(fmt: str, name: str, value: str) -> bool:
    """A flag option's value as a bool; :class:`ConfigError` naming the option when it is none."""
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{fmt}: option {name}={value!r} is not true/false")


def parse_options(fmt: str, defaults: Mapping[str, str], ignored: frozenset[str],
                  given: Mapping[str, object] | None, kinds: tuple[Option, ...] = ()) -> dict[str, str]:
    """The options of format ``fmt``: ``given`` over ``defaults``, every value as text without a
    ``CDATA[...]`` wrapper. Raises :class:`ConfigError` for an option neither known nor ``ignored``,
    a flag that is not true/false, or a choice that is not one of its choices."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(defaults) - ignored)
    if unknown:
        known = ", ".join(sorted({*defaults, *ignored}))
        raise ConfigError(f"{fmt}: unknown option(s) {', '.join(unknown)}; known: {known}")
    options = {k: unwrap_cdata(str(v)) for k, v in {**defaults, **given}.items()}
    for option in kinds:
        value = options[option.name]
        if option.kind == "flag":
            flag_value(fmt, option.name, value)
        elif option.kind == "choice" and value not in option.choices:
            raise ConfigError(f"{fmt}: {option.name}={value!r} is not one of {', '.join(option.choices)}")
    return options


@dataclass(frozen=True)
class VendorSpec:
    """Everything the base flow needs to know of a format (see :class:`lakecdc.decode.base.Decoder`).

    ``ops``: the op table, or a function of the parsed options that builds it (GoldenGate's
    ``*OpKey`` options). ``binary``: records are bytes (Avro, Kafka dumps), so events carry
    ``_offset`` and, for a bad record, ``_raw`` (base64). ``lines``: one message per line, so
    lines appended to a file decode on their own. ``transaction_markers``: the format carries
    transaction begin/end markers with event counts.
    """

    name: str
    ops: OpTable | Callable[[Mapping[str, str]], OpTable]
    images: Images = Images()
    ordering: Ordering = Ordering()
    names: Names = Names()
    options: tuple[Option, ...] = ()
    ignored: frozenset[str] = frozenset()
    binary: bool = False
    lines: bool = False
    transaction_markers: bool = False

    def op_table(self, options: Mapping[str, str]) -> OpTable:
        """The op table for these parsed options."""
        return self.ops if isinstance(self.ops, OpTable) else self.ops(options)

    def parse_options(self, given: Mapping[str, object] | None) -> dict[str, str]:
        """:func:`parse_options` with this spec's options."""
        defaults = {o.name: o.default for o in self.options}
        return parse_options(self.name, defaults, self.ignored, given, self.options)


__all__ = [
    "OPS", "Images", "Names", "Normal", "Op", "OpTable", "Option", "Ordering", "VendorSpec",
    "flag_value", "normal_text", "parse_options", "unwrap_cdata",
]
