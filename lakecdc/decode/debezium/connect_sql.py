"""``debezium-json`` with schema, read by Spark: Connect JSON pairs decoded in the JVM.

With ``schemas.enable=true`` every line is ``{"schema":<the envelope's Connect schema>,
"payload":<the envelope>}``, the schema repeated on every line (about 80% of its bytes). The
lines are read as text and each line that starts with a known schema text (one of
:func:`~lakecdc.decode.kafka.connect.connect_prefixes`) has it cut off in the JVM
(``_head`` says which). For a schema SQL can read (:func:`plan`), the rest of the line, the
payload, is parsed by ``from_json`` as the bare envelope and decoded by the same SQL as files
without schema (:func:`~lakecdc.decode.debezium.sql.decode_parsed`), the schema's logical
types applied per column:

* ``int8``..``int64``, ``string``, ``boolean`` and ``bytes`` values are their JSON text, as the
  Python reader writes them;
* ``Decimal`` (base64 of the unscaled value's big-endian two's complement, and the ``scale``
  parameter) is converted in SQL when the value is at most 7 bytes (about 16 digits): exact
  decimal text, as :func:`~lakecdc.decode.kafka.connect_values.decimal_text` writes it.

A schema with any other type (a float, whose text ``from_json`` renders through a double; dates,
times, timestamps, variable-scale decimals, geometries, structs and arrays; a renamed column)
sends its lines to the Python reader, as does every line SQL does not read exactly (a longer or
malformed Decimal, text after the payload, everything :func:`~lakecdc.decode.debezium.sql.plain`
refuses). Those lines reach the Python reader with their whole text.

A value of the wrong JSON type for its schema field (text in an ``int64`` field) is quarantined
by the Python reader when it reads the line, and by the typing of the column when SQL reads it:
quarantined either way, the reason worded differently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import sql_string
from lakecdc.decode.debezium.envelope import parse_json
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.debezium.sql import ENVELOPE, NO_SHAPE, Images, Shape, decode_parsed
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS
from lakecdc.decode.kafka.connect import connect_prefixes, unwrap_connect
from lakecdc.decode.kafka.connect_values import DECIMAL, INT_TYPES, SPECIAL, column_name, image_fields
from lakecdc.decode.rows import RecordError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakecdc.decode.avro.registry import Registry

#: The Decimal values SQL converts: base64 of 1 to 7 bytes (4, 8 or 12 characters, padded).
_B64 = "[A-Za-z0-9+/]"
_SHORT_BASE64 = f"^(?:{_B64}{{4}}){{0,1}}(?:{_B64}{{4}}|{_B64}{{3}}=|{_B64}{{2}}==)$|^{_B64}{{10}}==$"
#: What ``from_json`` reads of a payload: the bare envelope.
ENVELOPE_ONLY = T.StructType([f for f in ENVELOPE.fields if f.name != CORRUPT])
_PLAIN_TYPES = frozenset({*INT_TYPES, "string", "boolean", "bytes"})
_FLOATS = frozenset({"float", "float32", "float64", "double"})
_MAX_SCALE = 18


def _schema_of(prefix: str) -> Mapping[str, Any] | None:
    """The Connect schema a line prefix (``{"schema":...,"payload":``) holds."""
    try:
        return unwrap_connect(parse_json(prefix + "null}"))[1]
    except RecordError:
        return None


def _has_float(node: Any) -> bool:
    if isinstance(node, Mapping):
        return node.get("type") in _FLOATS or any(_has_float(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_float(v) for v in node)
    return False


#: Per image (``before``, ``after``): the struct's field names in schema order, and the
#: positions of its Decimal fields with their scales.
Plan = tuple[tuple[tuple[str, ...], dict[int, int]], tuple[tuple[str, ...], dict[int, int]]]


def plan(prefix: str) -> Plan | None:
    """What SQL needs to read the records of a Connect schema prefix exactly (see :data:`Plan`);
    None when the Python reader must read them."""
    schema = _schema_of(prefix)
    if schema is None or _has_float(schema):
        return None
    out = []
    for image in ("before", "after"):
        fields = image_fields(schema, image)
        if not fields:
            return None
        decimals = {}
        for at, (name, field) in enumerate(fields.items()):
            logical, kind = field.get("name"), field.get("type")
            if column_name(name, field) != name:
                return None
            if logical == DECIMAL:
                scale = str((field.get("parameters") or {}).get("scale", "0"))
                if not scale.isdigit() or int(scale) > _MAX_SCALE:
                    return None
                decimals[at] = int(scale)
            elif logical in SPECIAL or kind not in _PLAIN_TYPES:
                return None
        out.append((tuple(fields), decimals))
    return out[0], out[1]


def _beyond(v: str) -> str:
    """SQL: the Connect Decimal text in ``v`` is one SQL does not convert (more than 7 bytes, or
    no base64); false for NULL."""
    return f"({v} IS NOT NULL AND NOT {v} RLIKE {sql_string(_SHORT_BASE64)})"


def _decimal_stages(v: str, scale: int) -> list[list[tuple[str, str]]]:
    """Successive projections turning the Connect Decimal's base64 text in column ``v`` (at most 7
    bytes: not :func:`_beyond`, checked before) into exact decimal text ``{v}_t`` (as
    :func:`~lakecdc.decode.kafka.connect_values.decimal_text` writes it; NULL for NULL). Each part is
    a column of its own: Spark evaluates a part used twice in one expression twice."""
    h, n, m, p = f"{v}_h", f"{v}_n", f"{v}_m", f"{v}_p"
    # two's complement: a first hex digit 8-F is a negative number
    negative = f"IF(substring({h}, 1, 1) >= '8', shiftleft(1L, char_length({h}) * 4), 0L)"
    stages = [
        [(h, f"hex(unbase64({v}))")],
        [(n, f"CAST(conv({h}, 16, 10) AS BIGINT) - {negative}")],
    ]
    if scale == 0:
        return [*stages, [(f"{v}_t", f"CAST({n} AS STRING)")]]
    zeros = sql_string("0" * (scale + 1))
    return [
        *stages,
        [(m, f"CAST(abs({n}) AS STRING)")],
        [(p, f"IF(char_length({m}) > {scale}, {m}, lpad({m}, {scale + 1}, {zeros}))")],
        [(f"{v}_t", f"concat(IF({n} < 0, '-', ''), substring({p}, 1, char_length({p}) - {scale}), '.', "
                    f"substring({p}, -{scale}))")],
    ]


def _images(parsed: DataFrame, plans: Mapping[int, Plan]) -> tuple[DataFrame, Images | None]:
    """``parsed`` with the ``_<image><head>_same`` columns, and how
    :func:`~lakecdc.decode.debezium.sql.decode_parsed` converts the Decimal values of the
    lines' images (:class:`~lakecdc.decode.debezium.sql.Images`; None when no image holds a
    Decimal).

    An image written as the connector writes it (every field of the schema, in order: ``_same``)
    is read by position; another one, or a Decimal SQL cannot convert, sends its line to the
    Python reader. The conversion itself runs on the decoded rows."""
    # (image, head, field names, Decimal positions -> scale, the _same column) of each image with Decimals
    slots = [(image, i, p[at][0], p[at][1], f"_{image}{i}_same")
             for at, image in enumerate(("before", "after")) for i, p in plans.items() if p[at][1]]
    if not slots:
        return parsed, None
    beyond = []
    for image, i, _names, decimals, same in slots:
        beyond.append(f"(_head = {i} AND {image} IS NOT NULL AND NOT coalesce({same}, false))")
        # (get: NULL past the end; Spark may evaluate a repeated part before the AND's left side)
        beyond += [f"({same} AND {_beyond(f'get(map_values({image}), {j})')})" for j in decimals]
    parsed = parsed.selectExpr("*", *[f"_head = {i} AND map_keys({image}) = array({', '.join(map(sql_string, names))})"
                                      f" AS {same}" for image, i, names, _, same in slots])

    def convert(rows: DataFrame) -> DataFrame:
        selects: list[list[tuple[str, str]]] = [[]]
        whens: dict[str, list[str]] = {"x_before": [], "x_after": []}
        for image, i, names, decimals, same in slots:
            column = f"x_{image}"
            values = [f"get(map_values({column}), {j})" for j in range(len(names))]
            for j, scale in decimals.items():
                v = f"_{image}{i}_{j}"
                selects[0].append((v, f"IF(_plain AND {same}, {values[j]}, NULL)"))
                for k, stage in enumerate(_decimal_stages(v, scale), start=1):
                    selects += [[] for _ in range(k + 1 - len(selects))]
                    selects[k] += stage
                values[j] = f"{v}_t"
            whens[column].append(f"WHEN _plain AND {same} THEN map_from_arrays(map_keys({column}), array({', '.join(values)}))")
        for select in selects:
            rows = rows.selectExpr("*", *[f"{sql} AS {name}" for name, sql in select])
        return rows.withColumns({c: F.expr(f"CASE {' '.join(w)} ELSE {c} END") for c, w in whens.items() if w})

    return parsed, Images(beyond=F.expr(f"coalesce({' OR '.join(beyond)}, false)"),
                          keep=("_head", *[same for *_, same in slots]), convert=convert)


def decode(lines: DataFrame, prefixes: Sequence[str], settings: Settings, registry: Registry | None, *,
           shape: Shape = NO_SHAPE) -> DataFrame:
    """ROW_SCHEMA's rows of ``lines`` (``value``, ``_file``, ``_block``, ``_row``, ``_head``:
    :meth:`~lakecdc.decode.debezium.json.DebeziumJsonDecoder.lines`), the lines whose schema
    :func:`plan` accepts decoded in SQL, the others by the Python reader.

    ``shape``: what the files' first records say of their lines
    (:func:`~lakecdc.decode.debezium.sql.shape_of`).
    """
    plans = {i: p for i, prefix in enumerate(prefixes) if (p := plan(prefix)) is not None}
    value, head = F.col("value"), F.col("_head")
    known = head.isin(*plans) if plans else F.lit(False)
    # the rest of the line is the payload and the '}' closing the pair when '[' + the rest less its
    # last byte (a '}') + ']' parses as an array of one object: Spark's JSON parser ignores text
    # after a value, not inside one. (The last byte cut off as binary: a string's substring
    # counts its characters from the start, and from_json's input is evaluated outside the
    # generated code.)
    body = F.expr("CAST(substring(CAST(value AS BINARY), 1, octet_length(value) - 1) AS STRING)")
    wrapped = F.concat(F.lit("["), body, F.lit("]"))
    array_of_one = T.ArrayType(ENVELOPE_ONLY)
    pairs = F.when(known & value.endswith("}"), F.from_json(wrapped, array_of_one, {"allowSingleQuotes": "false", **JSON_LIMITS}))
    parsed = lines.select("_file", "_block", "_row", "_head", pairs.alias("_pairs"), value) \
        .select("_file", "_block", "_row", "_head", "value", F.get("_pairs", 0).alias("_pair"),
                F.when(F.coalesce(F.size("_pairs") != 1, F.lit(True)), F.lit("")).alias(CORRUPT)) \
        .select("_file", "_block", "_row", "_head", "value", "_pair.*", CORRUPT)
    # a line's whole text, for the Python reader (made only for the lines it reads)
    whole = F.when(head.isNull(), value)
    for i, prefix in enumerate(prefixes):
        whole = whole.when(head == i, F.concat(F.lit(prefix), value))
    parsed, images = _images(parsed, plans)
    return decode_parsed(parsed, settings, registry, shape=shape, text=whole, images=images)


def connect_file(first_record: str | None) -> dict | None:
    """The payload of a file's first record when it is a compact Connect pair holding an envelope
    of a schema SQL reads (:func:`plan`): the file is then read here."""
    if first_record is None:
        return None
    prefix = connect_prefixes([first_record])
    if not prefix or plan(prefix[0]) is None:
        return None
    try:
        payload, schema = unwrap_connect(json.loads(first_record))
    except ValueError:
        return None
    if schema is None or not isinstance(payload, dict):
        return None
    return payload if isinstance(payload.get("op"), str) and isinstance(payload.get("source"), dict) else None


__all__ = [
    "ENVELOPE_ONLY", "Plan", "connect_file", "decode", "plan",
]
