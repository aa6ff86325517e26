#!/bin/sh
# First start on an empty data directory: initdb with POSTGRES_USER/POSTGRES_PASSWORD, create
# POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sh and *.sql; then serve. The setup server listens
# on a private socket only, so a healthcheck (pg_isready) cannot see it before setup is done.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ "${1:-postgres}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  setup_socket=$(mktemp -d)
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=$setup_socket" start >/dev/null
  export PGHOST="$setup_socket"
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -q -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; sh "$f" ;;
      *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -q -f "$f" ;;
    esac
  done
  unset PGHOST
  pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
  rmdir "$setup_socket"
  echo "database initialised"
fi
if [ "${1:-postgres}" = postgres ]; then
  shift || true
  exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
fi
exec "$@"
