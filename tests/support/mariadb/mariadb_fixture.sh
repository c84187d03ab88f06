#!/usr/bin/env bash
# A throwaway MariaDB server for tests and benchmarks, configured as the MySQL-family source needs
# (binlog_format=ROW, binlog_row_image=FULL, GTIDs in strict mode).
#
#   mariadb_fixture.sh start STATE_DIR    start one on a free port; writes STATE_DIR/conn (the
#                                         source's connection string: host, port, user, database
#                                         `weir`), STATE_DIR/port, STATE_DIR/socket
#   mariadb_fixture.sh stop STATE_DIR     stop it and delete its data
#   mariadb_fixture.sh restart STATE_DIR [SECONDS]
#                                         stop it (SIGKILL: as a crash would), wait SECONDS (default
#                                         0), start it again on the same port with the same data
#   mariadb_fixture.sh sql STATE_DIR SQL  run SQL as root (through the socket), print the result
#
# The user `weir` (no password, from 127.0.0.1) has every privilege on database `weir` and the
# replication privileges. mariadbd refuses to run as root: as root it runs as the mysql user via
# runuser. The data lives in a fresh directory under ${TMPDIR:-/tmp}.
set -euo pipefail

command=${1:?usage: mariadb_fixture.sh start|stop|restart|sql STATE_DIR}
state=${2:?usage: mariadb_fixture.sh start|stop|restart|sql STATE_DIR}

for tool in mariadbd mariadb-install-db mariadb; do
  if ! command -v "$tool" >/dev/null && [[ ! -x /usr/sbin/$tool ]]; then
    echo "mariadb fixture: no $tool (install mariadb-server and mariadb-client: scripts/setup.sh)" >&2
    exit 1
  fi
done
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)

as_server() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u mysql -- "$@"
  else
    "$@"
  fi
}

# True if something listens on TCP port $1 (IPv4 or IPv6).
port_in_use() {
  local hex
  hex=$(printf ':%04X ' "$1")
  grep -qs " 0A " <(grep -hs "$hex" /proc/net/tcp /proc/net/tcp6)
}

root_sql() {
  mariadb --no-defaults -uroot -S "$(cat "$state/socket")" -N -B -e "$1"
}

# Starts mariadbd on the state's data directory and port; waits until it answers.
launch() {
  local dir=$1 port=$2
  as_server "$mariadbd" --no-defaults --datadir="$dir/data" --port="$port" \
    --bind-address=127.0.0.1 --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
    --log-error="$dir/server.log" --server-id=1 --log-bin="$dir/data/binlog" \
    --binlog-format=ROW --binlog-row-image=FULL --gtid-strict-mode=1 --gtid-domain-id=0 \
    --innodb-buffer-pool-size=256M --innodb-log-file-size=256M --innodb-flush-log-at-trx-commit=2 \
    --sync-binlog=0 --max-connections=500 --skip-name-resolve --max-allowed-packet=256M \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    </dev/null >/dev/null 2>&1 &
  for attempt in $(seq 1 600); do
    if mariadb --no-defaults -uroot -S "$dir/mysqld.sock" -e "SELECT 1" >/dev/null 2>&1; then
      return 0
    fi
    # Gone: it failed to start (the log says why).
    if ! kill -0 $! 2>/dev/null && [[ ! -f "$dir/mysqld.pid" ]]; then
      sleep 0.2
      mariadb --no-defaults -uroot -S "$dir/mysqld.sock" -e "SELECT 1" >/dev/null 2>&1 && return 0
      return 1
    fi
    sleep 0.1
  done
  return 1
}

kill_server() {
  local dir=$1 signal=$2
  [[ -f "$dir/mysqld.pid" ]] || return 0
  local pid
  pid=$(cat "$dir/mysqld.pid" 2>/dev/null || true)
  [[ -n "$pid" ]] || return 0
  kill "-$signal" "$pid" 2>/dev/null || return 0
  for attempt in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/mysqld.pid"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$dir/mysqld.pid"
}

stop_server() {
  if [[ -f "$state/datadir" ]]; then
    local dir
    dir=$(cat "$state/datadir")
    kill_server "$dir" TERM
    rm -rf "$dir"
  fi
  rm -f "$state/datadir" "$state/conn" "$state/port" "$state/socket"
}

case "$command" in
  start)
    mkdir -p "$state"
    stop_server  # A server left behind by an interrupted run.
    dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-mariadb.XXXXXX")
    chmod 755 "$dir"
    echo "$dir" > "$state/datadir"
    if [[ $(id -u) == 0 ]]; then
      chown mysql:mysql "$dir"
    fi
    if ! as_server mariadb-install-db --no-defaults --datadir="$dir/data" \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
      cat "$dir/install.log" >&2
      stop_server
      exit 1
    fi
    for attempt in $(seq 1 20); do
      port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
      port_in_use "$port" && continue
      if launch "$dir" "$port"; then
        echo "$port" > "$state/port"
        echo "$dir/mysqld.sock" > "$state/socket"
        root_sql "CREATE DATABASE weir;
          CREATE USER weir@'127.0.0.1';
          GRANT ALL ON weir.* TO weir@'127.0.0.1';
          GRANT RELOAD, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SLAVE MONITOR
            ON *.* TO weir@'127.0.0.1';"
        echo "host=127.0.0.1 port=$port user=weir database=weir" > "$state/conn"
        echo "mariadb fixture: listening on 127.0.0.1:$port (data in $dir)"
        exit 0
      fi
      kill_server "$dir" KILL
      grep -q "Can't start server: Bind on TCP/IP port\|Address already in use" \
        "$dir/server.log" 2>/dev/null || break
    done
    echo "mariadb fixture: could not start MariaDB:" >&2
    cat "$dir/server.log" >&2 || true
    stop_server
    exit 1
    ;;
  stop)
    stop_server
    ;;
  restart)
    dir=$(cat "$state/datadir")
    kill_server "$dir" KILL
    sleep "${3:-0}"
    # The port can be briefly taken while the server is down (see postgres_fixture.sh): retried.
    for attempt in $(seq 1 10); do
      launch "$dir" "$(cat "$state/port")" && exit 0
      echo "mariadb fixture: start $attempt after the kill failed; the server log ends:" >&2
      tail -n 5 "$dir/server.log" >&2 || true
      kill_server "$dir" KILL
      sleep 1
    done
    exit 1
    ;;
  sql)
    root_sql "${3:?usage: mariadb_fixture.sh sql STATE_DIR SQL}"
    ;;
  *)
    echo "usage: mariadb_fixture.sh start|stop|restart|sql STATE_DIR" >&2
    exit 2
    ;;
esac
