#!/usr/bin/env bash
# Offline checks of walc's deployment files: the Helm chart (helm/walc), the manifests and units
# in deploy/, the Dockerfiles. No cluster or container engine needed:
#   - real Helm (test/deploy/tools.sh installs it): helm lint --strict and helm template with the
#     default values and for each store (values-full.yaml: S3; values-gcs.yaml, values-azure.yaml,
#     and their key-file, SAS and Shared Key variants), values.schema.json enforced by Helm (and
#     proved to reject typos), the chart's refusals of contradictory settings, a test StatefulSet
#     built from the sidecar templates, NOTES;
#   - YAML sources and rendered output pass yamllint;
#   - every rendered object and every manifest in deploy/kubernetes validates against the
#     Kubernetes 1.27 schema, unknown fields rejected, security rules enforced (validate.mjs);
#     the manifests' CronJob and restore Job run the chart's pods (same-pod.mjs);
#   - the CronJob runs exactly what the integration tests proved (assert-cronjob.mjs); each
#     store's objects and sidecars agree on the store, key files, secrets, workload identity,
#     deltas, wal-receive and the restore Job (assert-chart.mjs); the walc binary, when built,
#     accepts the rendered arguments;
#   - dockerfilelint, shellcheck, systemd-analyze verify, and consistency between the chart,
#     the Dockerfile, VERSION and walc's variables.
# The image is built and the pods run by make image and make e2e-pod (test/e2e/).
# Installs what it needs (Debian packages, npm packages and Helm into test/deploy/node_modules)
# when missing; run as root or with sudo. Output and build products go to build/deploy/.
# Last line: "deploy: N passed, N failed"; exit 1 on any failure.
#
# Environment: WALC (the binary to run the rendered arguments with, default <repo>/walc).

