#!/bin/sh
# Starts Debian's PostgreSQL (installing it if missing), makes a throw-away role and database for
# the test suite, and prints its URL on stdout; everything else goes to stderr.
# Usage: postgres-test-db.sh [DBNAME]  (default bpe_test; separate names let runs go side by side)
set -e
db="${1:-bpe_test}"
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends postgresql >&2
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -n 1)
pg_lsclusters -h | grep -q "^$version *main " || pg_createcluster "$version" main >&2
cluster() { pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $'"$1"'}'; }
port=$(cluster 3)
sockets=/var/run/postgresql
if [ "$(cluster 4)" != online ]; then
    # A machine image saved while the server ran keeps its socket lock file; once the pid in it
    # belongs to some other process, the server refuses to start. The cluster is down, so the
    # lock is stale.
    rm -f "$sockets/.s.PGSQL.$port.lock" "$sockets/.s.PGSQL.$port"
    mkdir -p "$sockets"
    chown postgres:postgres "$sockets"
    # Its log is shown on a failure (a CI run once saw it fail with nothing said), and a second
    # try follows in case the failure was a passing one.
    for attempt in 1 2 3; do
        pg_ctlcluster "$version" main start >&2 && break
        echo "postgres-test-db: start $attempt failed; the end of the server's log:" >&2
        tail -n 20 "/var/log/postgresql/postgresql-$version-main.log" >&2
        [ "$attempt" = 3 ] && exit 1
        sleep 3
    done
fi
tries=0
until pg_isready -q -p "$port"; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
        echo "postgres-test-db: not accepting connections after 60 s; the end of its log:" >&2
        tail -n 20 "/var/log/postgresql/postgresql-$version-main.log" >&2
        exit 1
    fi
    sleep 1
done
as_postgres() { su postgres -c "psql -q -p $port -v ON_ERROR_STOP=1 $*"; }
as_postgres "-tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'bpe'\"" | grep -q 1 \
    || as_postgres "-c \"CREATE ROLE bpe LOGIN PASSWORD 'bpe'\"" >&2
as_postgres "-c \"DROP DATABASE IF EXISTS $db\"" >&2
as_postgres "-c \"CREATE DATABASE $db OWNER bpe\"" >&2
echo "postgresql://bpe:bpe@127.0.0.1:$port/$db"
