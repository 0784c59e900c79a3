#!/usr/bin/env bash
# Set up and run every test, as CI does (.ci/run calls this), on the two ends of the PySpark
# releases lakecdc supports:
#   1. the newest PySpark (.venv-newest): the whole suite, on delta-rs (Delta Lake has no release
#      for that Spark yet), and the API tests again on a session built as a notebook user builds one;
#   2. the oldest (.venv, what ./scripts/setup.sh installs): the behaviour suite on Delta's own
#      engine, delta-spark, and the tests that compare the two engines table by table.
# Arguments go to pytest in the first two passes (./scripts/test.sh -x).
set -euo pipefail
cd "$(dirname "$0")/.."
NEWEST=${LAKECDC_PYSPARK_NEWEST:-4.3.0}
OLDEST=${LAKECDC_PYSPARK_OLDEST:-4.0.5}

# the two environments install side by side (mostly downloads and unpacking); the JVM packages are
# resolved after, one environment at a time, since both resolve into the same Ivy cache
LAKECDC_JARS=off LAKECDC_PYSPARK=$OLDEST ./scripts/setup.sh > >(sed 's/^/[oldest] /') 2>&1 &
OLDEST_SETUP=$!
LAKECDC_JARS=off LAKECDC_VENV=.venv-newest LAKECDC_PYSPARK=$NEWEST ./scripts/setup.sh > >(sed 's/^/[newest] /') 2>&1 &
NEWEST_SETUP=$!
wait "$OLDEST_SETUP" || { echo "test: setup of PySpark $OLDEST failed" >&2; exit 1; }
wait "$NEWEST_SETUP" || { echo "test: setup of PySpark $NEWEST failed" >&2; exit 1; }
if [ "${LAKECDC_JARS:-}" != "off" ]; then
  for venv in .venv .venv-newest; do
    "$venv/bin/python" -m lakecdc.spark.jars 2>/dev/null | grep '^lakecdc' || true
  done
fi

# property tests: enough examples to matter, few enough for CI's budget on 2 cores
export LAKECDC_PROPERTY_EXAMPLES="${LAKECDC_PROPERTY_EXAMPLES:-15}"
export LAKECDC_PROPERTY_CLI_EXAMPLES="${LAKECDC_PROPERTY_CLI_EXAMPLES:-3}"
export LAKECDC_PROPERTY_DERANDOMIZE="${LAKECDC_PROPERTY_DERANDOMIZE:-1}"
export LAKECDC_KAFKA_EXAMPLES="${LAKECDC_KAFKA_EXAMPLES:-2}"
# an engine the pass names must be there: a missing Delta jar fails its tests instead of skipping them;
# so must the services (Kafka, Kafka Connect, PostgreSQL) the tests start themselves
export LAKECDC_REQUIRE_ENGINES=1
export LAKECDC_REQUIRE_SERVICES=1
# two test processes (pytest-xdist), a test file per process: much of a test's time is Spark's
# and Python's latency, not CPU, so two share the 2 cores well (three were slower on 2 cores:
# the whole run 42.7 min against 40, each pass longer; LAKECDC_TEST_PROCESSES changes it)
# (the slowest tests are listed at the end of each pass, to keep CI's time in view)
PYTEST=(-m pytest -q -p no:cacheprovider -n "${LAKECDC_TEST_PROCESSES:-2}" --dist loadfile --durations=15)

echo "test: types (mypy over lakecdc/, against PySpark $OLDEST)"
.venv/bin/python -m mypy lakecdc
echo "test: PySpark $NEWEST, delta-rs: the API tests on a user's session (Spark's defaults, a zone west of UTC, ANSI on)"
# (one file: its tests spread over both processes)
LAKECDC_TEST_SESSION=user LAKECDC_TEST_TZ=America/Los_Angeles LAKECDC_TEST_ENGINES=delta-rs \
  .venv-newest/bin/python "${PYTEST[@]}" --dist load tests/test_apply.py "$@"
echo "test: PySpark $NEWEST, delta-rs: the rest of the suite but the Kafka tests (no Kafka connector for this Spark)"
LAKECDC_TEST_ENGINES=delta-rs .venv-newest/bin/python "${PYTEST[@]}" -m "not services" --ignore tests/test_apply.py "$@"
echo "test: PySpark $OLDEST, delta-spark: the behaviour suite, the engines compared; the Kafka tests on real services"
LAKECDC_TEST_ENGINES=delta-spark .venv/bin/python "${PYTEST[@]}" -m "engines or both_engines or services"
