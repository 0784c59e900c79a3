"""What the commands share: the settings flags of ``apply`` and ``stream``, their Kafka input
flags, ``--wait``, and the progress lines printed while a command works."""

from __future__ import annotations

import argparse

from lakecdc.config.sources import from_config
from lakecdc.config.values import ENGINES, PK_UPDATE_MODES
from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError
from lakecdc.run.kafka import Kafka


def add_format_flags(p: argparse.ArgumentParser) -> None:
    """--format and the GoldenGate properties file it may come from (apply, stream)."""
    p.add_argument("--format", choices=sorted(DECODERS), help="input format (required, unless --gg-properties or --config names it)")
    p.add_argument("--gg-properties", metavar="FILE",
                   help="a GoldenGate Java adapter properties file: its handler's format and every "
                        "gg.handler.<name>.format.* property (--option overrides one)")
    p.add_argument("--gg-handler", metavar="NAME", help="which handler of --gg-properties (default: the only one)")
    p.set_defaults(format_parser=p)


def require_format(args: argparse.Namespace) -> None:
    """Stop with a usage error listing the formats unless ``--format``, ``--gg-properties`` or the
    ``--config`` file names the input's format (there is no default format)."""
    if args.format or args.gg_properties or (args.config and from_config(args.config).get("format")):
        return
    args.format_parser.error(f"the input's format is required: --format {{{','.join(sorted(DECODERS))}}} "
                             "(or --gg-properties FILE, or format: in --config FILE)")


