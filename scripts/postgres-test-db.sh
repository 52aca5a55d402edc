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
pg_ctlcluster "$version" main start >&2 2>/dev/null || true
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
as_postgres() { su postgres -c "psql -q -p $port -v ON_ERROR_STOP=1 $*"; }
as_postgres "-tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'bpe'\"" | grep -q 1 \
    || as_postgres "-c \"CREATE ROLE bpe LOGIN PASSWORD 'bpe'\"" >&2
as_postgres "-c \"DROP DATABASE IF EXISTS $db\"" >&2
as_postgres "-c \"CREATE DATABASE $db OWNER bpe\"" >&2
echo "postgresql://bpe:bpe@127.0.0.1:$port/$db"
