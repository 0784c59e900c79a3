# Shared helpers of the service scripts (sourced, not run).
#
# Every service keeps its files in $LAKECDC_SERVICES_DIR/<service>/ (a temporary directory by
# default): its configuration, data, `log` and a `state` file of key=value lines (pid=, and the
# addresses it serves, such as bootstrap=127.0.0.1:PORT). The jars come from
# $LAKECDC_SERVICES_CACHE (default ~/.cache/lakecdc/services), filled by fetch.sh.

set -euo pipefail

SERVICES_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SERVICES_DIR="${LAKECDC_SERVICES_DIR:-${TMPDIR:-/tmp}/lakecdc-services}"
SERVICES_CACHE="${LAKECDC_SERVICES_CACHE:-$HOME/.cache/lakecdc/services}"
START_TIMEOUT="${LAKECDC_SERVICES_TIMEOUT:-120}"
PYTHON="${PYTHON:-python3}"

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

# profile_dir PROFILE: where fetch.sh puts a profile's jars; Connect plugins (debezium-*) go
# under plugins/, the directory a Connect worker's plugin.path names
profile_dir() {
  case "$1" in
    debezium-*) echo "$SERVICES_CACHE/plugins/$1" ;;
    *) echo "$SERVICES_CACHE/$1" ;;
  esac
}

# jars PROFILE...: the class path of these profiles' jars (fetching them if needed)
jars() {
  local cp="" p
  "$SERVICES_HOME/fetch.sh" "$@"
  for p in "$@"; do cp="${cp:+$cp:}$(profile_dir "$p")/*"; done
  echo "$cp"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now
free_port() { "$PYTHON" "$SERVICES_HOME/probe.py" free-port; }

# probe ARGS...: asks a service for an answer (see probe.py)
probe() { "$PYTHON" "$SERVICES_HOME/probe.py" "$@"; }

# service_dir NAME: the service's directory (created)
service_dir() { mkdir -p "$SERVICES_DIR/$1"; echo "$SERVICES_DIR/$1"; }

# state NAME KEY: a value of the service's state file ("" when absent)
state() {
  local f="$SERVICES_DIR/$1/state"
  [[ -f $f ]] && sed -n "s/^$2=//p" "$f" | tail -n 1 || true
}

# running NAME: true when the service's recorded process is alive
running() {
  local pid; pid="$(state "$1" pid)"
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# launch NAME CMD...: runs CMD in the background in its own session, output to the service's log;
# records pid= in the state file (which it starts afresh)
launch() {
  local name="$1"; shift
  local dir; dir="$(service_dir "$name")"
  running "$name" && die "$name already runs (pid $(state "$name" pid)); stop it first"
  setsid "$@" >"$dir/log" 2>&1 </dev/null &
  echo "pid=$!" >"$dir/state"
}

# await NAME WHAT CMD...: polls CMD until it succeeds; on time-out, or when the process ends,
# stops the service and fails with the tail of its log
await() {
  local name="$1" what="$2"; shift 2
  local deadline=$((SECONDS + START_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      fail_start "$name" "exited before $what"
    elif ((SECONDS >= deadline)); then
      fail_start "$name" "not $what after ${START_TIMEOUT}s"
    fi
    sleep 0.5
  done
}

fail_start() {
  local log="$SERVICES_DIR/$1/log"
  stop_service "$1"
  echo "$1 $2; the last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit 1
}

# stop_service NAME [SIGNAL]: ends the service's process group (SIGNAL, default TERM; KILL after 30s)
stop_service() {
  local name="$1" sig="${2:-TERM}" pid i
  pid="$(state "$name" pid)"
  [[ -z $pid ]] && return 0
  kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < 60; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  sed -i '/^pid=/d' "$SERVICES_DIR/$name/state"
}

# status NAME: prints the state file and whether the process runs; false when it does not
status() {
  if running "$1"; then
    echo "$1 runs"; cat "$SERVICES_DIR/$1/state"
  else
    echo "$1 is stopped"; return 1
  fi
}

# java_opts HEAP: the JVM options of a small service
# (LAKECDC_SERVICES_JAVA_OPTS replaces the default quick-start JIT setting, for benchmarks)
java_opts() { echo "-Xms64m -Xmx$1 -XX:+UseSerialGC ${LAKECDC_SERVICES_JAVA_OPTS:--XX:TieredStopAtLevel=1}"; }

# log4j2 FILE: writes a log4j2 configuration that logs INFO to standard output
log4j2() {
  cat >"$1" <<'LOG'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
LOG
}
