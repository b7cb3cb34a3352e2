#!/bin/bash
# The official postgres image's entrypoint contract, the part walc's deployments use: with an
# empty PGDATA, initdb (superuser POSTGRES_USER, default postgres, password POSTGRES_PASSWORD),
# listen on every address, `host all all all <POSTGRES_HOST_AUTH_METHOD>` (scram-sha-256 when a
# password is set), run /docker-entrypoint-initdb.d/*.sh (with bash) and *.sql against a server reachable
# only on its socket; then exec postgres with the arguments (a first argument starting with "-"
# is taken as postgres's). Runs as the postgres user (the pods' runAsUser 999): no root step.
set -euo pipefail

[ "${1:0:1}" = - ] && set -- postgres "$@"
if [ "$1" != postgres ] || [ -s "$PGDATA/PG_VERSION" ]; then
	exec "$@"
fi

user=${POSTGRES_USER:-postgres}
auth=${POSTGRES_HOST_AUTH_METHOD:-}
[ -n "$auth" ] || { [ -n "${POSTGRES_PASSWORD:-}" ] && auth=scram-sha-256; } ||
	{ echo "entrypoint: set POSTGRES_PASSWORD or POSTGRES_HOST_AUTH_METHOD" >&2; exit 1; }
mkdir -p "$PGDATA"
chmod 0700 "$PGDATA"
pwfile=$(mktemp)
printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
# shellcheck disable=SC2086
initdb --username="$user" --pwfile="$pwfile" ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
rm -f "$pwfile"
printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

if [ -n "$(ls -A /docker-entrypoint-initdb.d 2>/dev/null)" ]; then
	pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c archive_mode=off" start
	for f in /docker-entrypoint-initdb.d/*; do
		case $f in
		*.sh) echo "entrypoint: running $f" && bash "$f" ;;
		*.sql) echo "entrypoint: running $f" && psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -f "$f" ;;
		*) echo "entrypoint: ignoring $f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec "$@"
