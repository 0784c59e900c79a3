"""The settings model: one frozen ``lakecdc.Settings``, reused, overridden per call, and the
same value checks (naming the setting, the value, what is accepted and where it was written)
whether a value comes from a keyword, a flag, a ``--config`` file, a job file or a contract."""

from __future__ import annotations

import datetime as dt
import inspect
import pickle

import pytest

import lakecdc
from lakecdc import ConfigError, Settings
from lakecdc.check.contracts import load_contract
from lakecdc.cli import build_parser, main
from lakecdc.config.settings import (
    DEFAULT_PK_UPDATE,
    DEFAULT_TOMBSTONE_RETENTION,
    DEFAULT_TRIGGER,
    DEFAULT_VACUUM_RETENTION,
)
from lakecdc.config.sources import from_cli
from lakecdc.decode import DECODERS
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.jobs import Maintenance, Streaming, load_job
from tests.helpers import ogg, rows, write_jsonl


def test_a_settings_object_is_frozen_and_keeps_one_form_of_each_value():
    """Fields take apply's forms and keep one: per-table settings as {table: value} with "*"."""
    s = Settings(format="debezium-json", keys={"S.T": ["ID"]}, pk_update="update",
                 tombstone_retention={"S.T": "30d"}, stored_as_scd_type="2", change_data_feed=True)
    assert s.keys == {"S.T": ("ID",)} and s.pk_update == {"*": "update"}
    assert s.retention_for("S.T") == dt.timedelta(days=30) and s.retention_for("S.U") == DEFAULT_TOMBSTONE_RETENTION
    assert s.scd_type("ANY") == 2 and s.wants_change_data_feed("ANY")
    with pytest.raises(AttributeError):
        s.format = "ogg-json"  # type: ignore[misc]
    assert Settings(**{n: getattr(s, n) for n in Settings.names()}) == s  # its own forms parse to themselves
    assert pickle.loads(pickle.dumps(s)) == s  # (a stream on Spark Connect ships it to the server)


def test_overrides_win_over_the_settings_object_which_stays_as_it_was():
    """``Settings.build(base, **overrides)`` (what apply and stream do) replaces those fields only."""
    base = Settings(format="debezium-json", keys={"S.T": ["ID"]}, pk_update="abend")
    run = Settings.build(base, pk_update={"S.T": "update"}, parallel_tables=1)
    assert run.pk_update_for("S.T") == "update" and run.pk_update_for("S.U") == DEFAULT_PK_UPDATE
    assert run.keys == base.keys and run.format == "debezium-json" and run.parallel_tables == 1
    assert base.pk_update_for("S.T") == "abend" and base.parallel_tables == 4


def test_the_dlt_forms_of_keys_and_scd_type_are_accepted():
    """``keys=["ID"]`` is every keyless table's key; ``stored_as_scd_type`` takes 1, 2, "1", "2"."""
    assert Settings(keys=["ID", "V"]).keys_for("ANY.TABLE") == ("ID", "V")
    assert Settings(keys={"S.T": "A, B"}).keys_for("S.T") == ("A", "B") and Settings().keys_for("S.T") is None
    assert [Settings(stored_as_scd_type=v).scd_type("T") for v in (1, 2, "1", "2")] == [1, 2, 1, 2]
    for bad in (3, "two", True):
        with pytest.raises(ConfigError, match=r"stored_as_scd_type .*: use 1 \(current state\) or 2"):
            Settings(stored_as_scd_type=bad)


def test_to_rows_and_apply_share_the_pk_update_default():
    """One default for a primary-key update, wherever it applies."""
    assert inspect.signature(lakecdc.to_rows).parameters["pk_update"].default == DEFAULT_PK_UPDATE
    assert Settings().pk_update_for("ANY") == DEFAULT_PK_UPDATE == "delete-insert"
    args = build_parser().parse_args(["apply", "--format", "ogg-json", "--input", "x", "--target", "y"])
    assert from_cli(args, read_gg_properties).pk_update_for("ANY") == DEFAULT_PK_UPDATE


def test_the_other_defaults_are_stated_once():
    """A stream's trigger, maintenance's retentions and the job's maintenance: the same values from
    config.settings wherever a signature or a job file leaves them out."""
    assert inspect.signature(lakecdc.stream).parameters["trigger"].default == DEFAULT_TRIGGER
    assert Streaming().trigger == DEFAULT_TRIGGER
    maintain = inspect.signature(lakecdc.maintain).parameters
    assert maintain["vacuum_retention"].default == DEFAULT_VACUUM_RETENTION
    assert maintain["tombstone_retention"].default == DEFAULT_TOMBSTONE_RETENTION
    assert Maintenance().vacuum_retention == DEFAULT_VACUUM_RETENTION


