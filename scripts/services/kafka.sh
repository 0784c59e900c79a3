#!/usr/bin/env bash
# kafka.sh start|stop|status: a single-node Apache Kafka (KRaft, combined broker and controller)
# on 127.0.0.1, with a free port. Its storage is formatted once, with a new cluster id, in
# $LAKECDC_SERVICES_DIR/kafka/; `start` prints bootstrap=127.0.0.1:PORT, also kept in the state file.
# KAFKA_PORT chooses the port; KAFKA_HEAP the JVM's heap (default 512m).
source "$(dirname "$0")/lib.sh"

start() {
  local dir cp port controller
  dir="$(service_dir kafka)"
  cp="$(jars kafka)"
  port="${KAFKA_PORT:-$(free_port)}"
  controller="$(free_port)"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
  log4j2 "$dir/log4j2.properties"
  local java=(java $(java_opts "${KAFKA_HEAP:-512m}") -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$cp")
  if [[ ! -f $dir/data/meta.properties ]]; then
    local id; id="$("${java[@]}" kafka.tools.StorageTool random-uuid)"
    "${java[@]}" kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" >"$dir/format.log" 2>&1 \
      || { cat "$dir/format.log" >&2; die "could not format the storage in $dir/data"; }
  fi
  launch kafka "${java[@]}" kafka.Kafka "$dir/server.properties"
  echo "bootstrap=127.0.0.1:$port" >>"$dir/state"
  await kafka "answering on 127.0.0.1:$port" probe kafka "127.0.0.1:$port"
  echo "bootstrap=127.0.0.1:$port"
}

case "${1:-}" in
  start) start ;;
  stop) stop_service kafka ;;
  status) status kafka ;;
  *) die "usage: kafka.sh start|stop|status" ;;
esac
