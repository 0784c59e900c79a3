"""Session settings a run sets for its duration: always JOB_CONF; interpreted expressions for a
small run (no Java generated and compiled per query); a setting the session refuses."""

from __future__ import annotations

import json

import pytest

import lakecdc
from lakecdc.errors import ConfigError
from lakecdc.spark import conf

pytestmark = pytest.mark.spark

FACTORY = "spark.sql.codegen.factoryMode"


def test_run_conf_adds_the_interpreted_settings_up_to_the_limit(monkeypatch) -> None:
    monkeypatch.delenv("LAKECDC_INTERPRETED_RUN_BYTES", raising=False)
    small, big = conf.run_conf(conf.INTERPRETED_RUN_BYTES), conf.run_conf(conf.INTERPRETED_RUN_BYTES + 1)
    assert small == {**conf.JOB_CONF, **conf.INTERPRETED_CONF} and small[FACTORY] == "NO_CODEGEN"
    assert big == conf.JOB_CONF
    monkeypatch.setenv("LAKECDC_INTERPRETED_RUN_BYTES", "-1")  # never
    assert conf.run_conf(0) == conf.JOB_CONF
    monkeypatch.setenv("LAKECDC_INTERPRETED_RUN_BYTES", "1 MiB")
    with pytest.raises(ConfigError, match=r"LAKECDC_INTERPRETED_RUN_BYTES='1 MiB': expected a number of bytes"):
        conf.run_conf(0)


@pytest.mark.parametrize("limit, expected", [(None, "NO_CODEGEN"), ("-1", None)])
def test_a_small_run_evaluates_interpreted_and_restores_the_session(spark, tmp_path, monkeypatch, limit, expected) -> None:
    if limit is None:
        monkeypatch.delenv("LAKECDC_INTERPRETED_RUN_BYTES", raising=False)
    else:
        monkeypatch.setenv("LAKECDC_INTERPRETED_RUN_BYTES", limit)
    landing = tmp_path / "landing"
    landing.mkdir()
    message = {"table": "S.T", "op_type": "I", "op_ts": "2024-01-01 00:00:00.000000", "pos": "1",
               "primary_keys": ["ID"], "after": {"ID": 1, "V": "a"}}
    (landing / "1.json").write_text(json.dumps(message) + "\n")
    seen: list[str | None] = []
    before = spark.conf.get(FACTORY, None)
    summary = lakecdc.apply(landing, tmp_path / "lake", format="ogg-json", spark=spark,
                            progress=lambda msg: seen.append(spark.conf.get(FACTORY, None)) if "consolidating" in msg else None)
    assert summary.ok and summary.tables[0].inserted == 1
    assert seen == [expected]  # while the table was consolidated
    assert spark.conf.get(FACTORY, None) == before  # and as it was afterwards
    assert lakecdc.read_table(tmp_path / "lake" / "S.T", spark=spark).collect()[0]["V"] == "a"


class _Refusing:
    """A session's conf that refuses one setting, as a managed platform's allow-list does."""

    def __init__(self, refused: str) -> None:
        self.conf, self.refused, self.values = self, refused, {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value) -> None:
        if key == self.refused:
            raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] {key}")
        self.values[key] = value

    def unset(self, key) -> None:
        self.values.pop(key, None)


def test_an_interpreted_setting_the_session_refuses_is_skipped_but_a_required_one_is_not() -> None:
    refusing = _Refusing(FACTORY)
    with conf.job_conf(refusing, conf.run_conf(0)):  # type: ignore[arg-type]
        assert FACTORY not in refusing.values and refusing.values["spark.sql.codegen.wholeStage"] == "false"
    assert refusing.values == {}  # what was set is unset again
    strict = _Refusing("spark.sql.constraintPropagation.enabled")  # (set after the exact-strings one)
    with pytest.raises(RuntimeError, match="CONFIG_NOT_AVAILABLE"), conf.job_conf(strict):  # type: ignore[arg-type]
        pass
    assert strict.values == {}  # what was set before the refusal is unset again


@pytest.mark.spark
def test_settings_are_read_without_a_default_spark_would_check(spark) -> None:
    """``spark.conf.get(key, "")`` fails for a setting Spark checks (the session zone) when the
    session never set it, as in a notebook's own session; ``conf_value`` gives the value or the
    default instead."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    assert conf.conf_value(spark, "spark.sql.session.timeZone") == zone
    assert conf.conf_value(spark, "lakecdc.test.never.set") is None
    assert conf.conf_value(spark, "lakecdc.test.never.set", "x") == "x"
    spark.conf.unset("spark.sql.session.timeZone")  # as a plain builder's session has it
    try:
        with pytest.raises(Exception, match="TIME_ZONE"):  # what the decoders used to do
            spark.conf.get("spark.sql.session.timeZone", "")
        from lakecdc.decode.times import session_is_utc

        assert session_is_utc(spark) in (True, False)  # answers instead of failing
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_a_worker_without_a_module_is_explained() -> None:
    from lakecdc.errors import explain

    PythonException = type("PythonException", (Exception,), {})
    exc = PythonException("Traceback ...\n    import pyarrow as pa\nModuleNotFoundError: No module named 'pyarrow'\n")
    text = explain(exc)
    assert "'pyarrow'" in text and "PYSPARK_PYTHON" in text
    assert explain(ConfigError("bad flag")) == "bad flag"
    assert explain(ValueError("x")) == "ValueError: x"