def test_format_is_required_and_the_message_lists_the_formats(tmp_path):
    """No format is assumed: apply, stream, foreach_batch and read_changes refuse a call without
    one (here or in ``settings``), listing the registered formats, before anything is created."""
    (tmp_path / "landing").mkdir()
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    calls = [lambda: lakecdc.apply(landing, lake), lambda: lakecdc.stream(landing, lake),
             lambda: lakecdc.foreach_batch(lake), lambda: lakecdc.read_changes(landing),
             lambda: lakecdc.apply(landing, lake, settings=Settings(keys={"S.T": ["ID"]}))]
    for call in calls:
        with pytest.raises(ConfigError) as exc:
            call()
        assert "say which format the change files are in: format=NAME" in str(exc.value)
        assert all(name in str(exc.value) for name in DECODERS), "every registered format is listed"
    assert not lake.exists()
    assert Settings(keys=["ID"]).format == "", "a Settings may leave the format to the call"


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: lakecdc.apply(p, 5, format="ogg-json"), "apply(target=5): expected a path"),
    (lambda p: lakecdc.apply(None, p, format="ogg-json"), "apply(inputs=None): expected a file or directory"),
    (lambda p: lakecdc.apply([p, 3], p, format="ogg-json"), "apply(inputs=3): expected a path"),
    (lambda p: lakecdc.apply(p, p, format="ogg-json", progress="loud"), "apply(progress='loud'): expected a function"),
    (lambda p: lakecdc.apply(p, p, format="ogg-json", spark="local"), "apply(spark='local'): expected a SparkSession"),
    (lambda p: lakecdc.apply(p, p, format="ogg-json", reapply=5), "reapply 5: use a path or pattern"),
    (lambda p: lakecdc.apply(p / "missing", p, format="ogg-json"), "input '"),
    (lambda p: lakecdc.stream(p, None, format="ogg-json"), "stream(target=None): expected a path"),
    (lambda p: lakecdc.stream(p, p / "lake", format="ogg-json", on_batch=1), "stream(on_batch=1): expected a function"),
    (lambda p: lakecdc.foreach_batch(3, format="ogg-json"), "foreach_batch(target=3): expected a path"),
    (lambda p: lakecdc.to_rows("events"), "to_rows(events='events'): expected a Spark DataFrame"),
    (lambda p: lakecdc.to_ops(None), "to_ops(events=None): expected a Spark DataFrame"),
    (lambda p: lakecdc.read_table(7), "read_table(path=7): expected a path"),
    (lambda p: lakecdc.read_table(p, version=-1), "read_table(version=-1): expected a table version"),
    (lambda p: lakecdc.read_changes(p, format="ogg-json", spark=1), "read_changes(spark=1): expected a SparkSession"),
    (lambda p: lakecdc.maintain(5), "maintain(target=5): expected a path"),
    (lambda p: lakecdc.maintain(p, vacuum_retention="a week"), "vacuum_retention: duration 'a week'"),
    (lambda p: lakecdc.maintain(p, tombstone_retention=7), "tombstone_retention: duration '7': expected a number and a unit"),
    (lambda p: lakecdc.maintain(p, tables="S.T"), "no table 'S.T' under"),
])
def test_a_wrong_argument_is_a_config_error_with_advice(tmp_path, call, message):
    """Arguments of the public functions are checked before any work: a lakecdc ConfigError naming
    the function, the argument and what to pass, never a TypeError or AttributeError from inside."""
    with pytest.raises(ConfigError) as exc:
        call(tmp_path)
    assert message in str(exc.value)
    assert not (tmp_path / "lake").exists()
    if "no table" not in message:  # (refused before the target's lease is taken)
        assert not (tmp_path / "_lakecdc").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"pk_update": "sideways"}, "pk_update 'sideways': use abend, update, delete-insert"),
    ({"pk_update": {"S.T": "sideways"}}, "pk_update 'sideways' for table 'S.T': use abend, update, delete-insert"),
    ({"tombstone_retention": "a week"}, "tombstone_retention: duration 'a week': expected a number and a unit"),
    ({"parallel_tables": 0}, "parallel_tables 0: use a number of tables, 1 or more"),
    ({"engine": "spark"}, "engine 'spark': use auto, delta-rs, delta-spark"),
    ({"sequence_by": {"S.T": "V:float"}}, "sequence_by for table 'S.T': 'V:float' is not a field"),
    ({"column_list": {"S.T": ["A"]}, "except_column_list": {"S.T": ["B"]}}, "give column_list or except_column_list"),
])
def test_a_wrong_keyword_value_names_the_setting_the_value_and_what_is_accepted(tmp_path, kwargs, message):
    """apply refuses it before anything starts (no Spark, nothing written)."""
    with pytest.raises(ConfigError) as exc:
        lakecdc.apply(tmp_path / "landing", tmp_path / "lake", **kwargs)
    assert message in str(exc.value)
    assert not (tmp_path / "lake").exists()


