#!/usr/bin/env bash
# make e2e-pod: walc as Kubernetes runs it, with podman kube play on the chart's rendered pods.
#
#   1. Ceph RGW, Prometheus and the Pushgateway on 127.0.0.1 (host processes; RGW, not s3rver:
#      the daemon and wal-receive store the same segments at once, and s3rver writes a PUT
#      straight into its file, so two at once interleave into a corrupt object);
#   2. PostgreSQL 15 (Debian's packages, deploy/image/postgres + the archive module) in the
#      StatefulSet pod that test/e2e/postgres-statefulset.yaml builds from the chart's sidecar
#      templates: walc-install copies the binary, the walc-daemon sidecar archives through the
#      walc_archive module, and the walc-wal-receive sidecar streams the same WAL through its
#      replication slot into the repository; pgbench writes;
#   3. the chart's CronJob as a pod: backup-push in remote mode (BASE_BACKUP over a replication
#      connection, as walc_backup) while pgbench runs, then delete retain FULL 1; backup-list
#      shows the backup; both pushed their metrics to the Pushgateway;
#   4. the chart's restore Job as a pod, to a target time taken from the source's now() (between
#      two tables written after the backup): backup-fetch --target-time into a fresh volume; a
#      PostgreSQL pod (copy mode) starts on it, recovers through wal-fetch to that time, and its
#      pg_dumpall equals the source's at the target; it archives its new timeline through the
#      copied binary's archive_command;
#   5. Prometheus scraped the daemon's /metrics (promtool check metrics passes on it) and the
#      Pushgateway: queries show archived segments and the last backup's time;
#   6. the chart on the other stores, with their workload identities as kube-to-pods.mjs
#      emulates them: on the GCS emulator with GKE Workload Identity (tokens from a fake
#      metadata server) and OpenPGP keys, the CronJob's pod, then the restore Job without a
#      target (backup-fetch LATEST decrypting with the secret key and its passphrase, then
#      recovery.signal); on Azurite with AKS workload identity (the webhook's variables and
#      federated token, a fake Azure AD) and the CA bundle of Azurite's certificate, the
#      CronJob's pod.
# What podman runs differently from Kubernetes: test/e2e/kube-to-pods.mjs.
#
# Needs root and podman; `make e2e-pod` builds the images first (deploy/image/build.sh).
# Without a working podman it prints "skipped: <reason>" and exits 0, except under CI, where
# that is a failure. Nothing outlives it: pods, volumes, secrets and servers are removed on exit.
# Logs stay in build/e2e/logs. Last line: "e2e-pod: N passed, N failed".
# Functions run through check, wait_for and traps look unreachable to shellcheck.
# shellcheck disable=SC2317,SC2016
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../../deploy/image/lib.sh
. "$ROOT/deploy/image/lib.sh"

T0=$SECONDS
OUT=$ROOT/build/e2e
LOGS=$OUT/logs
KEY_HEX=7a1f0e3c5b9d2468ace013579bdf2468ace013579bdf2468ace013579bdf0123
PG_PASSWORD=e2e-postgres-password
BACKUP_PASSWORD=e2e-walc-backup-password
SECRETS=(walc-s3 postgres-credentials walc-backup-password walc-libsodium walc-pgp)

say() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
CHECK_LOGS=$LOGS
# shellcheck source-path=SCRIPTDIR source=../checks.sh
. "$ROOT/test/checks.sh"
finish() {
	echo "e2e-pod: took $((SECONDS - T0))s"
	echo "e2e-pod: $passed passed, $failed failed"
	[ "$failed" -eq 0 ] && exit 0
	exit 1
}
# A step the rest depends on failed: say so, and stop (cleanup runs on exit).
need() { check "$@" || finish; }
skip() {
	if [ -n "${CI:-}" ]; then
		fail "podman runs here (CI must run the pods): $1"
		finish
	fi
	echo "skipped: $1"
	exit 0
}

# --- can podman run at all? -------------------------------------------------------------------

[ "$(id -u)" = 0 ] || skip "not root (podman kube play runs rootful here)"
command -v podman >/dev/null || "$ROOT/deploy/deps.sh" pod >/dev/null 2>&1 ||
	skip "podman could not be installed"