# Functions run through `check` look unreachable to shellcheck.
# shellcheck disable=SC2317
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
OUT=$ROOT/build/deploy
WALC=${WALC:-$ROOT/walc}
mkdir -p "$OUT/logs"
rm -f "$OUT"/*.yaml "$OUT"/logs/*

summary() {
	echo "deploy: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}
CHECK_LOGS=$OUT/logs
# shellcheck source-path=SCRIPTDIR source=../checks.sh
. "$ROOT/test/checks.sh"
skip() { echo "SKIP $1"; }

# --- set-up (idempotent) -------------------------------------------------------------------

check "set-up: Debian and npm packages, Helm and kubectl (test/deploy/tools.sh)" "$HERE/tools.sh"
[ "$failed" -eq 0 ] || summary

NODE_BIN=$HERE/node_modules/.bin
HELM=$("$HERE/tools.sh" bin)/helm
KUBECTL=$("$HERE/tools.sh" bin)/kubectl
YAMLLINT=(yamllint -c "$HERE/yamllint.yaml")
VALIDATE=(node "$HERE/validate.mjs")

# --- the chart, by Helm ---------------------------------------------------------------------

# Each store's values: VARIANT -> "STORE VALUES-FILE [--set LIST]" (values-VALUES-FILE.yaml). The
# variants swap the workload identity for a Secret: a GCS key file, an Azure SAS token or
# Shared Key. "full" is every value set, on S3.
declare -A VARIANT=(
	[full]="s3 full"
	[gcs]="gcs gcs"
	[azure]="azure azure"
	[gcs-key]="gcs gcs storage.gcs.workloadIdentityServiceAccount=,storage.gcs.credentials.existingSecret=walc-gcs"
	[azure-sas]="azure azure storage.azure.workloadIdentityClientId=,storage.azure.credentials.existingSecret=walc-azure,storage.azure.credentials.accessKeyKey=,storage.azure.credentials.sasTokenKey=sas-token"
	[azure-key]="azure azure storage.azure.workloadIdentityClientId=,storage.azure.credentials.existingSecret=walc-azure"
)
VARIANTS=(full gcs azure gcs-key azure-sas azure-key)
store_of() { local w; read -ra w <<<"${VARIANT[$1]}"; echo "${w[0]}"; }
# flags_of VARIANT: its helm flags, one a line
flags_of() {
	local w
	read -ra w <<<"${VARIANT[$1]}"
	printf '%s\n' -f "$HERE/values-${w[1]}.yaml"
	[ -z "${w[2]:-}" ] || printf '%s\n' --set "${w[2]}"
}

check "yamllint: chart values and metadata, test values" \
	"${YAMLLINT[@]}" helm/walc/Chart.yaml helm/walc/values.yaml "$HERE/yamllint.yaml" \
	"$HERE/values-full.yaml" "$HERE/values-gcs.yaml" "$HERE/values-azure.yaml" "$HERE/values-plain.yaml"
check "helm lint --strict, default values" "$HELM" lint --strict helm/walc
for v in "${VARIANTS[@]}"; do
	mapfile -t flags < <(flags_of "$v")
	check "helm lint --strict, $v values ($(store_of "$v"))" "$HELM" lint --strict helm/walc "${flags[@]}"
done

# render OUTPUT [helm template flags...]: the chart as `helm template walc helm/walc` renders it.
render() {
	local out=$1
	shift
	"$HELM" template walc helm/walc "$@" >"$out"
}
# The sidecar templates as a parent chart uses them: the test StatefulSet added to a copy of
# the chart, rendered alone.
rm -rf "$OUT/chart-sidecar" && mkdir -p "$OUT/chart-sidecar" && cp -r helm/walc "$OUT/chart-sidecar/" &&
	cp "$HERE/sidecar-statefulset.yaml" "$OUT/chart-sidecar/walc/templates/"
render_sidecar() { # OUTPUT [helm template flags...]
	local out=$1
	shift
	"$HELM" template walc "$OUT/chart-sidecar/walc" --show-only templates/sidecar-statefulset.yaml \
		"$@" >"$out"
}
check "helm template, default values" render "$OUT/default.yaml"
check "helm template: sidecar templates in a StatefulSet, default values" \
	render_sidecar "$OUT/sidecar-default.yaml"
rendered=("$OUT/default.yaml" "$OUT/sidecar-default.yaml")
for v in "${VARIANTS[@]}"; do
	mapfile -t flags < <(flags_of "$v")
	check "helm template, $v values" render "$OUT/$v.yaml" "${flags[@]}"
	check "helm template: sidecar templates in a StatefulSet, $v values" \
		render_sidecar "$OUT/sidecar-$v.yaml" "${flags[@]}"
	rendered+=("$OUT/$v.yaml" "$OUT/sidecar-$v.yaml")
done

# Helm validates the merged values against values.schema.json before rendering; every object
# there lists its keys as required, so a value nulled by an override is an error too.
schema_rejects() {
	printf 'storage:\n  s3prefix: s3://b/p\n  gcs:\n    prefix: s3://b/p\ncompression:\n  method: gzip\npostgresql:\n  port: "5432"\nrestore:\n  targetAction: resume\n' \
		>"$OUT/values-typos.yaml.in"
	printf 'backup:\n  schedule: null\n' >"$OUT/values-missing.yaml.in"
	local out
	out=$("$HELM" template walc helm/walc -f "$OUT/values-typos.yaml.in" 2>&1) && return 1
	echo "$out"
	grep -q "additional properties 's3prefix' not allowed" <<<"$out" &&
		grep -q "/storage/gcs/prefix': .*does not match pattern" <<<"$out" &&
		grep -q "/compression/method': value must be one of" <<<"$out" &&
		grep -q "/postgresql/port': got string, want integer" <<<"$out" &&
		grep -q "/restore/targetAction': value must be one of" <<<"$out" || return 1
	out=$("$HELM" lint --strict helm/walc -f "$OUT/values-missing.yaml.in" 2>&1) && return 1
	echo "$out"
	grep -q "/backup': missing property 'schedule'" <<<"$out"
}
check "values.schema.json, by Helm: rejects a misspelt key, a wrong prefix, an unknown codec and action, a string port, a null" \
	schema_rejects
# refused VALUES... -- MESSAGE: helm template with those --set values fails, saying MESSAGE.
refused() {
	local sets=() out
	while [ "$1" != -- ]; do sets+=(--set "$1"); shift; done
	out=$("$HELM" template walc helm/walc "${sets[@]}" 2>&1) && { echo "rendered: ${sets[*]}"; return 1; }
	echo "$out"
	grep -qF "$2" <<<"$out"
}
contradictions() {
	refused storage.s3Prefix=s3://b/p storage.gcs.prefix=gs://b/p -- \
		"storage: one store only, got storage.s3Prefix and storage.gcs.prefix" &&
		refused storage.azure.prefix=azure://c/p -- "storage.azure.storageAccount: required" &&
		refused storage.azure.prefix=azure://c/p storage.azure.storageAccount=acct \
			storage.azure.credentials.existingSecret=s storage.azure.credentials.sasTokenKey=t -- \
			"accessKeyKey or sasTokenKey, not both" &&
		refused encryption.libsodium.existingSecret=a encryption.pgp.existingSecret=b -- \
			"encryption: libsodium or pgp, not both" &&
		refused sidecar.archive=false sidecar.daemon.enabled=true -- "sidecar.daemon.enabled: the daemon archives" &&
		refused restore.enabled=true -- "restore.claimName: required"
}
check "the chart refuses two stores, an Azure account missing, two Azure keys, two encryptions, the daemon without archiving, a restore without a claim" \
	contradictions

# NOTES.txt: helm install --dry-run=client renders it without a cluster.
notes() { # VARIANT TEXT...: each TEXT is in the notes
	local flags=() out t
	[ "$1" = default ] || mapfile -t flags < <(flags_of "$1")
	out=$("$HELM" install --dry-run=client walc helm/walc "${flags[@]}") || return 1
	shift
	for t in "$@"; do grep -F "$t" <<<"$out" || { echo "NOTES lack: $t"; return 1; }; done
}
check "helm install --dry-run=client: NOTES.txt, default values" notes default "walc backup-push" "WARNING: no repository"
check "helm install --dry-run=client: NOTES.txt, full values" notes full "delete retain FULL 7 --confirm" \
	"Job pg-main-walc-restore fills claim data-pg-main-0 with the backup before 2026-12-06T02:04:42Z"
check "helm install --dry-run=client: NOTES.txt, gcs values" notes gcs "GKE Workload Identity as walc-backups@" \
	"up to 6 deltas" "includes wal-receive (slot walg, as walc_backup)"
check "helm install --dry-run=client: NOTES.txt, azure values" notes azure "AKS workload identity as client" \
	'azure.workload.identity/use: "true"'

check "yamllint: rendered chart" "${YAMLLINT[@]}" "${rendered[@]}"
check "schema and security rules: rendered chart" "${VALIDATE[@]}" "${rendered[@]}"
check "CronJob, default values: backup-push (remote mode), no retention" \
	node "$HERE/assert-cronjob.mjs" "$OUT/default.yaml" 0
mkdir -p "$OUT/args"
check "CronJob, full values: backup-push (remote mode), then delete retain FULL 7 --confirm" \
	node "$HERE/assert-cronjob.mjs" "$OUT/full.yaml" 7 --print-args "$OUT/args"
for v in "${VARIANTS[@]}"; do
	check "each store: $v values agree on the store, key files, secrets, identity, deltas, wal-receive, restore Job" \
		node "$HERE/assert-chart.mjs" "$(store_of "$v")" "$OUT/$v.yaml" "$OUT/sidecar-$v.yaml" \
		--print-args "$OUT/args"
	cp "$OUT/args/restore.args" "$OUT/args/restore-$v.args" 2>/dev/null
done
# The assertions must fail where they exist to: an AKS pod without its label, a key mounted
# elsewhere than the ConfigMap says, a restore_command that is not the PostgreSQL container's.
assert_chart_rejects() {
	local out
	grep -v 'azure.workload.identity/use: "true"' "$OUT/sidecar-azure.yaml" >"$OUT/broken-azure.yaml.in"
	out=$(node "$HERE/assert-chart.mjs" azure "$OUT/azure.yaml" "$OUT/broken-azure.yaml.in") && return 1
	echo "$out"
	grep -q 'StatefulSet/sidecar-test-postgresql: no label azure.workload.identity/use' <<<"$out" || return 1
	sed 's|mountPath: /etc/walc/pgp$|mountPath: /etc/walc/gpg|' "$OUT/gcs.yaml" >"$OUT/broken-gcs.yaml.in"
	out=$(node "$HERE/assert-chart.mjs" gcs "$OUT/broken-gcs.yaml.in" "$OUT/sidecar-gcs.yaml") && return 1
	echo "$out"
	grep -q 'WALG_PGP_KEY_PATH=/etc/walc/pgp/key.asc: no Secret volume mounted at /etc/walc/pgp' <<<"$out" || return 1
	sed 's|/opt/walc/bin/walc wal-fetch|/usr/local/bin/walc wal-fetch|' "$OUT/full.yaml" >"$OUT/broken-full.yaml.in"
	out=$(node "$HERE/assert-chart.mjs" s3 "$OUT/broken-full.yaml.in" "$OUT/sidecar-full.yaml") && return 1
	echo "$out"
	grep -q 'restore Job writes restore_command' <<<"$out"
}
check "assert-chart.mjs rejects a pod without the AKS label, a misplaced key, another restore_command" \
	assert_chart_rejects

# The rendered argv, run by the real binary: the syntax is walc's, not just the chart's idea.
# walc_try VAR=VALUE... -- ARG...: walc with only those variables, on an empty file repository;
# prints what it said.
walc_try() {
	local envs=() repo rc
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	repo=$(mktemp -d) || return 1
	env -i PATH=/usr/bin:/bin HOME="$repo" "${envs[@]}" WALG_FILE_PREFIX="$repo" "$WALC" "$@" 2>&1
	rc=$?
	rm -rf "$repo"
	return "$rc"
}
walc_delete() {
	local args
	mapfile -t args <"$OUT/args/delete.args"
	walc_try -- "${args[@]}"
}
walc_backup_push() {
	local args err
	mapfile -t args <"$OUT/args/backup-push.args"
	# Port 1 is closed: walc must get as far as connecting to PGHOST:PGPORT.
	err=$(walc_try PGHOST=127.0.0.1 PGPORT=1 PGUSER=postgres PGCONNECT_TIMEOUT=5 -- "${args[@]}")
	echo "$err"
	! grep -q "usage:" <<<"$err" && grep -q 'port 1' <<<"$err"
}
# Each restore Job's backup-fetch: as far as looking for a backup (none in an empty repository),
# so the target time and every flag were accepted.
walc_backup_fetch() {
	local v args err bad=0
	for v in "${VARIANTS[@]}"; do
		mapfile -t args <"$OUT/args/restore-$v.args"
		err=$(walc_try -- "${args[@]}")
		echo "$v: ${args[*]} -> $err"
		grep -qE "no backup on timeline|no backups found" <<<"$err" || bad=1
	done
	return "$bad"
}
# wal-receive with the rendered variables (the ConfigMap's and the container's), but the
# repository (a file one instead), the key files and CA bundle; PGPORT a closed port: as far as
# connecting.
walc_wal_receive() {
	local envs err
	mapfile -t envs < <(grep -vE '^(WALG_(S3|GS|AZ)_PREFIX|AZURE_|AWS_|WALG_[A-Z]+_KEY_(PATH|TRANSFORM)|GOOGLE_APPLICATION_CREDENTIALS|SSL_CERT_FILE|PGPORT)=' \
		"$OUT/args/wal-receive.env")
	err=$(walc_try "${envs[@]}" PGPORT=1 PGCONNECT_TIMEOUT=5 -- wal-receive)
	echo "$err"
	grep -q 'connecting to PostgreSQL' <<<"$err" && grep -q 'port 1' <<<"$err"
}
if [ -x "$WALC" ]; then
	check "walc runs the rendered delete arguments (empty repository)" walc_delete
	check "walc accepts the rendered backup-push arguments (remote mode, connects to PGHOST:PGPORT)" \
		walc_backup_push
	check "walc accepts each restore Job's backup-fetch arguments (target times, actions, restore_command)" \
		walc_backup_fetch
	check "walc accepts the wal-receive sidecar's settings (slot name, connection)" walc_wal_receive
else
	skip "walc runs the rendered arguments: no binary at $WALC (make walc)"
fi

# --- deploy/ ---------------------------------------------------------------------------------

manifests=(deploy/kubernetes/*.yaml)
check "yamllint: deploy/kubernetes" "${YAMLLINT[@]}" "${manifests[@]}"
check "schema and security rules: deploy/kubernetes" "${VALIDATE[@]}" "${manifests[@]}"
kustomize() { "$KUBECTL" kustomize deploy/kubernetes >"$OUT/kustomize.yaml" && "${VALIDATE[@]}" "$OUT/kustomize.yaml"; }
check "kubectl kustomize deploy/kubernetes, then schema" kustomize
# The hand-written CronJob and restore Job run the chart's pods (so what make e2e-pod proves of
# the chart's holds for them).
plain_is_chart() {
	render "$OUT/plain.yaml" -f "$HERE/values-plain.yaml" &&
		node "$HERE/same-pod.mjs" CronJob deploy/kubernetes/backup-cronjob.yaml walc-backup "$OUT/plain.yaml" walc &&
		node "$HERE/same-pod.mjs" Job deploy/kubernetes/restore-job.yaml walc-restore "$OUT/plain.yaml" walc-restore
}
check "deploy/kubernetes: backup-cronjob.yaml and restore-job.yaml run the chart's pods (values-plain.yaml)" \
	plain_is_chart

# The validator must reject what it exists to reject.
cat >"$OUT/broken.yaml.in" <<'YAML'
apiVersion: batch/v1
kind: CronJob
metadata:
  name: broken
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - image: walc:0.1.0
              comand: [/usr/local/bin/walc]
              env:
                - name: PGPASSWORD
                  value: hunter2
                - name: AZURE_STORAGE_ACCESS_KEY
                  value: a2V5
YAML
validator_rejects() {
	local out rc
	out=$("${VALIDATE[@]}" "$OUT/broken.yaml.in")
	rc=$?
	echo "$out"
	[ "$rc" -ne 0 ] &&
		grep -q "must have required property 'name'" <<<"$out" &&
		grep -q "comand: unknown field" <<<"$out" &&
		grep -q "PGPASSWORD is a secret in plain text" <<<"$out" &&
		grep -q "AZURE_STORAGE_ACCESS_KEY is a secret in plain text" <<<"$out" &&
		grep -q "readOnlyRootFilesystem must be true" <<<"$out"
}
check "validator rejects a missing name, an unknown field, a plain-text secret, a writable root" \
	validator_rejects

if command -v systemd-analyze >/dev/null; then
	# verify wants ExecStart's binary to exist: point it at one that does.
	systemd_verify() {
		sed 's|/usr/local/bin/walc|/bin/true|' deploy/systemd/walc-daemon.service >"$OUT/walc-daemon.service"
		local out
		out=$(systemd-analyze verify "$OUT/walc-daemon.service" 2>&1)
		echo "$out"
		[ -z "$out" ]
	}
	check "systemd-analyze verify deploy/systemd/walc-daemon.service" systemd_verify
else
	skip "systemd-analyze verify: no systemd-analyze"
fi
check "walc-daemon.service runs walc daemon on the archive module's socket" \
	grep -qx 'ExecStart=/usr/local/bin/walc daemon /run/walc/walc.sock' deploy/systemd/walc-daemon.service

# Every variable the env example names is one walc (or libpq) reads.
env_example_names() {
	local bad=0 name
	while read -r name; do
		case $name in PG[A-Z]*) continue ;; esac
		grep -rqF "\"$name\"" internal cmd || { echo "walc.env.example: walc does not read $name"; bad=1; }
	done < <(sed -nE 's/^#?([A-Z][A-Z0-9_]+)=.*/\1/p' deploy/walc.env.example | sort -u)
	[ "$bad" -eq 0 ]
}
check "walc.env.example: every variable is one walc reads" env_example_names

