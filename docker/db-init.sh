#!/bin/sh
# First start of the PostgreSQL volume. The hub's role (POSTGRES_USER) owns the hub's database; the
# gradebook gets a role and a database of its own, so the grader container, which handles untrusted
# notebooks, holds a password that opens the gradebook and nothing else. PUBLIC may connect to every
# database by default: only each database's owner may now.
set -eu
psql -v ON_ERROR_STOP=1 -v password="${GRADEBOOK_DB_PASSWORD:?set GRADEBOOK_DB_PASSWORD}" \
     --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE ROLE gradebook LOGIN PASSWORD :'password';
CREATE DATABASE gradebook OWNER gradebook;
REVOKE ALL ON DATABASE gradebook FROM PUBLIC;
REVOKE ALL ON DATABASE jupyterhub FROM PUBLIC;
REVOKE ALL ON DATABASE postgres FROM PUBLIC;
SQL
