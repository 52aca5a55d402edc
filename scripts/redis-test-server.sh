#!/bin/sh
# Starts a Redis server on loopback for the Celery backend's tests (Debian's redis-server,
# installed if missing; no persistence) and prints its URL on stdout; the rest goes to stderr.
# Usage: redis-test-server.sh [PORT]  (default 6379; a running server on that port is reused)
# Stop it with: redis-cli -p PORT shutdown nosave
set -e
port="${1:-6379}"
if ! command -v redis-server >/dev/null 2>&1; then
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends redis-server >&2
fi
# The Celery tests also run a worker with its clock set wrong (tests/test_celery_faults.py).
if ! command -v faketime >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q --no-install-recommends faketime >&2 \
        || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends faketime >&2; }
fi
if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' --appendonly no \
        --pidfile "/tmp/bpe-redis-$port.pid" --logfile "/tmp/bpe-redis-$port.log" >&2
    tries=0
    until redis-cli -p "$port" ping >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ]; then
            echo "redis-server did not start on port $port (see /tmp/bpe-redis-$port.log)" >&2
            exit 1
        fi
        sleep 0.1
    done
fi
echo "redis://127.0.0.1:$port/0"
