#!/usr/bin/env bash
# scripts/postgres.sh: a throwaway PostgreSQL cluster for the lab and its tests.
#
#   scripts/postgres.sh start [DIR]   install the package if missing, initdb in
#                                     DIR, start on a unix socket in DIR, print the URL
#   scripts/postgres.sh url [DIR]     print the URL of the cluster running in DIR
#   scripts/postgres.sh stop [DIR]    stop the cluster in DIR and delete DIR
#
# DIR defaults to $OUTBOXLAB_PG_DIR, else ${TMPDIR:-/tmp}/outboxlab-postgres.
# The server listens on a unix socket inside DIR only (no TCP port, so two
# clusters never collide), trusts local connections, and keeps its data in
# DIR. initdb refuses to run as root, so as root the cluster belongs to the
# "postgres" user the Debian package creates; otherwise to the caller.
set -euo pipefail

cmd="${1:-}"
dir="${2:-${OUTBOXLAB_PG_DIR:-${TMPDIR:-/tmp}/outboxlab-postgres}}"
port=5432

die() { echo "postgres.sh: $*" >&2; exit 1; }

bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

install_package() {
  bindir >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed; run: sudo apt-get install -y postgresql"
  echo "postgres.sh: installing Debian's postgresql package" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bindir >/dev/null || die "apt-get installed postgresql but no initdb was found under /usr/lib/postgresql"
}

# as_owner runs a command as the cluster's owner.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

owner_name() {
  if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi
}

url() {
  [ -f "$dir/data/postmaster.pid" ] || die "no cluster is running in $dir (start one with: scripts/postgres.sh start $dir)"
  echo "postgres:///postgres?host=$dir&port=$port&user=$(owner_name)&sslmode=disable"
}

start() {
  [ -n "$dir" ] || die "empty folder"
  if [ -f "$dir/data/postmaster.pid" ]; then url; return 0; fi
  install_package
  local bin
  bin="$(bindir)"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  chmod 700 "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U "$(owner_name)" -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
      die "initdb failed; see $dir/initdb.log"
  fi
  # The lab's runs each open a handful of connections; tests run many at once.
  # The cluster is thrown away, so it never waits for the disk: no fsync,
  # no waiting for a commit's WAL flush. A lesson's transactions, locks and
  # snapshots are PostgreSQL's own either way; only a crash of the machine
  # (not of a worker, not of the server) could lose a commit.
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start \
    -o "-c listen_addresses='' -k $dir -p $port -c max_connections=300 -c shared_buffers=128MB -c fsync=off -c synchronous_commit=off" >/dev/null ||
    die "the server did not start; see $dir/server.log"
  url
}

stop() {
  [ -n "$dir" ] && [ "$dir" != / ] || die "refusing to stop a cluster in '$dir'"
  local bin
  if [ -f "$dir/data/postmaster.pid" ] && bin="$(bindir)"; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ -f "$dir/data/PG_VERSION" ] || [ -f "$dir/initdb.log" ]; then
    rm -rf -- "$dir"
  fi
}

case "$cmd" in
  start) start ;;
  url) url ;;
  stop) stop ;;
  *) die "usage: scripts/postgres.sh start|url|stop [DIR]" ;;
esac
