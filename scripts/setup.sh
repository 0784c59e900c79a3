#!/usr/bin/env bash
# Set up lakecdc in ./.venv (or the directory LAKECDC_VENV names): checks Java (Spark needs a Java 17 runtime) and Python, installs the
# package with its test tools and PySpark (LAKECDC_PYSPARK=VERSION picks the release). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  echo "setup: Java was not found. Spark needs a Java 17 runtime:" >&2
  echo "       Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless   (or set JAVA_HOME)" >&2
  exit 1
fi
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
echo "setup: $("$JAVA" -version 2>&1 | head -n 1)"

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "setup: Python 3.10 or newer is needed (found $("$PY" --version 2>&1))" >&2
  exit 1
fi
VENV=${LAKECDC_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# The PySpark release to run on: LAKECDC_PYSPARK=4.2.1 ./scripts/setup.sh installs that one (any
# release lakecdc supports, 4.0 to 4.3). The default is the release CI verifies with both Delta
# engines (docs/engines.md, "The Delta and Spark versions"; Delta has no release for Spark 4.3 yet).
"$VENV/bin/python" -m pip install --quiet -e '.[dev]' "pyspark==${LAKECDC_PYSPARK:-4.0.5}"
"$VENV/bin/python" -c 'import lakecdc, pyspark; print("setup: pyspark", pyspark.__version__)'
# Spark's classes archived for faster JVM start-ups (~5 s a process; lakecdc/spark/classarchive.py).
# Optional: LAKECDC_CLASS_ARCHIVE=off skips it, and a failure only leaves Spark starting slower.
if [ "${LAKECDC_CLASS_ARCHIVE:-}" != "off" ]; then
  echo "setup: archiving Spark's classes for faster start-ups (about a minute, once)"
  "$VENV/bin/python" -m lakecdc.spark.classarchive || true
fi
# Delta Lake's, Kafka's and Avro's JVM packages for the installed Spark, resolved once from Maven
# Central into ~/.cache/lakecdc/ivy (lakecdc/spark/jars.py); later sessions start from the cache offline.
# LAKECDC_JARS=off skips it; without network lakecdc says so and runs with the delta-rs engine.
if [ "${LAKECDC_JARS:-}" != "off" ]; then
  echo "setup: resolving Delta Lake's Spark packages (once; cached under ~/.cache/lakecdc/ivy)"
  "$VENV/bin/python" -m lakecdc.spark.jars 2>/dev/null | grep '^lakecdc' || true
fi
echo "setup: ready ($VENV/bin/lakecdc --help)"
