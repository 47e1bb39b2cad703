#!/bin/sh
# deploy/docker/postgres-passfile.sh: the entrypoint of deploy/compose.yaml's
# shard PostgreSQL containers, in front of the image's own
# (docker-entrypoint.sh, which gets the arguments). It writes the libpq
# password file that a move's subscription on this instance reads the
# administrator's password from when it connects to another shard's
# instance (the control plane's MOVE_REPLICATION_PASSFILE, docs/moves.md):
# the password never goes into SQL text, which PostgreSQL logs when a
# statement fails. Rewritten at every start from POSTGRES_PASSWORD (every
# instance has the same administrator password), mode 0600, owned by the
# server's user. deploy/k8s/4*-postgres-shard-*.yaml do the same inline.
set -eu

file=${REPLICATION_PASSFILE:-/var/run/postgresql/replication.pgpass}
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"

umask 077
# pgpass fields escape `\` and `:` with a backslash.
printf '%s' "$POSTGRES_PASSWORD" | sed 's/[\\:]/\\&/g; s/^/*:*:*:postgres:/' >"$file.tmp"
if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$file.tmp"; fi
mv -f "$file.tmp" "$file"

exec docker-entrypoint.sh "$@"