podman image exists "$WALC_IMAGE" || skip "no $WALC_IMAGE: run make image (make e2e-pod does)"
if ! out=$(podman run --rm --network none "$WALC_IMAGE" --version 2>&1); then
	skip "podman cannot start a container: $(tail -n 1 <<<"$out")"
fi

# One run at a time: the pods' names are the chart's.
exec 7>/run/walc-e2e-pod.lock
flock -w 1800 7 || { fail "another make e2e-pod held the lock for 30 minutes"; finish; }

rm -rf "$OUT"
mkdir -p "$OUT" "$LOGS"
WORK=$(mktemp -d /tmp/walc-e2e.XXXXXX)
chmod 0755 "$WORK"
PIDS=()
PODS=()
VOLUMES=()

# Pod logs, then everything this run made; called on every exit.
cleanup() {
	local p c
	for p in "${PODS[@]}"; do
		for c in $(podman ps -a --filter "pod=$p" --format '{{.Names}}' 2>/dev/null); do
			podman logs "$c" >"$LOGS/$c.log" 2>&1
		done
		podman pod rm -f -t 5 "$p" >/dev/null 2>&1
	done
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	"$ROOT/test/servers/ceph-rgw.sh" stop "$WORK/rgw" >/dev/null 2>&1
	"$ROOT/test/servers/azurite.sh" stop "$WORK/azurite" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for c in "${VOLUMES[@]}"; do podman volume rm -f "$c" >/dev/null 2>&1; done
	for c in "${SECRETS[@]}"; do podman secret rm "$c" >/dev/null 2>&1; done
	cp -r "$WORK/prometheus.yml" "$WORK"/*.dump "$LOGS/" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# free_ports N: a port P with P to P+N-1 free (RGW's monitor and OSD take the ports after S3's)
free_ports() {
	local p i
	while :; do
		p=$((20000 + RANDOM % 30000))
		for ((i = 0; i < $1; i++)); do (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && continue 2; done
		echo "$p"
		return
	done
}
# wait_for SECONDS COMMAND...: until COMMAND succeeds, or fail after three times SECONDS
# (SECONDS is ample on a quiet machine; CI's 2-core hosts have run the whole suite 2-3 times
# slower, and a wait ends as soon as COMMAND succeeds).
wait_for() {
	local deadline=$((SECONDS + $1 * 3))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || { echo "timed out waiting for: $*"; return 1; }
		sleep 1
	done
}
# ctr_state CONTAINER: "<status> <exit code>"
ctr_state() { podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$1" 2>/dev/null; }
ctr_exited() { [ "$(ctr_state "$1" | cut -d' ' -f1)" = exited ]; }
# ctr_ok CONTAINER: it exited 0 (its log is printed for the check's log).
ctr_ok() {
	podman logs "$1" 2>&1 | tail -n 30
	ctr_state "$1"
	[ "$(ctr_state "$1")" = "exited 0" ]
}
# psql_in POD SQL: psql as postgres in the pod's PostgreSQL container (its PGPORT).
psql_in() { podman exec "$1-postgresql" psql -X -At -v ON_ERROR_STOP=1 -d postgres -c "$2"; }
# play FILE: podman kube play with every rendered ConfigMap.
play() {
	local name
	name=$(basename "$1" .yaml)
	PODS+=("$name")
	local cms=("$WORK"/pods*/configmap-*.yaml)
	# From a directory of its own: podman 4.3 builds an image from ./<image name>/ when there is
	# such a path (here the repository's ./walc binary), --build=false notwithstanding.
	(cd "$WORK/pods" && podman kube play --configmap "$(IFS=,; echo "${cms[*]}")" "$1") \
		>"$LOGS/play-$name.log" 2>&1 || { cat "$LOGS/play-$name.log"; return 1; }
}

# --- servers on 127.0.0.1 ---------------------------------------------------------------------

say "tools, servers"
need "test tools (Helm, Node.js packages)" "$ROOT/test/deploy/tools.sh"
HELM=$("$ROOT/test/deploy/tools.sh" bin)/helm
S3_PORT=$(free_ports 10) PG_PORT=$(free_port) PG2_PORT=$(free_port) METRICS_PORT=$(free_port)
PROM_PORT=$(free_port) GW_PORT=$(free_port)
need "Ceph RGW on 127.0.0.1:$S3_PORT" "$ROOT/test/servers/ceph-rgw.sh" start "$WORK/rgw" "$S3_PORT"
S3_KEY=$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$WORK/rgw/env")
S3_SECRET=$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$WORK/rgw/env")
need "the bucket test on RGW" env AWS_ACCESS_KEY_ID="$S3_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET" \
	AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url "http://127.0.0.1:$S3_PORT" s3api create-bucket --bucket test

