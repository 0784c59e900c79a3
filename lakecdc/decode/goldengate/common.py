"""What the GoldenGate formatters share: the op table their ``*OpKey`` options make, the options
every formatter has, the ``source`` map of ``current_ts`` and tokens, and the row formatters' split
primary-key updates joined again."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakecdc.decode.spec import Images, Names, Op, OpTable, Option
from lakecdc.errors import ConfigError

#: The row formatters' ``pkUpdateHandling`` values (seed 000: ``abend`` is the default).
PK_UPDATE_HANDLING = ("abend", "update", "delete-insert")
#: How the reasons name GoldenGate's members.
GG_NAMES = Names(table="table", op="op_type", op_ts="op_ts")
#: A row formatter's one image: the after image of an insert or update, the before image of a delete.
ROW_IMAGES = Images(before=frozenset({"D"}), after=frozenset({"I", "U"}), single=True)
#: ``insertOpKey``, ``updateOpKey``, ``deleteOpKey``, ``truncateOpKey`` and their defaults.
OP_KEY_OPTIONS = (
    Option("insertOpKey", "I"),
    Option("updateOpKey", "U"),
    Option("deleteOpKey", "D"),
    Option("truncateOpKey", "T"),
)
#: ``pkUpdateHandling`` (see :func:`rejoin_split_key_changes`).
PK_UPDATE_OPTION = Option("pkUpdateHandling", "abend", "choice", PK_UPDATE_HANDLING)
_OP_OF_OPTION: dict[str, Op] = {"insertOpKey": "I", "updateOpKey": "U", "deleteOpKey": "D", "truncateOpKey": "T"}
_TEXT_MAP = "map<string,string>"
_JAVA_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}


def op_table(fmt: str) -> Callable[[Mapping[str, str]], OpTable]:
    """The op table of format ``fmt`` for its parsed options: each ``*OpKey`` value is the op_type
    text of its op. :class:`ConfigError` when two of them are the same text."""

    def build(options: Mapping[str, str]) -> OpTable:
        ops = {options[name]: op for name, op in _OP_OF_OPTION.items()}
        if len(ops) < len(_OP_OF_OPTION):
            raise ConfigError(f"{fmt}: insertOpKey, updateOpKey, deleteOpKey and truncateOpKey must differ")
        return OpTable(ops)

    return build


def java_unescape(text: str) -> str:
    """Java properties escapes (``\\u0001``, ``\\n``, ``\\t``, ``\\\\``) as the characters they
    stand for: GoldenGate's delimiter options are written so (``fieldDelimiter=CDATA[\\u0001]``)."""

    def one(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] == "u" and len(s) == 5:
            return chr(int(s[1:], 16))
        return _SIMPLE_ESCAPES.get(s, s)

    return _JAVA_ESCAPE.sub(one, text)


def utf8_only(fmt: str, encoding: str) -> None:
    """:class:`ConfigError` unless ``encoding`` names UTF-8 (the JSON formats read nothing else)."""
    if encoding.replace("-", "").upper() != "UTF8":
        raise ConfigError(f"{fmt}: encoding {encoding!r} is not supported; use UTF-8")


def with_tokens(current_ts: Column, tokens: Column | None, *extra: Column) -> Column:
    """``source``: ``current_ts`` (then ``extra`` key/value columns) and every token (a text map,
    NULL for none) as ``token.<name>``."""
    head = F.create_map(F.lit("current_ts"), current_ts, *extra)
    if tokens is None:
        return head
    return F.map_concat(head, F.coalesce(
        F.transform_keys(tokens, lambda k, _v: F.concat(F.lit("token."), k)), F.create_map().cast(_TEXT_MAP)))


def first_duplicate(names: Column) -> Column:
    """The first name of an array that appears again later (NULL when all differ)."""
    return F.try_element_at(F.filter(names, lambda k, i: F.array_position(names, k) != i + 1), F.lit(1))


def rejoin_split_key_changes(events: DataFrame) -> DataFrame:
    """A row formatter's split primary-key updates joined again into the updates they were.

    With ``pkUpdateHandling=delete-insert`` a row formatter writes a primary-key update as a
    delete of the before image and an insert of the after image, both at the update's own
    ``op_ts`` and ``pos``. A trail position belongs to one operation, so a good delete and a good
    insert of one table at the same ``(op_ts, pos)`` are exactly such a pair: each becomes one
    ``U`` event (``before`` = the delete's image, ``after`` = the insert's image, the delete's
    origin), which the pipeline then applies by its ``pk_update`` setting like an op-modeled key
    change. Replayed pairs pair up in file order (the k-th delete with the k-th insert); a half
    without a partner (the other half in another batch) stays as it is. Records without a
    position, bad records and other ops pass through untouched.

    Costs one shuffle of the deletes and inserts, so decoders call it only when told the
    formatter split key changes.
    """
    cols = events.columns
    pairable = F.coalesce(
        F.col("_error").isNull() & F.col("op").isin("D", "I") & (F.coalesce(F.col("pos"), F.lit("")) != ""),
        F.lit(False),
    )
    marked = events.withColumn("_pairable", pairable)
    rest = marked.where(~F.col("_pairable")).drop("_pairable")
    group = Window.partitionBy("table", "op_ts", "pos")
    me = F.struct("_file", "_block", "_row")
    inserts = F.collect_list(F.when(F.col("op") == "I", F.struct(me.alias("w"), F.col("after").alias("after")))).over(group)
    deletes = F.collect_list(F.when(F.col("op") == "D", me)).over(group)
    cand = marked.where("_pairable").drop("_pairable").withColumn("_ins", inserts).withColumn("_dels", deletes)
    ins_where = F.array_sort(F.transform("_ins", lambda x: x["w"]))
    dels = F.array_sort(F.col("_dels"))
    rank = F.when(F.col("op") == "D", F.size(F.filter(dels, lambda x: x < me)) + 1).otherwise(
        F.size(F.filter(ins_where, lambda x: x < me)) + 1)
    cand = cand.withColumn("_rank", rank)
    partner = F.element_at(ins_where, F.col("_rank"))
    joined = (F.col("op") == "D") & (F.col("_rank") <= F.size("_ins"))
    partner_after = F.element_at(F.filter("_ins", lambda x: x["w"] == partner), 1)["after"]
    paired = (
        cand.where((F.col("op") == "D") | (F.col("_rank") > F.size("_dels")))  # inserts with a delete go
        .withColumn("after", F.when(joined, partner_after).otherwise(F.col("after")))
        .withColumn("op", F.when(joined, F.lit("U")).otherwise(F.col("op")))
        .select(*cols)
    )
    return rest.unionByName(paired)


__all__ = [
    "GG_NAMES", "OP_KEY_OPTIONS", "PK_UPDATE_HANDLING", "PK_UPDATE_OPTION", "ROW_IMAGES", "first_duplicate", "java_unescape", "op_table",
    "rejoin_split_key_changes", "utf8_only", "with_tokens",
]
