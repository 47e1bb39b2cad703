#!/usr/bin/env bash
# deploy/docker/postgres-init.sh: the service role and database `cluster` of
# one PostgreSQL instance of the cluster, for the official postgres image,
# which runs /docker-entrypoint-initdb.d/*.sh once, when it initialises an
# empty data directory. deploy/compose.yaml mounts this file there;
# deploy/k8s/20-config.yaml carries a copy in the ConfigMap
# tabula-postgres-init (deploy/validate-deploy checks that the two agree).
#
# The same least-privilege set-up as deploy/dev-cluster's pg_service_role
# (docs/CONVENTIONS.md, "PostgreSQL roles"): TABULA_DB_ROLE (`tabula_shard`
# on shard instances, `tabula_control` on the control plane's) logs in with
# TABULA_DB_PASSWORD, is no superuser and cannot create roles or databases,
# nor replicate, nor bypass row security; it owns database `cluster`;
# CONNECT on `cluster` and `postgres` is revoked from PUBLIC. `postgres`
# (POSTGRES_PASSWORD) stays the administrator: the control plane's mover
# connects as it (MOVE_ADMIN_USER / MOVE_ADMIN_PASSWORD), PostgreSQL 15
# wants a superuser for subscriptions.
#
# Runs only on an empty data directory: a changed password later needs
# `ALTER ROLE ... PASSWORD` by hand. Values reach SQL as psql variables
# (:'x' quoted as a literal, :"x" as an identifier), never spliced in.
set -euo pipefail

: "${TABULA_DB_ROLE:?TABULA_DB_ROLE must be set}"
: "${TABULA_DB_PASSWORD:?TABULA_DB_PASSWORD must be set}"

psql -X -q -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v "role=$TABULA_DB_ROLE" -v "password=$TABULA_DB_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT
  PASSWORD :'password';
SELECT format('CREATE DATABASE cluster OWNER %I', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'cluster') \gexec
ALTER DATABASE cluster OWNER TO :"role";
REVOKE ALL ON DATABASE cluster FROM PUBLIC;
REVOKE CONNECT, TEMPORARY ON DATABASE postgres FROM PUBLIC;
SQL
echo "postgres-init: role $TABULA_DB_ROLE owns database cluster"
