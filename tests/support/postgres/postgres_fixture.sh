#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for tests.
#
#   postgres_fixture.sh start STATE_DIR   initdb + start on a free port; writes STATE_DIR/url
#   postgres_fixture.sh stop STATE_DIR    stop it and remove its data
#   postgres_fixture.sh restart STATE_DIR fast|immediate [SECONDS]
#                                         stop it with that shutdown mode, wait SECONDS (default
#                                         0), start it again on the same port with the same data
#   postgres_fixture.sh new-timeline STATE_DIR
#                                         stop it, start it in archive recovery with nothing to
#                                         restore: it replays its own WAL, ends recovery and comes
#                                         back on a new timeline with its data and slots (as after
#                                         a restore from a backup, or a promotion)
#
# initdb and pg_ctl refuse to run as root: as root they run as the postgres user via runuser,
# otherwise as the current user. The data lives in a fresh directory under ${TMPDIR:-/tmp} that
# the server's user can reach. Set WEIR_PGBIN to use another PostgreSQL's bin directory.
set -euo pipefail

command=${1:?usage: postgres_fixture.sh start|stop STATE_DIR}
state=${2:?usage: postgres_fixture.sh start|stop STATE_DIR}

pgbin=${WEIR_PGBIN:-/usr/lib/postgresql/15/bin}
if [[ ! -x "$pgbin/pg_ctl" ]]; then
  echo "postgres fixture: no pg_ctl in $pgbin (install postgresql-15 or set WEIR_PGBIN)" >&2
  exit 1
fi

as_server() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

stop_server() {
  if [[ -f "$state/datadir" ]]; then
    local dir
    dir=$(cat "$state/datadir")
    if [[ -d "$dir/data" ]]; then
      as_server "$pgbin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
        as_server "$pgbin/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
  fi
  rm -f "$state/datadir" "$state/url" "$state/options"
}

# True if something listens on TCP port $1 (IPv4 or IPv6).
port_in_use() {
  local hex
  hex=$(printf ':%04X ' "$1")
  grep -qs " 0A " <(grep -hs "$hex" /proc/net/tcp /proc/net/tcp6)
}

case "$command" in
  start)
    mkdir -p "$state"
    stop_server  # A server left behind by an interrupted run.
    dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-postgres.XXXXXX")
    chmod 755 "$dir"
    echo "$dir" > "$state/datadir"
    if [[ $(id -u) == 0 ]]; then
      chown postgres:postgres "$dir"
    fi
    if ! as_server "$pgbin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
        >"$dir/initdb.log" 2>&1; then
      cat "$dir/initdb.log" >&2
      exit 1
    fi
    for attempt in $(seq 1 20); do
      port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
      port_in_use "$port" && continue
      options="-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off"
      options+=" -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20"
      options+=" -c max_connections=200"
      if as_server "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$options" \
          start >/dev/null 2>&1; then
        echo "$options" > "$state/options"
        echo "postgresql://postgres@127.0.0.1:$port/postgres" > "$state/url"
        echo "postgres fixture: listening on 127.0.0.1:$port (data in $dir)"
        exit 0
      fi
      grep -q "could not bind\|Address already in use" "$dir/server.log" 2>/dev/null || break
    done
    echo "postgres fixture: could not start PostgreSQL:" >&2
    cat "$dir/server.log" >&2 || true
    stop_server
    exit 1
    ;;
  stop)
    stop_server
    ;;
  restart)
    mode=${3:?usage: postgres_fixture.sh restart STATE_DIR fast|immediate [SECONDS]}
    dir=$(cat "$state/datadir")
    as_server "$pgbin/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null
    sleep "${4:-0}"
    # The port can be briefly taken while the server is down: a client retrying in a loop may be
    # given it as its own ephemeral port (a connection to a local port with no listener can
    # connect to itself). Such a start fails at once; the client gives the port back soon after.
    for attempt in $(seq 1 10); do
      as_server "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$(cat "$state/options")" start >/dev/null && exit 0
      echo "postgres fixture: start $attempt after the $mode stop failed; the server log ends:" >&2
      tail -n 5 "$dir/server.log" >&2 || true
      sleep 1
    done
    exit 1
    ;;
  new-timeline)
    dir=$(cat "$state/datadir")
    as_server "$pgbin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
    as_server touch "$dir/data/recovery.signal"
    as_server "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "$(cat "$state/options") -c restore_command=false" start >/dev/null
    # It accepts connections (read-only) before recovery ends: wait for the new timeline.
    for attempt in $(seq 1 600); do
      [[ $("$pgbin/psql" -X -At -d "$(cat "$state/url")" -c "SELECT pg_is_in_recovery()" \
        2>/dev/null) == f ]] && exit 0
      sleep 0.1
    done
    echo "postgres fixture: recovery did not end" >&2
    exit 1
    ;;
  *)
    echo "usage: postgres_fixture.sh start|stop|restart|new-timeline STATE_DIR" >&2
    exit 2
    ;;
esac
