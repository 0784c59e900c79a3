#!/usr/bin/env bash
# registry.sh install|start|stop|status: a schema registry serving the Confluent-compatible REST API
# (`/subjects`, `/schemas/ids/N`, references included) on 127.0.0.1: karapace (Aiven, Apache-2.0,
# Python), which keeps its schemas in the broker's `_schemas` topic. It uses the broker that kafka.sh
# started (or REGISTRY_BOOTSTRAP=HOST:PORT) and listens on a free port (or REGISTRY_PORT); `start`
# prints url=http://127.0.0.1:PORT, also kept in the state file, once the registry is the primary and
# has read its topic.
#
# `install` (run by `start` when needed) puts karapace in $LAKECDC_SERVICES_CACHE/karapace/ once:
# its source at the pinned release, from vendor/karapace-$KARAPACE_VERSION.tar.gz beside this script
# (`git archive` of the release's src/karapace, LICENSE and requirements: karapace is on no package
# registry), else from KARAPACE_SOURCE (a .tar.gz laid out the same, or a git repository or URL
# holding the release's tag); a virtual environment of KARAPACE_PYTHON (python3; 3.11 or newer) with the release's
# pinned requirements from PyPI, but Apache Avro's own release for the patched fork karapace pins
# (Avro's Python package is alike where karapace uses it); and, for the Go library karapace loads
# for Protobuf schemas (its Go module needs a fork no module proxy serves), a stub built with cc
# that refuses Protobuf schemas: this registry serves Avro and JSON Schema.
source "$(dirname "$0")/lib.sh"

KARAPACE_VERSION=6.2.0
KARAPACE_COMMIT=6dcc96fff88d03ff97e19ae1a1851c735a75ad73
KARAPACE_GIT=https://github.com/Aiven-Open/karapace.git
AVRO_VERSION=1.11.3
KARAPACE_PYTHON="${KARAPACE_PYTHON:-python3}"
KARAPACE_HOME="$SERVICES_CACHE/karapace"
VENDORED="$SERVICES_HOME/vendor/karapace-$KARAPACE_VERSION.tar.gz"
KARAPACE_PATHS=(src/karapace LICENSE requirements/requirements.txt)

# unpack_source DIR: karapace's release tree (src/karapace, LICENSE, requirements/) into DIR
unpack_source() {
  local dest="$1" src="${KARAPACE_SOURCE:-}" tmp
  mkdir -p "$dest"
  if [[ -z $src && -f $VENDORED ]]; then
    src="$VENDORED"
  fi
  if [[ -n $src && -f $src ]]; then
    tar -xzf "$src" -C "$dest" --strip-components=1 || die "could not unpack $src"
    return
  fi
  src="${src:-$KARAPACE_GIT}"
  tmp="$(mktemp -d)"
  git -C "$tmp" init -q
  git -C "$tmp" fetch -q --depth 1 "$src" "refs/tags/$KARAPACE_VERSION" \
    || die "could not fetch karapace $KARAPACE_VERSION from $src (set KARAPACE_SOURCE to a copy)"
  [[ $(git -C "$tmp" rev-parse 'FETCH_HEAD^{commit}') == "$KARAPACE_COMMIT" ]] \
    || die "karapace's tag $KARAPACE_VERSION at $src is not commit $KARAPACE_COMMIT"
  git -C "$tmp" archive FETCH_HEAD "${KARAPACE_PATHS[@]}" | tar -x -C "$dest"
  rm -rf "$tmp"
}

