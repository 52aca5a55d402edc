#!/bin/sh
# The whole several-machine stack on one machine, for trying it (docs/operations.md, "Trying it
# on one machine"): a Redis with `appendonly yes`, a PostgreSQL cluster of its own, two web
# processes (gunicorn) sharing one SECRET_KEY, and two Celery workers. Everything lives in DIR:
# data, logs, pid files, and `env`, the settings every process got (source it to run
# `flask` or `celery` commands against the stack).
#
# Usage: stack.sh start [DIR] [PORT]   (default instance/stack and 8000)
#        stack.sh stop [DIR]
# Ports: PORT and PORT+1 the web processes, PORT+2 Redis, PORT+3 PostgreSQL, all on 127.0.0.1.
# BIN names the venv's bin folder (default .venv/bin, `make install` makes it). As root the
# PostgreSQL server runs as the `postgres` user (it refuses root), so DIR's parents must let
# that user in (not a root-only folder such as /root).
set -eu
cd "$(dirname "$0")/.."
command=${1:-}
dir=$(realpath -m "${2:-instance/stack}")
port=${3:-8000}
BIN=${BIN:-.venv/bin}
redis_port=$((port + 2))
pg_port=$((port + 3))

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_bin() {
    if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
        apt-get update -q >&2
        apt-get install -y -q --no-install-recommends postgresql >&2
    fi
    echo "/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -n | tail -n 1)/bin"
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 0.2 s until it succeeds.
wait_until() {
    limit=$(($1 * 5))
    what=$2
    shift 2
    tries=0
    until "$@" >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -gt "$limit" ]; then
            echo "stack: $what did not start (logs in $dir)" >&2
            exit 1
        fi
        sleep 0.2
    done
}

# background NAME COMMAND...: starts COMMAND with the stack's settings, its output in
# DIR/NAME.log and its pid in DIR/NAME.pid.
background() {
    name=$1
    shift
    (set -a && . "$dir/env" && exec "$@") >"$dir/$name.log" 2>&1 &
    echo $! >"$dir/$name.pid"
}

start() {
    if ! command -v redis-server >/dev/null 2>&1; then
        apt-get update -q >&2
        apt-get install -y -q --no-install-recommends redis-server >&2
    fi
    mkdir -p "$dir/redis"
    bin=$(pg_bin)
    # Redis keeps its queue on disk (appendonly yes): a crash loses no queued message.
    redis-server --bind 127.0.0.1 --port "$redis_port" --daemonize yes --appendonly yes \
        --dir "$dir/redis" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    wait_until 10 Redis redis-cli -p "$redis_port" ping
    if [ ! -d "$dir/postgres" ]; then
        mkdir -p "$dir/postgres"
        [ "$(id -u)" = 0 ] && chown postgres "$dir/postgres"
        as_postgres "$bin/initdb" -D "$dir/postgres/data" -U postgres --auth=trust -E UTF8 \
            >"$dir/initdb.log"
    fi
    as_postgres "$bin/pg_ctl" -D "$dir/postgres/data" -l "$dir/postgres/server.log" -w \
        -o "-p $pg_port -k $dir/postgres -c listen_addresses=127.0.0.1" start >/dev/null
    as_postgres "$bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'bpe'" | grep -q 1 \
        || as_postgres "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres bpe
    # One secret for every web process, made once and kept with the stack.
    [ -s "$dir/secret_key" ] || (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$dir/secret_key")
    cat >"$dir/env" <<EOF
DATABASE_URL=postgresql://postgres@127.0.0.1:$pg_port/bpe
CELERY_BROKER_URL=redis://127.0.0.1:$redis_port/0
BPE_RATELIMIT_STORAGE_URL=redis://127.0.0.1:$redis_port/1
BPE_JOB_BACKEND=celery
SECRET_KEY=$(cat "$dir/secret_key")
BPE_AUTO_MIGRATE=0
EOF
    (set -a && . "$dir/env" && "$BIN/flask" --app webapp db-upgrade) >"$dir/db-upgrade.log" 2>&1
    for n in 1 2; do
        background "web$n" env PORT=$((port + n - 1)) WEB_CONCURRENCY=2 \
            "$BIN/gunicorn" --config python:webapp.gunicorn_conf webapp.wsgi:app
        background "worker$n" "$BIN/celery" -A webapp.celery_app worker -n "worker$n@%h" -l info
    done
    for n in 1 2; do
        wait_until 90 "web process $n" \
            curl -sf "http://127.0.0.1:$((port + n - 1))/readyz"
        wait_until 90 "worker $n" grep -q " ready\." "$dir/worker$n.log"
    done
    echo "stack: up. Web: http://127.0.0.1:$port and http://127.0.0.1:$((port + 1))"
    echo "stack: settings in $dir/env; logs in $dir; stop with: sh scripts/stack.sh stop $dir"
}

stop_pid() {
    [ -s "$1" ] || return 0
    pid=$(cat "$1")
    if kill "$pid" 2>/dev/null; then
        tries=0
        while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 150 ]; do
            tries=$((tries + 1))
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$1"
}

stop() {
    for name in web1 web2 worker1 worker2 redis; do
        stop_pid "$dir/$name.pid"
    done
    if [ -f "$dir/postgres/data/postmaster.pid" ]; then
        as_postgres "$(pg_bin)/pg_ctl" -D "$dir/postgres/data" -m fast -w stop >/dev/null
    fi
    echo "stack: stopped (data kept in $dir)"
}

case "$command" in
start) start ;;
stop) stop ;;
*)
    echo "usage: sh scripts/stack.sh start|stop [DIR] [PORT]" >&2
    exit 2
    ;;
esac