# --- Dockerfiles -----------------------------------------------------------------------------

# dockerfilelint takes `FROM ${ARG}` for an image without a tag: it reads the file with the
# default of each ARG declared before the first FROM put in.
dockerfilelint_args() {
	local copy
	copy="$OUT/lint-$(printf '%s' "$1" | tr / _)"
	awk '!from && /^ARG [A-Za-z_]+=/ { split(substr($0, 5), kv, "="); val[kv[1]] = kv[2] }
		/^FROM / { from = 1; for (k in val) gsub("\\$\\{" k "\\}", val[k]) } { print }' "$1" >"$copy" &&
		"$NODE_BIN/dockerfilelint" "$copy"
}
check "dockerfilelint Dockerfile" dockerfilelint_args Dockerfile
check "dockerfilelint deploy/postgres-walc/Dockerfile" dockerfilelint_args deploy/postgres-walc/Dockerfile
check "dockerfilelint deploy/image/postgres/Dockerfile" dockerfilelint_args deploy/image/postgres/Dockerfile

dockerfile_shape() {
	local final ok=0
	# The final stage: everything after the last FROM.
	final=$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' Dockerfile)
	grep -qE '^RUN .*make static' Dockerfile || { echo "the builder does not run make static"; ok=1; }
	grep -qE '^FROM (scratch|gcr\.io/distroless/static[^ ]*)$' <<<"$final" ||
		{ echo "the final stage is not FROM scratch or distroless static"; ok=1; }
	grep -qxF 'ENTRYPOINT ["/usr/local/bin/walc"]' <<<"$final" || { echo "ENTRYPOINT is not /usr/local/bin/walc"; ok=1; }
	grep -qE '^USER 65532(:65532)?$' <<<"$final" || { echo "the final stage does not run as 65532"; ok=1; }
	grep -q 'walc-static /rootfs/usr/local/bin/walc' Dockerfile || { echo "walc-static is not installed as /usr/local/bin/walc"; ok=1; }
	grep -q '/etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt' Dockerfile ||
		{ echo "the CA bundle is not copied from the builder"; ok=1; }
	grep -q '/bin/busybox /rootfs/usr/local/bin/busybox' Dockerfile || { echo "no busybox for the sidecar's cp"; ok=1; }
	local ignored
	for ignored in .git build walc walc-static; do
		grep -qxF "$ignored" .dockerignore || { echo ".dockerignore does not keep $ignored out"; ok=1; }
	done
	return "$ok"
}
check "Dockerfile: make static in the builder; scratch, walc, CA bundle, uid 65532" dockerfile_shape

chart_matches_image() {
	local ok=0
	grep -q '^/usr/local/bin/walc$' helm/walc/templates/_helpers.tpl || { echo "walc.binary is not the image's path"; ok=1; }
	grep -q '/usr/local/bin/busybox' helm/walc/templates/_helpers.tpl || { echo "the copy initContainer's busybox path"; ok=1; }
	grep -qx "appVersion: \"$(cat VERSION)\"" helm/walc/Chart.yaml || { echo "Chart.yaml appVersion is not VERSION ($(cat VERSION))"; ok=1; }
	grep -qE '^  runAsUser: 65532$' helm/walc/values.yaml || { echo "values.yaml runAsUser is not the image's 65532"; ok=1; }
	return "$ok"
}
check "chart agrees with the image (binary, busybox, uid) and VERSION (appVersion)" chart_matches_image

check "shellcheck test/deploy/check.sh, tools.sh" shellcheck -x "$HERE/check.sh" "$HERE/tools.sh"
check "shellcheck deploy/ (the image and static builds, the chroots) and test/static/" \
	shellcheck -x "$ROOT"/deploy/*.sh "$ROOT"/deploy/*/*.sh "$ROOT"/test/static/*.sh

summary
