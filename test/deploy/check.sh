#!/usr/bin/env bash
# Offline checks of walc's deployment files: the Helm chart (helm/walc), the manifests and units
# in deploy/, the Dockerfiles. No helm, cluster or Docker engine needed:
#   - the chart is rendered by test/deploy/render.go (Go's text/template + sprig, helm's
#     functions, strict about missing values) with the default values and with
#     test/deploy/values-full.yaml, plus a test StatefulSet built from the sidecar templates;
#   - YAML sources and rendered output pass yamllint;
#   - every rendered object and every manifest in deploy/kubernetes validates against the
#     Kubernetes 1.27 schema, unknown fields rejected, security rules enforced (validate.mjs);
#   - the CronJob runs exactly what the integration tests proved (assert-cronjob.mjs), and the
#     walc binary, when built, accepts the rendered arguments;
#   - dockerfilelint, shellcheck, systemd-analyze verify, and consistency between the chart,
#     the Dockerfile, VERSION and walc's variables.
# Installs what it needs (Debian packages, npm packages into test/deploy/node_modules) when
# missing; run as root or with sudo. Output and build products go to build/deploy/.
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

passed=0
failed=0
summary() {
	echo "deploy: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}
# check NAME COMMAND...: one check; its output is kept in build/deploy/logs and shown on failure.
check() {
	local name=$1 log
	shift
	log="$OUT/logs/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log"
	if "$@" >"$log" 2>&1; then
		echo "PASS $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name"
		sed 's/^/    /' "$log" | tail -n 60
		failed=$((failed + 1))
	fi
}
skip() { echo "SKIP $1"; }

# --- set-up (idempotent) -------------------------------------------------------------------

# shellcheck source-path=SCRIPTDIR source=../../deploy/apt.sh
. "$ROOT/deploy/apt.sh"

install_debian() {
	local pkgs=(golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
		golang-gopkg-yaml.v3-dev yamllint shellcheck)
	# Debian's nodejs and npm, unless a node and npm are there already (e.g. NodeSource's).
	command -v node >/dev/null || pkgs+=(nodejs)
	command -v npm >/dev/null || pkgs+=(npm)
	apt_install "${pkgs[@]}"
}

install_npm() {
	node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 14 ? 0 : 1)' ||
		{ echo "node $(node --version) is too old (kubernetes-models needs 14 or later)"; return 1; }
	local stamp=$HERE/node_modules/.walc-lock-sha256 sum
	sum=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && return 0
	(cd "$HERE" && npm ci --no-audit --no-fund) && echo "$sum" >"$stamp"
}

build_renderer() {
	gofmt -l "$HERE/render.go" | grep . && { echo "render.go is not gofmt-formatted"; return 1; }
	# GOPATH mode over Debian's packaged sources: no module download.
	export GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS="" GOCACHE="$OUT/go-cache"
	go vet "$HERE/render.go" && go build -o "$OUT/render" "$HERE/render.go"
}

check "set-up: Debian packages" install_debian
check "set-up: npm packages (test/deploy/package-lock.json)" install_npm
check "set-up: build the chart renderer (render.go: gofmt, go vet, go build)" build_renderer
[ "$failed" -eq 0 ] || summary

NODE_BIN=$HERE/node_modules/.bin
YAMLLINT=(yamllint -c "$HERE/yamllint.yaml")
VALIDATE=(node "$HERE/validate.mjs")

# --- the chart -------------------------------------------------------------------------------

check "yamllint: chart values and metadata, test values" \
	"${YAMLLINT[@]}" helm/walc/Chart.yaml helm/walc/values.yaml "$HERE/values-full.yaml" "$HERE/yamllint.yaml"
check "values.schema.json is JSON" node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' \
	helm/walc/values.schema.json

render() { # render OUTPUT [render flags...]
	local out=$1
	shift
	"$OUT/render" -chart helm/walc "$@" >"$out"
}
check "render: chart, default values" render "$OUT/default.yaml" -values-json "$OUT/values-default.json"
check "render: chart, full values" \
	render "$OUT/full.yaml" -f "$HERE/values-full.yaml" -values-json "$OUT/values-full.json"
check "values.schema.json: default values" \
	node "$HERE/values-schema.mjs" helm/walc/values.schema.json "$OUT/values-default.json"
check "values.schema.json: full values" \
	node "$HERE/values-schema.mjs" helm/walc/values.schema.json "$OUT/values-full.json"
