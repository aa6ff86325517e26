#!/bin/sh
# First start of the PostgreSQL volume: a second database for the nbgrader gradebook,
# owned by the same role as the hub's database.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE DATABASE gradebook OWNER "$POSTGRES_USER";
SQL