def add_settings_flags(p: argparse.ArgumentParser) -> None:
    """The apply settings, shared by apply and stream (the same names as lakecdc.apply's arguments)."""
    p.add_argument("--key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="primary key of a table whose messages carry none; repeatable")
    p.add_argument("--pk-update", choices=list(PK_UPDATE_MODES), default=None,
                   help="primary-key updates: delete-insert (default), update, or abend")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="format option (GoldenGate property name for GoldenGate formats); repeatable")
    p.add_argument("--column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="write only these columns of TABLE (keys always); DLT's column_list; repeatable")
    p.add_argument("--except-column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="never write these columns of TABLE; DLT's except_column_list; repeatable")
    p.add_argument("--ignore-truncates", action="store_true",
                   help="read truncates but do not apply them (DLT's apply_as_truncates=False)")
    p.add_argument("--complete-transactions", action="store_true",
                   help="apply a source transaction only when all its events are there; hold the rest "
                        "for the next run (formats with transaction markers: Debezium)")
    p.add_argument("--tombstone-retention", metavar="DURATION", default=None,
                   help="how long a deleted key blocks late events: 7d (default), 36h, 90m, 0")
    p.add_argument("--scd2", action="append", default=[], metavar="TABLE[,TABLE...]",
                   help="keep these tables as SCD type 2 history tables (every version, __START_AT/__END_AT) "
                        "instead of their current state; patterns such as 'S.*' or '*' work; repeatable")
    p.add_argument("--track-history", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                   help="history tables: only changes to these columns open a new version (others update the "
                        "current version in place); DLT's track_history_column_list; repeatable")
    p.add_argument("--track-history-except", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                   help="history tables: changes to these columns never open a new version; "
                        "DLT's track_history_except_column_list; repeatable")
    p.add_argument("--change-data-feed", nargs="?", const="*", default=None, metavar="TABLE[,TABLE...]",
                   help="enable Delta's Change Data Feed on every table (or on these tables)")
    p.add_argument("--sequence-by", action="append", default=[], metavar="[TABLE=]FIELD[,FIELD...]",
                   help="order changes by these fields instead of the format's seq (DLT's sequence_by): op_ts, pos, "
                        "source.<name> or a column (the after image's value; a delete's before image), compared by "
                        "the column's type, or as :int / :ts / :str (source.scn:int); the format's seq breaks ties; "
                        "an event without a value is quarantined. Without TABLE= for every table; repeatable. A table "
                        "keeps the sequence_by it was built with")
    p.add_argument("--parallel-tables", type=int, default=None, metavar="N",
                   help="prepare and merge up to N tables at once (default 4; 1: one after the other)")
    p.add_argument("--contract", metavar="PATH",
                   help="ODCS data contract(s): a YAML file or a directory of them (keys and column types)")
    p.add_argument("--config", metavar="FILE",
                   help="YAML with any of: format, keys {table: [cols]}, pk_update, options {name: value}, "
                        "column_list / except_column_list {table: [cols]}, apply_as_truncates, tombstone_retention, "
                        "complete_transactions, stored_as_scd_type (2 or {table: 2}), track_history_column_list / "
                        "track_history_except_column_list {table: [cols]}, change_data_feed (true or [tables]), "
                        "sequence_by ([fields] or {table: [fields]}), parallel_tables")
    p.add_argument("--engine", choices=list(ENGINES), default=None,
                   help="Delta engine (auto: delta-spark in a session with Delta Lake that lakecdc did not start, "
                        "else delta-rs; LAKECDC_ENGINE sets it too)")
    p.add_argument("--table-name", action="append", default=[], metavar="TABLE=CATALOG_TABLE[@LOCATION]",
                   help="keep source TABLE as a table of the Spark catalog (delta-spark engine): "
                        "SRC.ORDERS=main.sales.orders, or ...=main.sales.orders@s3://bucket/orders for an "
                        "external table; repeatable")
    p.add_argument("--catalog-schema", metavar="CATALOG.SCHEMA",
                   help="keep every source table without a --table-name in this catalog schema "
                        "(SRC.ORDERS -> CATALOG.SCHEMA.src_orders; delta-spark engine)")
    add_wait_flag(p)


def add_wait_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                   help="one writer per target at a time: wait up to SECONDS for another run, stream batch, "
                        "maintain or check on --target to finish (default: stop at once with 'target ... is busy')")


def add_kafka_flags(p: argparse.ArgumentParser) -> None:
    """The flags that name Kafka topics as the input, in place of ``--input``."""
    g = p.add_argument_group("Kafka input (in place of --input)")
    g.add_argument("--kafka-bootstrap-servers", metavar="HOST:PORT[,...]",
                   help="read the topics of these brokers; each batch of records is landed under the target "
                        "(_lakecdc/kafka), then applied")
    g.add_argument("--subscribe", metavar="TOPIC[,TOPIC...]", help="the topics, by name")
    g.add_argument("--subscribe-pattern", metavar="REGEX", help="the topics, by a Java regular expression")
    g.add_argument("--starting-offsets", default="earliest", metavar="earliest|latest|JSON",
                   help="where partitions read for the first time start (default earliest)")
    g.add_argument("--kafka-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of Spark's Kafka source (kafka.security.protocol=SSL, maxOffsetsPerTrigger=N, "
                        "...); repeatable")


def kafka_input(args: argparse.Namespace, paths: object) -> Kafka | None:
    """The :class:`~lakecdc.run.kafka.Kafka` input the flags name, or None when ``--input`` does;
    exactly one of them must (a :class:`ConfigError` otherwise)."""
    given = args.kafka_bootstrap_servers is not None
    if given == bool(paths):
        raise ConfigError("give the input as --input PATH or as --kafka-bootstrap-servers with --subscribe "
                          "(or --subscribe-pattern), not both and not neither")
    if not given:
        if args.subscribe or args.subscribe_pattern:
            raise ConfigError("--subscribe and --subscribe-pattern need --kafka-bootstrap-servers")
        return None
    options = {}
    for item in args.kafka_option:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--kafka-option {item!r}: expected NAME=VALUE")
        options[name.strip()] = value
    return Kafka(args.kafka_bootstrap_servers, subscribe=args.subscribe, subscribe_pattern=args.subscribe_pattern,
                 starting_offsets=args.starting_offsets, options=options)
