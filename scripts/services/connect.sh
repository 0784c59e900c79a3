#!/usr/bin/env bash
# connect.sh start|stop|status: a Kafka Connect worker (distributed mode, one worker) on
# 127.0.0.1 with Debezium's PostgreSQL connector on its plugin path. It uses the broker that
# kafka.sh started (or CONNECT_BOOTSTRAP=HOST:PORT); its REST API listens on a free port (or
# CONNECT_PORT); `start` prints rest=http://127.0.0.1:PORT, also kept in the state file.
# Keys and values are written with Connect's JsonConverter (schema and payload); a connector's
# own key.converter / value.converter settings override that. CONNECT_HEAP: the JVM's heap (640m).
source "$(dirname "$0")/lib.sh"

start() {
  local dir cp port bootstrap
  bootstrap="${CONNECT_BOOTSTRAP:-$(state kafka bootstrap)}"
  [[ -n $bootstrap ]] || die "no broker: start kafka.sh first, or set CONNECT_BOOTSTRAP=HOST:PORT"
  dir="$(service_dir connect)"
  cp="$(jars connect)"
  "$SERVICES_HOME/fetch.sh" debezium-postgres
  port="${CONNECT_PORT:-$(free_port)}"
  cat >"$dir/worker.properties" <<PROPS
bootstrap.servers=$bootstrap
group.id=lakecdc-connect
listeners=http://127.0.0.1:$port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$port
plugin.path=$SERVICES_CACHE/plugins
plugin.discovery=service_load
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
config.storage.topic=lakecdc-connect-configs
offset.storage.topic=lakecdc-connect-offsets
status.storage.topic=lakecdc-connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.storage.partitions=1
status.storage.partitions=1
offset.flush.interval.ms=1000
scheduled.rebalance.max.delay.ms=0
PROPS
  log4j2 "$dir/log4j2.properties"
  launch connect java $(java_opts "${CONNECT_HEAP:-640m}") -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -cp "$cp" org.apache.kafka.connect.cli.ConnectDistributed "$dir/worker.properties"
  echo "rest=http://127.0.0.1:$port" >>"$dir/state"
  echo "bootstrap=$bootstrap" >>"$dir/state"
  await connect "serving its REST API on 127.0.0.1:$port" probe http "http://127.0.0.1:$port/connectors"
  echo "rest=http://127.0.0.1:$port"
}

case "${1:-}" in
  start) start ;;
  stop) stop_service connect ;;
  status) status connect ;;
  *) die "usage: connect.sh start|stop|status" ;;
esac
