#!/usr/bin/env bash
# Make sure PostgreSQL server binaries (initdb, pg_ctl, postgres) exist for the storage tests.
# The tests start their own throwaway server on 127.0.0.1 and stop it; nothing runs as a service.
set -euo pipefail
have_pg() {
  command -v initdb >/dev/null 2>&1 && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null 2>&1
}
if have_pg; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure_postgres: PostgreSQL server binaries missing and not root; postgres tests will be skipped" >&2
  exit 0
fi
echo "ensure_postgres: installing PostgreSQL server binaries (apt-get install postgresql)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql >/dev/null
have_pg