def test_an_unknown_setting_is_refused_with_the_list_of_settings(tmp_path):
    """A misspelt keyword fails at once, for apply and stream alike, listing the known names."""
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) pk_updates; the settings are format, options, keys"):
        lakecdc.apply(tmp_path, tmp_path / "lake", pk_updates="update")
    with pytest.raises(ConfigError, match="unknown setting.*colour"):
        Settings().with_(colour="red")
    with pytest.raises(ConfigError, match="expected a lakecdc.Settings"):
        lakecdc.apply(tmp_path, tmp_path / "lake", settings={"format": "ogg-json"})  # type: ignore[arg-type]


def test_a_wrong_flag_value_names_the_flag(tmp_path, capsys):
    """The CLI words the same check for the flag that gave the value."""
    base = ["apply", "--format", "ogg-json", "--input", str(tmp_path), "--target", str(tmp_path / "lake")]
    assert main([*base, "--tombstone-retention", "a week"]) == 2
    assert "--tombstone-retention: duration 'a week': expected a number and a unit" in capsys.readouterr().err
    assert main([*base, "--parallel-tables", "0"]) == 2
    assert "--parallel-tables 0: use a number of tables, 1 or more" in capsys.readouterr().err
    assert main([*base, "--sequence-by", "S.T=V:float"]) == 2
    assert "--sequence-by for table 'S.T': 'V:float' is not a field" in capsys.readouterr().err


def test_a_wrong_config_file_value_names_the_file_line_and_key(tmp_path, capsys):
    """``--config`` YAML takes the settings by name; a mistake names file, line and key."""
    config = tmp_path / "apply.yaml"
    base = ["apply", "--format", "ogg-json", "--input", str(tmp_path), "--target", str(tmp_path / "lake"),
            "--config", str(config)]
    config.write_text("format: ogg-json\npk_update:\n  S.T: update\n  S.U: sideways\n")
    assert main(base) == 2
    assert f"{config}:4: pk_update.S.U: 'sideways': use abend, update, delete-insert" in capsys.readouterr().err
    config.write_text("format: ogg-json\nstored_as_scd_type: 3\n")
    assert main(base) == 2
    assert f"{config}:2: stored_as_scd_type: 3: use 1 (current state) or 2" in capsys.readouterr().err
    config.write_text("format: ogg-json\npk_udpate: update\n")
    assert main(base) == 2
    assert f"{config}:2: pk_udpate: unknown setting; the settings are format, options" in capsys.readouterr().err


@pytest.mark.parametrize(("body", "message"), [
    ("pk_update: sideways\n", ":4: pk_update: 'sideways': use abend, update, delete-insert"),
    ("tables:\n  pk_update: {S.T: sideways}\n", ":5: tables.pk_update.S.T: 'sideways': use abend"),
    ("tables:\n  stored_as_scd_type: two\n", ":5: tables.stored_as_scd_type: 'two': use 1 (current state) or 2"),
    ("parallel_tables: many\n", ":4: parallel_tables: 'many': use a number of tables, 1 or more"),
    ("engine: spark\n", ":4: engine: 'spark': use auto, delta-rs, delta-spark"),
    ("maintenance:\n  every_runs: twelve\n", ":5: maintenance.every_runs: expected an integer, found 'twelve'"),
])
def test_a_wrong_job_file_value_names_the_file_line_and_key(tmp_path, body, message):
    """Job files reach the same parsers; the message names the job file, the line and the key."""
    path = tmp_path / "job.yaml"
    path.write_text("target: lake\nsources:\n  - {input: x, format: ogg-json}\n" + body)
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_a_job_files_settings_are_one_settings_object(tmp_path):
    """A job's top-level value is every table's; ``tables:`` adds per-table values over it."""
    path = tmp_path / "job.yaml"
    path.write_text("target: lake\nsources:\n  - {input: x, format: canal-json, options: {layout: x}}\n"
                    "pk_update: abend\ntombstone_retention: 2d\nmin_file_age: 30s\n"
                    "tables:\n  pk_update: {S.T: update}\n  keys: {S.T: [ID]}\n  include: S.*\n")
    job = load_job(path)
    s = job.settings_for(job.sources[0])
    assert (s.format, s.options) == ("canal-json", {"layout": "x"})
    assert s.pk_update_for("S.T") == "update" and s.pk_update_for("S.U") == "abend"
    assert s.default_retention == dt.timedelta(days=2) and s.min_file_age == 30.0
    assert s.keys_for("S.T") == ("ID",) and job.include == ("S.*",)


