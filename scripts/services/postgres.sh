#!/usr/bin/env bash
# postgres.sh start|stop|status|psql [ARGS]: a PostgreSQL server on 127.0.0.1 (a free port, or
# PG_PORT) ready for Debezium: wal_level=logical, replication slots and WAL senders, a database
# `lakecdc` owned by the user `lakecdc` (password `lakecdc`, LOGIN REPLICATION). The cluster
# lives in $LAKECDC_SERVICES_DIR/postgres/data, initialised on the first start. PostgreSQL refuses
# to run as root: run as root, the script runs the server as the OS user `lakecdc-pg` (created
# when missing). `psql` runs psql as the superuser `postgres` on the server's socket.
source "$(dirname "$0")/lib.sh"

PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
[[ -x $PG_BIN/postgres ]] || die "PostgreSQL's programs were not found (set PG_BIN; Debian: apt-get install postgresql)"
PG_USER=lakecdc-pg

# AS_SERVER: the prefix that runs a command as the server's OS user
AS_SERVER=()
if ((EUID == 0)); then
  AS_SERVER=(setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups)
fi

sql() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SERVICES_DIR/postgres" -p "$(state postgres port)" -U postgres "$@"; }

start() {
  local dir port fresh=""
  dir="$(service_dir postgres)"
  port="${PG_PORT:-$(free_port)}"
  chmod a+x "$SERVICES_DIR"
  if ((EUID == 0)); then
    id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    chown "$PG_USER:" "$dir"
  fi
  if [[ ! -f $dir/data/PG_VERSION ]]; then
    "${AS_SERVER[@]}" "$PG_BIN/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C --auth-local=trust \
      --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed in $dir/data"; }
    echo "host replication all 127.0.0.1/32 scram-sha-256" >>"$dir/data/pg_hba.conf"
    fresh=1
  fi
  launch postgres "${AS_SERVER[@]}" "$PG_BIN/postgres" -D "$dir/data" -c listen_addresses=127.0.0.1 -c port="$port" \
    -c unix_socket_directories="$dir" -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=64MB -c max_connections=50
  cat >>"$dir/state" <<STATE
host=127.0.0.1
port=$port
database=lakecdc
user=lakecdc
password=lakecdc
dsn=postgresql://lakecdc:lakecdc@127.0.0.1:$port/lakecdc
STATE
  await postgres "answering on 127.0.0.1:$port" sql -c "select 1"
  if [[ -n $fresh ]]; then
    sql -c "create role lakecdc login replication password 'lakecdc'" -c "create database lakecdc owner lakecdc" \
      || fail_start postgres "could not create the user and database lakecdc"
  fi
  echo "dsn=postgresql://lakecdc:lakecdc@127.0.0.1:$port/lakecdc"
}

case "${1:-}" in
  start) start ;;
  stop) stop_service postgres INT ;;
  status) status postgres ;;
  psql) shift; sql "$@" ;;
  *) die "usage: postgres.sh start|stop|status|psql [ARGS]" ;;
esac