install() {
  local stamp build py site
  "$KARAPACE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "karapace $KARAPACE_VERSION needs Python 3.11 or newer (KARAPACE_PYTHON=$KARAPACE_PYTHON)"
  command -v cc >/dev/null || die "cc is needed to build the stub of karapace's Protobuf library (apt-get install gcc)"
  stamp="$KARAPACE_COMMIT avro-$AVRO_VERSION $("$KARAPACE_PYTHON" -c 'import sys; print(sys.version.split()[0])')"
  [[ -f $KARAPACE_HOME/.installed && $(cat "$KARAPACE_HOME/.installed") == "$stamp" ]] && return 0
  echo "installing karapace $KARAPACE_VERSION into $KARAPACE_HOME" >&2
  build="$KARAPACE_HOME.tmp"
  rm -rf "$build" && mkdir -p "$build"
  unpack_source "$build/source"
  "$KARAPACE_PYTHON" -m venv "$build/venv"
  py="$build/venv/bin/python"
  grep -v '^avro @' "$build/source/requirements/requirements.txt" >"$build/requirements.txt"
  echo "avro==$AVRO_VERSION" >>"$build/requirements.txt"
  "$py" -m pip install -q --no-input -r "$build/requirements.txt" >"$build/pip.log" 2>&1 \
    || { tail -n 30 "$build/pip.log" >&2; die "could not install karapace's requirements (pip's output above)"; }
  site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "__version__ = \"$KARAPACE_VERSION\"" >"$build/source/src/karapace/version.py"
  # the venv is moved into place below: the path file names the final location
  echo "$KARAPACE_HOME/source/src" >"$site/karapace-source.pth"
  protopace_stub "$site/protopacelib.so"
  rm -rf "$KARAPACE_HOME" && mv "$build" "$KARAPACE_HOME"
  "$KARAPACE_HOME/venv/bin/python" -c 'import karapace.__main__' \
    || die "karapace does not import in $KARAPACE_HOME/venv"
  echo "$stamp" >"$KARAPACE_HOME/.installed"
}

# protopace_stub OUT: a shared library with the functions karapace's protopace module binds, each
# answering that Protobuf schemas are not supported
protopace_stub() {
  local c="$KARAPACE_HOME.tmp/protopace_stub.c"
  cat >"$c" <<'C'
#include <stdlib.h>
struct result { char *res; char *err; };
static char unsupported[] = "Protobuf schemas are not supported by this registry (lakecdc's test registry serves Avro)";
void *FormatSchema(const char *name, const char *schema, char **dep_names, char **deps, int n) {
  struct result *r = calloc(1, sizeof *r);
  if (r) r->err = unsupported;
  return r;
}
char *CheckCompatibility(const char *a, const char *b, char **c, char **d, int e,
                         const char *f, const char *g, char **h, char **i, int j) { return unsupported; }
void FreeResult(void *r) { free(r); }
C
  cc -shared -fPIC -O2 -o "$1" "$c" || die "could not build the stub of karapace's Protobuf library"
}

start() {
  local dir port bootstrap url
  bootstrap="${REGISTRY_BOOTSTRAP:-$(state kafka bootstrap)}"
  [[ -n $bootstrap ]] || die "no broker: start kafka.sh first, or set REGISTRY_BOOTSTRAP=HOST:PORT"
  install
  dir="$(service_dir registry)"
  port="${REGISTRY_PORT:-$(free_port)}"
  url="http://127.0.0.1:$port"
  launch registry env KARAPACE_KARAPACE_REGISTRY=true KARAPACE_BOOTSTRAP_URI="$bootstrap" \
    KARAPACE_HOST=127.0.0.1 KARAPACE_PORT="$port" KARAPACE_ADVERTISED_HOSTNAME=127.0.0.1 \
    KARAPACE_ADVERTISED_PORT="$port" KARAPACE_REGISTRY_HOST=127.0.0.1 KARAPACE_REGISTRY_PORT="$port" \
    KARAPACE_GROUP_ID=lakecdc-registry KARAPACE_CLIENT_ID=lakecdc-registry KARAPACE_TOPIC_NAME=_schemas \
    KARAPACE_WAITING_TIME_BEFORE_ACTING_AS_MASTER_MS=0 KARAPACE_LOG_LEVEL=INFO \
    "$KARAPACE_HOME/venv/bin/python" -m karapace
  echo "url=$url" >>"$dir/state"
  echo "bootstrap=$bootstrap" >>"$dir/state"
  await registry "the primary, its schemas read, at $url" probe registry "$url"
  echo "url=$url"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop_service registry ;;
  status) status registry ;;
  *) die "usage: registry.sh install|start|stop|status" ;;
esac