# Debian's Pushgateway persists to /var/lib/prometheus/pushgateway.data unless told otherwise:
# this run's groups stay in its own directory.
prometheus-pushgateway --web.listen-address="127.0.0.1:$GW_PORT" \
	--persistence.file="$WORK/pushgateway.data" >"$LOGS/pushgateway.log" 2>&1 &
PIDS+=($!)
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
scrape_configs:
  - job_name: walc-sidecar
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$GW_PORT"]
EOF
need "promtool check config" promtool check config "$WORK/prometheus.yml"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prometheus" \
	--web.listen-address="127.0.0.1:$PROM_PORT" >"$LOGS/prometheus.log" 2>&1 &
PIDS+=($!)
# The other stores' servers, started now and awaited where used: the GCS emulator, Azurite
# (HTTPS, Azure AD tokens accepted), and the fake token endpoints standing in for GKE's
# metadata server and Azure AD (test/integration/objstore_tool.py), which take the federated
# token written here only.
GCS_PORT=$(free_port) AZ_PORT=$(free_port) TOK_PORT=$(free_port)
mkdir -p "$WORK/gcs" "$WORK/azure-token"
node "$ROOT/test/servers/gcs-emulator.js" 127.0.0.1 "$GCS_PORT" "$WORK/gcs" </dev/null \
	>"$LOGS/gcs-emulator.log" 2>&1 &
PIDS+=($!)
"$ROOT/test/servers/azurite.sh" start "$WORK/azurite" "$AZ_PORT" oauth >"$LOGS/azurite.out" 2>&1 &
AZURITE=$!
echo "walc-e2e-federated-$RANDOM" >"$WORK/azure-token/azure-identity-token"
python3 "$ROOT/test/integration/objstore_tool.py" tokens "$TOK_PORT" "$LOGS/tokens.log" \
	--assertion-file "$WORK/azure-token/azure-identity-token" >"$LOGS/tokens.out" 2>&1 &
PIDS+=($!)
need "Prometheus and the Pushgateway answer" wait_for 60 bash -c \
	"curl -sf http://127.0.0.1:$PROM_PORT/-/ready && curl -sf http://127.0.0.1:$GW_PORT/-/ready"

# --- images, secrets, manifests ---------------------------------------------------------------

say "PostgreSQL image"
need "PostgreSQL 15 image from Debian's packages, with walc_archive (deploy/image/build.sh postgres)" \
	"$ROOT/deploy/image/build.sh" postgres