schema_rejects() {
	printf 'storage:\n  s3prefix: s3://b/p\ncompression:\n  method: gzip\npostgresql:\n  port: "5432"\n' \
		>"$OUT/values-typos.yaml.in"
	"$OUT/render" -chart helm/walc -f "$OUT/values-typos.yaml.in" -values-json "$OUT/values-typos.json" >/dev/null ||
		return 1
	local out
	out=$(node "$HERE/values-schema.mjs" helm/walc/values.schema.json "$OUT/values-typos.json")
	echo "$out"
	grep -q "additional properties: s3prefix" <<<"$out" && grep -q "/compression/method" <<<"$out" &&
		grep -q "/postgresql/port must be integer" <<<"$out"
}
check "values.schema.json rejects a misspelt key, an unknown codec, a string port" schema_rejects
check "render: sidecar templates in a StatefulSet, default values" \
	render "$OUT/sidecar-default.yaml" -extra "$HERE/sidecar-statefulset.yaml"
check "render: sidecar templates in a StatefulSet, full values" \
	render "$OUT/sidecar-full.yaml" -extra "$HERE/sidecar-statefulset.yaml" -f "$HERE/values-full.yaml"
notes() {
	"$OUT/render" -chart helm/walc -notes 2>&1 >/dev/null | grep "walc backup-push" &&
		"$OUT/render" -chart helm/walc -notes -f "$HERE/values-full.yaml" 2>&1 >/dev/null |
		grep "delete retain FULL 7 --confirm"
}
check "render: NOTES.txt, default and full values" notes

# The renderer must not be lenient where helm lint --strict is not.
missing_value() {
	printf 'backup:\n  schedule: null\n' >"$OUT/values-missing.yaml.in"
	! "$OUT/render" -chart helm/walc -f "$OUT/values-missing.yaml.in" >/dev/null
}
check "render: a value missing from the values is an error" missing_value

rendered=("$OUT/default.yaml" "$OUT/full.yaml" "$OUT/sidecar-default.yaml" "$OUT/sidecar-full.yaml")
check "yamllint: rendered chart" "${YAMLLINT[@]}" "${rendered[@]}"
check "schema and security rules: rendered chart" "${VALIDATE[@]}" "${rendered[@]}"
check "CronJob, default values: backup-push (remote mode), no retention" \
	node "$HERE/assert-cronjob.mjs" "$OUT/default.yaml" 0
mkdir -p "$OUT/args"
check "CronJob, full values: backup-push (remote mode), then delete retain FULL 7 --confirm" \
	node "$HERE/assert-cronjob.mjs" "$OUT/full.yaml" 7 --print-args "$OUT/args"

# The rendered argv, run by the real binary: the syntax is walc's, not just the chart's idea.
walc_delete() {
	local args repo
	mapfile -t args <"$OUT/args/delete.args"
	repo=$(mktemp -d) || return 1
	env -i PATH=/usr/bin:/bin HOME="$repo" WALG_FILE_PREFIX="$repo" "$WALC" "${args[@]}"
	local rc=$?
	rm -rf "$repo"
	return "$rc"
}
walc_backup_push() {
	local args repo err
	mapfile -t args <"$OUT/args/backup-push.args"
	repo=$(mktemp -d) || return 1
	# Port 1 is closed: walc must get as far as connecting to PGHOST:PGPORT.
	err=$(env -i PATH=/usr/bin:/bin HOME="$repo" WALG_FILE_PREFIX="$repo" PGHOST=127.0.0.1 \
		PGPORT=1 PGUSER=postgres PGCONNECT_TIMEOUT=5 "$WALC" "${args[@]}" 2>&1)
	rm -rf "$repo"
	echo "$err"
	! grep -q "usage:" <<<"$err" && grep -q 'port 1' <<<"$err"
}
if [ -x "$WALC" ]; then
	check "walc runs the rendered delete arguments (empty repository)" walc_delete
	check "walc accepts the rendered backup-push arguments (remote mode, connects to PGHOST:PGPORT)" \
		walc_backup_push
else
	skip "walc runs the rendered arguments: no binary at $WALC (make walc)"
fi

# --- deploy/ ---------------------------------------------------------------------------------

manifests=(deploy/kubernetes/*.yaml)
check "yamllint: deploy/kubernetes" "${YAMLLINT[@]}" "${manifests[@]}"
check "schema and security rules: deploy/kubernetes" "${VALIDATE[@]}" "${manifests[@]}"
kustomize() { kubectl kustomize deploy/kubernetes >"$OUT/kustomize.yaml" && "${VALIDATE[@]}" "$OUT/kustomize.yaml"; }
if command -v kubectl >/dev/null; then
	check "kubectl kustomize deploy/kubernetes, then schema" kustomize
else
	skip "kubectl kustomize: no kubectl"
fi

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

check "dockerfilelint Dockerfile" "$NODE_BIN/dockerfilelint" Dockerfile
check "dockerfilelint deploy/postgres-walc/Dockerfile" "$NODE_BIN/dockerfilelint" deploy/postgres-walc/Dockerfile

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

check "shellcheck test/deploy/check.sh" shellcheck -x "$HERE/check.sh"

summary