def test_job_and_config_files_take_environment_variables(tmp_path, monkeypatch):
    """``${NAME}`` in a job file is the environment variable's value (dev and prod targets from
    one file); an unset one is an error naming the file and line."""
    path = tmp_path / "job.yaml"
    path.write_text("target: ${LAKE_ROOT}/lake\nsources:\n  - {input: x, format: ogg-json}\n"
                    "tables:\n  keys: {S.T: [${KEY_COLUMN}]}\n")
    monkeypatch.setenv("LAKE_ROOT", "/data/prod")
    monkeypatch.setenv("KEY_COLUMN", "ID")
    job = load_job(path)
    assert job.target == "/data/prod/lake" and job.settings.keys_for("S.T") == ("ID",)
    monkeypatch.delenv("KEY_COLUMN")
    with pytest.raises(ConfigError, match=r"job.yaml:5: \$\{KEY_COLUMN\}: the environment variable KEY_COLUMN is not set"):
        load_job(path)


def test_a_wrong_contract_value_names_the_file_line_and_property(tmp_path):
    """A contract's ``lakecdc.*`` properties use the same parsers."""
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v3.1.0\nkind: DataContract\nid: c\nversion: 1.0.0\nstatus: active\n"
                    "schema:\n  - name: T\n    properties: [{name: A}]\ncustomProperties:\n"
                    "  - {property: lakecdc.tombstone_retention, value: soon}\n")
    with pytest.raises(ConfigError, match=r"c.yaml:10: customProperties.0.value: duration 'soon': expected a number"):
        load_contract(path)


@pytest.mark.spark
def test_one_settings_object_serves_many_runs_and_keywords_override_it(spark, tmp_path):
    """Built once, a Settings applies to two targets the same way; a keyword overrides one field
    for that call only (here ``pk_update``: abend stops the first target's key change, update
    applies it in the second)."""
    landing = tmp_path / "landing"
    write_jsonl(landing / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}),
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 2, "V": "b"}),
    ])
    base = Settings(format="ogg-json", keys=["ID"], pk_update="abend")  # DLT's keys form: one table
    with pytest.raises(lakecdc.PrimaryKeyUpdateError):
        lakecdc.apply(landing, tmp_path / "one", settings=base, spark=spark)
    summary = lakecdc.apply(landing, tmp_path / "two", settings=base, pk_update="update", spark=spark)
    assert summary.ok and rows(summary.table("S.T").target) == [{"ID": 2, "V": "b"}]
    assert base.pk_update_for("S.T") == "abend"


@pytest.mark.spark
def test_a_list_of_keys_is_the_key_of_a_one_table_input(spark, tmp_path):
    """``keys=["ID"]`` (DLT's form) keys the input's one table; an input with several tables it
    would key is refused, saying how to name each table's key; naming them applies the same run."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}),
                                     ogg("S.B", "I", "00:00:02", 2, after={"ID": 2, "V": "b"})])
    with pytest.raises(ConfigError, match=(r"keys=\['ID'\] is the key of a one-table input, but this input holds "
                                           r"2 tables \(S.A, S.B\): name each table's key, keys=\{'S.A': \['ID'\]")):
        lakecdc.apply(landing, lake, format="ogg-json", keys=["ID"], spark=spark)
    summary = lakecdc.apply(landing, lake, format="ogg-json", keys={"S.A": ["ID"], "S.B": ["ID"]}, spark=spark)
    assert summary.ok and rows(lake / "S.A") == [{"ID": 1, "V": "a"}] and rows(lake / "S.B") == [{"ID": 2, "V": "b"}]