# Env secrets as podman 4.3 reads secretKeyRef (a JSON map of base64 values); the key file
# through a Secret object, whose data podman 4.3 writes as it stands (see kube-to-pods.mjs):
# the hex key, not its base64.
json_secret() { # NAME KEY VALUE [KEY VALUE...]
	local name=$1 json="{" sep=""
	shift
	while [ $# -gt 0 ]; do
		json+="$sep\"$1\":\"$(printf '%s' "$2" | base64 -w0)\""
		sep=,
		shift 2
	done
	podman secret rm "$name" >/dev/null 2>&1
	printf '%s}' "$json" | podman secret create "$name" - >/dev/null
}
secrets() {
	json_secret walc-s3 AWS_ACCESS_KEY_ID "$S3_KEY" AWS_SECRET_ACCESS_KEY "$S3_SECRET" &&
		json_secret postgres-credentials password "$PG_PASSWORD" &&
		json_secret walc-backup-password password "$BACKUP_PASSWORD" &&
		podman secret rm walc-libsodium >/dev/null 2>&1
	printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: walc-libsodium\ndata:\n  key: %s\n' \
		"$KEY_HEX" >"$WORK/libsodium-secret.yaml" &&
		podman kube play "$WORK/libsodium-secret.yaml" >/dev/null
}
need "Secrets: S3 keys, passwords, libsodium key" secrets

# The chart, by Helm: ConfigMap and CronJob as released, the StatefulSet from the sidecar
# templates (daemon mode and wal-receive for the source, copy mode for the restored cluster);
# the restore Job later, once its target time is known (render_restore).
COMMON=(-f "$HERE/values.yaml" --set "storage.endpoint=http://127.0.0.1:$S3_PORT"
	--set "postgresql.port=$PG_PORT" --set "sidecar.walReceive.port=$PG_PORT"
	--set "sidecar.daemon.metricsPort=$METRICS_PORT" --set "image.tag=$WALC_VERSION"
	--set-string "extraConfig.WALG_PUSHGATEWAY_URL=http://127.0.0.1:$GW_PORT")
render() {
	local common=("${COMMON[@]}")
	mkdir -p "$WORK/chart" && cp -r "$ROOT/helm/walc" "$WORK/chart/" &&
		cp "$HERE/postgres-statefulset.yaml" "$WORK/chart/walc/templates/" || return 1
	"$HELM" template walc "$WORK/chart/walc" "${common[@]}" \
		--show-only templates/configmap.yaml --show-only templates/cronjob.yaml >"$WORK/chart.yaml" &&
		"$HELM" template walc "$WORK/chart/walc" "${common[@]}" \
			--show-only templates/postgres-statefulset.yaml --set global.e2e.name=postgres \
			--set "global.e2e.port=$PG_PORT" --set "global.e2e.image=$PG_WALC_IMAGE" \
			>"$WORK/postgres.yaml" &&
		"$HELM" template walc "$WORK/chart/walc" "${common[@]}" \
			--show-only templates/postgres-statefulset.yaml --set global.e2e.name=postgres-restore \
			--set "global.e2e.port=$PG2_PORT" --set "global.e2e.image=$PG_WALC_IMAGE" \
			--set sidecar.daemon.enabled=false --set sidecar.walReceive.enabled=false \
			>"$WORK/postgres-restore.yaml" &&
		node "$HERE/kube-to-pods.mjs" "$WORK/pods" "$WORK/chart.yaml" "$WORK/postgres.yaml" \
			"$WORK/postgres-restore.yaml" &&
		cp "$WORK"/*.yaml "$WORK"/pods/*.yaml "$LOGS/"
}
need "helm template: ConfigMap, CronJob, PostgreSQL StatefulSets; as pods for podman" render
mapfile -t VOLUMES <"$WORK/pods/volumes.txt"
for c in "${VOLUMES[@]}"; do podman volume rm -f "$c" >/dev/null 2>&1; done
while read -r c; do podman volume create "$c" >/dev/null; done <"$WORK/pods/claims.txt"

# --- the source: PostgreSQL with the walc sidecar, archiving ----------------------------------

say "source PostgreSQL pod (daemon mode, wal-receive)"
need "podman kube play: PostgreSQL with walc-install, the walc-daemon and walc-wal-receive sidecars" \
	play "$WORK/pods/postgres-0.yaml"
need "PostgreSQL accepts connections" wait_for 120 podman exec postgres-0-postgresql pg_isready -q
check "walc-install copied the binary for archive_command and restore_command" \
	podman exec postgres-0-postgresql /walc/bin/walc --version
check "the daemon serves /healthz" wait_for 30 curl -sf "http://127.0.0.1:$METRICS_PORT/healthz"
archiving() {
	psql_in postgres-0 "SHOW archive_library" | grep -qx walc_archive &&
		psql_in postgres-0 "SELECT pg_switch_wal() IS NOT NULL" &&
		wait_for 60 bash -c "[ \"\$(podman exec postgres-0-postgresql psql -X -At -d postgres \
			-c 'SELECT archived_count > 0 AND failed_count = 0 FROM pg_stat_archiver')\" = t ]"
}
check "PostgreSQL archives through archive_library = walc_archive and the daemon" archiving
# The sidecar started with PostgreSQL and exited until the server accepted it (Kubernetes, and
# podman here, restart it): it ends up streaming through its slot, as the CronJob's role.
receiving() {
	[ "$(psql_in postgres-0 "SELECT active FROM pg_replication_slots WHERE slot_name = 'walg'")" = t ] &&
		[ "$(psql_in postgres-0 "SELECT r.usename FROM pg_stat_replication r JOIN pg_replication_slots s
			ON s.active_pid = r.pid WHERE s.slot_name = 'walg'")" = walc_backup ] &&
		podman logs postgres-0-walc-wal-receive 2>&1 | grep -q 'wal-receive: streaming timeline 1 from'
}
check "wal-receive streams through its slot walg, as walc_backup (a REPLICATION role)" wait_for 60 receiving
need "pgbench -i" podman exec postgres-0-postgresql pgbench -q -i -s 4 postgres
podman exec postgres-0-postgresql pgbench -n -c 2 -T 25 postgres >"$LOGS/pgbench.log" 2>&1 &
WORKLOAD=$!

# --- the CronJob's pod: remote backup-push, then retention ------------------------------------

say "CronJob pod: backup-push (remote), delete retain FULL 1"
start=$SECONDS
need "podman kube play: the CronJob's pod" play "$WORK/pods/walc-manual.yaml"
check "backup-push (remote mode, replication protocol) exited 0" \
	wait_for 600 ctr_exited walc-manual-backup-push
need "backup-push exited 0" ctr_ok walc-manual-backup-push
check "delete retain FULL 1 --confirm exited 0" wait_for 120 ctr_exited walc-manual-delete-retain
check "delete exited 0" ctr_ok walc-manual-delete-retain
say "backup pod done in $((SECONDS - start))s"
wait "$WORKLOAD"
check "pgbench wrote while the backup ran" grep -q 'number of transactions actually processed' \
	"$LOGS/pgbench.log"

# walc from the image with the CronJob's configuration, for backup-list and a failing push.
node -e '
	const y = require(process.argv[1]);
	for (const d of y.loadAll(require("fs").readFileSync(process.argv[2], "utf8")))
		if (d && d.kind === "ConfigMap" && d.metadata.name === "walc-env")
			for (const [k, v] of Object.entries(d.data)) console.log(`${k}=${v}`);
' "$ROOT/test/deploy/node_modules/js-yaml" "$WORK/pods/configmap-walc-env.yaml" >"$WORK/walc.env"
printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nHOME=/tmp\n' "$S3_KEY" "$S3_SECRET" >>"$WORK/walc.env"
printf '%s' "$KEY_HEX" >"$WORK/key"
chmod 0644 "$WORK/key"
walc_run() {
	podman run --rm --network host --env-file "$WORK/walc.env" \
		-v "$WORK/key:/etc/walc/libsodium/key:ro" "$WALC_IMAGE" "$@"
}
backup_listed() {
	walc_run backup-list --detail | tee "$WORK/backup-list.txt"
	grep -q '^base_' "$WORK/backup-list.txt"
}
check "backup-list shows the CronJob's backup" backup_listed

# The target: the workload has stopped; one table after the backup, the source's dump, the
# target time as PostgreSQL prints now() (what a user copies from psql), one more table that
# recovery must not replay; then every segment up to here archived by the daemon and stored by
# wal-receive (its slot only moves past what is stored).
recovery_point() {
	psql_in postgres-0 "CREATE TABLE after_backup AS SELECT g AS n FROM generate_series(1, 5000) g" &&
		podman exec postgres-0-postgresql pg_dumpall -U postgres >"$WORK/source.dump" &&
		TARGET=$(psql_in postgres-0 "SELECT clock_timestamp()") &&
		psql_in postgres-0 "CREATE TABLE after_target AS SELECT g AS n FROM generate_series(1, 5000) g" ||
		return 1
	local seg lsn
	lsn=$(psql_in postgres-0 "SELECT pg_switch_wal()") &&
		seg=$(psql_in postgres-0 "SELECT pg_walfile_name('$lsn')") || return 1
	echo "target $TARGET; waiting for $seg to be archived and stored by wal-receive"
	wait_for 120 podman exec postgres-0-postgresql test -e "/var/lib/postgresql/data/pgdata/pg_wal/archive_status/$seg.done" &&
		wait_for 60 bash -c "[ \"\$(podman exec postgres-0-postgresql psql -X -At -d postgres -c \
			\"SELECT restart_lsn > '$lsn' FROM pg_replication_slots WHERE slot_name = 'walg'\")\" = t ]"
}
need "target time: dump of the source, its last segment archived and stored by wal-receive" recovery_point

# --- restore: the Job's pod, then PostgreSQL on the restored volume ---------------------------

# The chart's restore Job to TARGET, as a pod (the Job's own volumes added to VOLUMES).
render_restore() {
	"$HELM" template walc "$WORK/chart/walc" "${COMMON[@]}" --show-only templates/restore-job.yaml \
		--set restore.enabled=true --set restore.claimName=data-postgres-restore-0 \
		--set-string "restore.targetTime=$TARGET" >"$WORK/restore-job.yaml" &&
		node "$HERE/kube-to-pods.mjs" "$WORK/pods-restore" "$WORK/restore-job.yaml" &&
		cp "$WORK/restore-job.yaml" "$WORK/pods-restore/walc-restore.yaml" "$LOGS/" || return 1
	mapfile -t -O "${#VOLUMES[@]}" VOLUMES <"$WORK/pods-restore/volumes.txt"
}
say "restore Job pod to $TARGET, then PostgreSQL on the restored volume (copy mode)"
need "helm template: the restore Job to the target time; as a pod" render_restore
need "podman kube play: the restore Job's pod" play "$WORK/pods-restore/walc-restore.yaml"
check "backup-fetch --target-time exited 0" wait_for 600 ctr_exited walc-restore-backup-fetch
need "backup-fetch restored the backup before the target and wrote the recovery settings" \
	ctr_ok walc-restore-backup-fetch
need "podman kube play: PostgreSQL on the restored volume" play "$WORK/pods/postgres-restore-0.yaml"
promoted() { [ "$(psql_in postgres-restore-0 "SELECT pg_is_in_recovery()")" = f ]; }
need "the restored cluster recovered and promoted" wait_for 300 promoted
restored_through_wal_fetch() {
	local log n
	log=$(podman logs postgres-restore-0-postgresql 2>&1)
	n=$(grep -c 'LOG:  restored log file' <<<"$log")
	echo "$n segments restored from the archive"
	[ "$n" -gt 0 ] && grep -q 'LOG:  starting point-in-time recovery to ' <<<"$log" &&
		grep -q 'LOG:  recovery stopping before commit of transaction' <<<"$log" &&
		grep -q 'LOG:  archive recovery complete' <<<"$log"
}
check "recovery replayed WAL fetched by wal-fetch (the copied binary) and stopped at the target time" \
	restored_through_wal_fetch
dumps_equal() {
	podman exec postgres-restore-0-postgresql pg_dumpall -U postgres >"$WORK/restored.dump" || return 1
	# pg_dumpall 15.14+ writes a random \restrict key into each dump.
	diff <(grep -v '^\\\(un\)\?restrict ' "$WORK/source.dump") \
		<(grep -v '^\\\(un\)\?restrict ' "$WORK/restored.dump") | head -n 20
	[ "${PIPESTATUS[0]}" = 0 ] && grep -q after_backup "$WORK/restored.dump" &&
		! grep -q after_target "$WORK/restored.dump"
}
check "pg_dumpall of the restored cluster equals the source's at the target time (after_target not replayed)" \
	dumps_equal
copy_mode_archiving() {
	psql_in postgres-restore-0 "SELECT pg_switch_wal() IS NOT NULL" &&
		wait_for 60 bash -c "[ \"\$(podman exec postgres-restore-0-postgresql psql -X -At -d postgres \
			-c 'SELECT archived_count > 0 AND failed_count = 0 FROM pg_stat_archiver')\" = t ]" &&
		psql_in postgres-restore-0 "SHOW archive_command" | grep -q '/walc/bin/walc wal-push %p'
}
check "the restored cluster archives through archive_command (the copied binary)" copy_mode_archiving

# --- metrics ------------------------------------------------------------------------------------

say "metrics"
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$LOGS/sidecar-metrics.txt"
check "promtool check metrics: the sidecar's /metrics" \
	bash -c "promtool check metrics <'$LOGS/sidecar-metrics.txt'"
curl -sf "http://127.0.0.1:$GW_PORT/metrics" >"$LOGS/pushgateway-metrics.txt"
pushed_metrics() {
	grep -E '^(# (HELP|TYPE) )?walc_' "$LOGS/pushgateway-metrics.txt" >"$LOGS/pushed-metrics.txt"
	grep -q '^walc_run_success{command="backup-push"' "$LOGS/pushed-metrics.txt" &&
		grep -q '^walc_run_success{command="delete"' "$LOGS/pushed-metrics.txt" &&
		promtool check metrics <"$LOGS/pushed-metrics.txt"
}
check "promtool check metrics: what backup-push and delete pushed" pushed_metrics
# query EXPR: the value of the first series of an instant query, printed; fails when none.
query() {
	curl -sf "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
		node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s).data.result;
			if(!r.length)process.exit(1);console.log(r[0].value[1])})'
}
positive() { local v; v=$(query "$1") && echo "$1 = $v" && node -e "process.exit(+process.argv[1] > 0 ? 0 : 1)" "$v"; }
check "Prometheus: the sidecar archived segments (walc_wal_archived_total)" \
	wait_for 60 positive 'walc_wal_archived_total{job="walc-sidecar"}'
check "Prometheus: the sidecar's last backup time (walc_last_backup_timestamp_seconds)" \
	wait_for 90 positive 'walc_last_backup_timestamp_seconds{job="walc-sidecar"}'
check "Prometheus: backup-push pushed success, duration, size" wait_for 30 positive \
	'walc_run_success{command="backup-push"} * walc_run_duration_seconds{command="backup-push"} * walc_last_backup_stored_bytes{command="backup-push"}'
check "Prometheus: backup-push pushed the last backup's time" wait_for 30 positive \
	'walc_last_backup_timestamp_seconds{job="walc",command="backup-push"}'
check "Prometheus: delete pushed success and the backups kept" wait_for 30 positive \
	'walc_run_success{command="delete"} * walc_backups{command="delete"}'
# A failing backup-push (nothing listens on port 1) pushes its failure and keeps the last
# success's time.
failed_push() {
	podman run --rm --network host --env-file "$WORK/walc.env" -e PGHOST=127.0.0.1 -e PGPORT=1 \
		-e PGUSER=walc_backup -v "$WORK/key:/etc/walc/libsodium/key:ro" "$WALC_IMAGE" backup-push &&
		return 1
	wait_for 30 bash -c "curl -sf http://127.0.0.1:$GW_PORT/metrics |
		grep -q '^walc_run_success{command=\"backup-push\",instance=\"\",job=\"walc\"} 0$'" &&
		curl -sf "http://127.0.0.1:$GW_PORT/metrics" | grep '^walc_run_last_success_timestamp_seconds{command="backup-push"'
}
check "a failed backup-push pushes walc_run_success 0 and keeps the last success" failed_push

# --- the other stores: GCS and Azure, with their workload identities ---------------------------

say "GCS (GKE Workload Identity, OpenPGP) and Azure (AKS workload identity): CronJob pods, restore Job"
# A release on another store: the e2e values but S3's and the Pushgateway's (whose groups the
# checks above read).
STORE_COMMON=(-f "$HERE/values.yaml" --set "postgresql.port=$PG_PORT" --set "image.tag=$WALC_VERSION"
	--set storage.s3Prefix= --set storage.credentials.existingSecret=)
# store_pods NAME FLAGS...: release NAME rendered with FLAGS (ServiceAccount, ConfigMap, CronJob
# and, when enabled, the restore Job) as pods in $WORK/pods-NAME, the identities emulated.
store_pods() {
	local name=$1
	shift
	"$HELM" template "$name" "$WORK/chart/walc" "${STORE_COMMON[@]}" "$@" >"$WORK/$name.yaml" &&
		node "$HERE/kube-to-pods.mjs" --gke-metadata "127.0.0.1:$TOK_PORT" \
			--aks-webhook "walc-tenant,http://127.0.0.1:$TOK_PORT/,$WORK/azure-token" \
			--secret-dir "$WORK/secrets" "$WORK/pods-$name" "$WORK/$name.yaml" &&
		cp "$WORK/$name.yaml" "$LOGS/" || return 1
	mapfile -t -O "${#VOLUMES[@]}" VOLUMES <"$WORK/pods-$name/volumes.txt"
	while read -r c; do podman volume create "$c" >/dev/null; done <"$WORK/pods-$name/claims.txt"
}
# ran_ok POD CONTAINER...: each container of the pod exited 0, in turn
ran_ok() {
	local pod=$1 c
	shift
	for c in "$@"; do
		wait_for 300 ctr_exited "$pod-$c" && ctr_ok "$pod-$c" || return 1
	done
}
tokens_issued() { grep -c "^$1 " "$LOGS/tokens.log"; }
gcs_pods() {
	mkdir -p "$WORK/secrets/walc-pgp" &&
		cp "$ROOT/test/fixtures/walg-v3.0.9-pgp/keys/pgp-secret.asc" "$WORK/secrets/walc-pgp/key.asc" &&
		chmod 0644 "$WORK/secrets/walc-pgp/key.asc" &&
		json_secret walc-pgp passphrase "walc pgp fixture passphrase" &&
		wait_for 60 grep -q '^ready' "$LOGS/gcs-emulator.log" &&
		store_pods walc-gcs --set storage.gcs.prefix=gs://walc/e2e \
			--set storage.gcs.workloadIdentityServiceAccount=walc-e2e@walc-e2e.iam.gserviceaccount.com \
			--set-string "extraConfig.GCS_ENDPOINT=http://127.0.0.1:$GCS_PORT" \
			--set encryption.libsodium.existingSecret= --set encryption.pgp.existingSecret=walc-pgp \
			--set encryption.pgp.secretKey=key --set encryption.pgp.passphraseKey=passphrase \
			--set restore.enabled=true --set restore.claimName=data-walc-gcs-restore
}
check "GCS: the chart with GKE Workload Identity and OpenPGP keys, as pods" gcs_pods
gcs_backup() {
	play "$WORK/pods-walc-gcs/walc-gcs-manual.yaml" && ran_ok walc-gcs-manual backup-push delete-retain &&
		echo "metadata server tokens: $(tokens_issued gce-metadata)" && [ "$(tokens_issued gce-metadata)" -ge 2 ]
}
check "GCS: the CronJob's pod (backup-push, delete retain FULL 1) with tokens from the metadata server" gcs_backup
gcs_restore() {
	local dir
	play "$WORK/pods-walc-gcs/walc-gcs-restore.yaml" && ran_ok walc-gcs-restore backup-fetch recovery-signal &&
		dir=$(podman volume inspect --format '{{.Mountpoint}}' data-walc-gcs-restore) || return 1
	ls -l "$dir/pgdata"
	[ -s "$dir/pgdata/PG_VERSION" ] && [ -s "$dir/pgdata/global/pg_control" ] && [ -e "$dir/pgdata/recovery.signal" ] &&
		[ "$(tokens_issued gce-metadata)" -ge 3 ]
}
check "GCS: the restore Job (backup-fetch LATEST with the OpenPGP secret key and passphrase, recovery.signal)" \
	gcs_restore
az_pods() {
	local key
	wait "$AZURITE" || { cat "$LOGS/azurite.out"; return 1; }
	key=$(sed -n 's/.*AZURE_STORAGE_ACCESS_KEY=\([^ ]*\).*/\1/p' "$LOGS/azurite.out")
	python3 "$ROOT/test/integration/objstore_tool.py" mkcontainer "https://devstoreaccount1.blob.localhost:$AZ_PORT" \
		devstoreaccount1 "$key" walc "$WORK/azurite/cert.pem" || return 1
	# Azurite's certificate as a CA bundle, in a ConfigMap as a user would keep one.
	node -e 'const y = require(process.argv[1]); const fs = require("fs");
		fs.writeFileSync(process.argv[3], y.dump({ apiVersion: "v1", kind: "ConfigMap",
			metadata: { name: "azurite-ca" }, data: { "ca.crt": fs.readFileSync(process.argv[2], "utf8") } }));' \
		"$ROOT/test/deploy/node_modules/js-yaml" "$WORK/azurite/cert.pem" "$WORK/pods/configmap-azurite-ca.yaml" &&
		store_pods walc-az --set storage.azure.prefix=azure://walc/e2e \
			--set storage.azure.storageAccount=devstoreaccount1 \
			--set "storage.azure.endpointSuffix=localhost:$AZ_PORT" \
			--set storage.azure.workloadIdentityClientId=walc-e2e-client \
			--set caBundle.configMap=azurite-ca
}
check "Azure: the chart with AKS workload identity and a CA bundle, as pods" az_pods
az_backup() {
	play "$WORK/pods-walc-az/walc-az-manual.yaml" && ran_ok walc-az-manual backup-push delete-retain &&
		echo "Azure AD tokens for the federated token: $(tokens_issued workload)" &&
		[ "$(tokens_issued workload)" -ge 2 ]
}
check "Azure: the CronJob's pod (backup-push, delete retain FULL 1) with Azure AD tokens for the federated token" \
	az_backup

finish
