#!/usr/bin/env bash
# Prints line and branch coverage per module of internal/ (and of cmd's settings table) from the raw profiles that a build
# with clang's source-based coverage (make coverage) left in BUILD_DIR/prof, then the total;
# fails when a module's line figure is under its floor (FLOORS, below) or the total's under MIN.
# Usage: test/coverage.sh BUILD_DIR MIN
#        test/coverage.sh --pool BINARY DIR N: makes BINARY's N pool files in DIR beforehand, writable
#        by every user (BINARY also runs as postgres, whose umask would keep root out of a
#        file it created first)
#        test/coverage.sh --unit BUILD_DIR: the table alone, titled as the unit programs' (no
#        verdict: the floors are the whole suite's)
#        test/coverage.sh --self-test: checks the verdict on made-up figures (make lint runs it)
set -euo pipefail

# Each module's floor, in percent of its lines covered by unit and integration tests together:
# the figure CI measured, less 1.5 points for the swing between runs. A module without a row
# is held to 80.
FLOORS='
backup 89.3
catalog 91.7
codec 93.6
core 90.5
crypt 92.8
daemon 85.4
pg 87.7
pipe 96.4
repo 93.0
settings 93.9
storage 88.0
tar 94.5
wal 85.7
'
DEFAULT_FLOOR=80

# verdict SUMMARY_JSON MIN ROOT: prints the table of llvm-cov's summary for the files below ROOT
# (a module is a folder of ROOT/internal; ROOT/cmd/walc/settings, the table and its loader, is
# "settings"); exits 1 when a module is under its floor or the total under MIN.
# MIN "-": the unit programs' table, no verdict.
verdict() {
	python3 - "$1" "$2" "$3" "$FLOORS" "$DEFAULT_FLOOR" <<'PY'
import collections, json, sys
data = json.load(open(sys.argv[1]))
judge = sys.argv[2] != "-"
minimum = float(sys.argv[2]) if judge else 0.0
root = sys.argv[3]
floors = {name: float(pct) for name, pct in (row.split() for row in sys.argv[4].splitlines() if row.strip())}
default = float(sys.argv[5])
mods = collections.defaultdict(lambda: [0, 0, 0, 0])
for f in data["data"][0]["files"]:
    name = f["filename"]
    if name.startswith(root + "internal/"):
        m = mods[name[len(root + "internal/"):].split("/")[0]]
    elif name.startswith(root + "cmd/walc/settings/"):
        m = mods["settings"]
    else:
        continue
    s = f["summary"]
    m[0] += s["lines"]["covered"]; m[1] += s["lines"]["count"]
    m[2] += s["branches"]["covered"]; m[3] += s["branches"]["count"]
pct = lambda a, b: 100.0 * a / b if b else 100.0
print(f"coverage of internal/ and cmd/walc/settings/ ({'unit + integration tests' if judge else 'unit tests alone'}):")
print(f"  {'module':10} {'lines':>16} {'floor' if judge else '':>6}  {'branches':>18}")
shown = lambda floor: f"{floor:5.1f}%" if judge else ""
failures = []
for name, (lc, lt, bc, bt) in sorted(mods.items()):
    floor = floors.get(name, default)
    print(f"  {name:10} {lc:5}/{lt:<5} {pct(lc, lt):5.1f}% {shown(floor):6}  {bc:5}/{bt:<5} {pct(bc, bt):5.1f}%")
    # compared as printed, so that the message never says a figure is under itself
    if judge and round(pct(lc, lt), 1) < floor:
        failures.append(f"coverage: {name} covers {pct(lc, lt):.1f}% of its lines, under its floor of {floor:g}%")
lc = sum(m[0] for m in mods.values()); lt = sum(m[1] for m in mods.values())
bc = sum(m[2] for m in mods.values()); bt = sum(m[3] for m in mods.values())
total = pct(lc, lt)
print(f"  {'total':10} {lc:5}/{lt:<5} {total:5.1f}% {shown(minimum):6}  {bc:5}/{bt:<5} {pct(bc, bt):5.1f}%")
if judge and total < minimum:
    failures.append(f"coverage: {total:.1f}% of lines is under the {minimum:g}% reached before")
for line in failures:
    print(line)
sys.exit(1 if failures else 0)
PY
}

# fake_summary NAME=COVERED...: llvm-cov's summary of one 1000-line file per module, below /r/.
fake_summary() {
	local files="" sep="" kv dir
	for kv in "$@"; do
		dir=internal/${kv%%=*}
		[ "${kv%%=*}" != settings ] || dir=cmd/walc/settings
		files+="$sep{\"filename\": \"/r/$dir/a.c\", \"summary\": {\"lines\": {\"covered\": ${kv#*=}, \"count\": 1000}, \"branches\": {\"covered\": 1, \"count\": 2}}}"
		sep=,
	done
	printf '{"data": [{"files": [%s]}]}\n' "$files"
}

# expect_fail SUMMARY MIN LINE: the verdict on SUMMARY (named after its case) fails and says LINE.
expect_fail() {
	if verdict "$1" "$2" /r/ >"$tmp/out"; then
		echo "coverage self-test: $(basename "$1" .json) passed:"; cat "$tmp/out"; exit 1
	fi
	grep -qxF "$3" "$tmp/out" ||
		{ echo "coverage self-test: $(basename "$1" .json) did not say \"$3\":"; cat "$tmp/out"; exit 1; }
}

if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# pg at its floor, a module without a row at 80, the total over 89: only wal fails
	fake_summary pg=877 wal=856 newmod=800 pipe=999 tar=999 core=999 >"$tmp/wal-under-its-floor.json"
	expect_fail "$tmp/wal-under-its-floor.json" 89 'coverage: wal covers 85.6% of its lines, under its floor of 85.7%'
	if grep -qE '^coverage: (pg|newmod|pipe|tar|core) ' "$tmp/out"; then
		echo "coverage self-test: a module at or over its floor failed:"; cat "$tmp/out"; exit 1
	fi
	fake_summary newmod=799 pipe=999 tar=999 >"$tmp/rowless-module-under-80.json"
	expect_fail "$tmp/rowless-module-under-80.json" 89 'coverage: newmod covers 79.9% of its lines, under its floor of 80%'
	fake_summary settings=930 pipe=999 >"$tmp/settings-under-its-floor.json"
	expect_fail "$tmp/settings-under-its-floor.json" 89 'coverage: settings covers 93.0% of its lines, under its floor of 93.9%'
	fake_summary pg=900 wal=900 >"$tmp/total-under-min.json"
	expect_fail "$tmp/total-under-min.json" 91 'coverage: 90.0% of lines is under the 91% reached before'
	verdict "$tmp/total-under-min.json" 89 /r/ >"$tmp/out" ||
		{ echo "coverage self-test: figures over every floor failed:"; cat "$tmp/out"; exit 1; }
	echo "coverage self-test: a module under its floor, one without a row under 80%, cmd's settings under theirs and a low total fail"
	exit 0
fi

for tool in llvm-profdata llvm-cov; do
	command -v "$tool" >/dev/null || { echo "coverage: $tool is not installed (deploy/deps.sh test)"; exit 1; }
done

if [ "${1:-}" = --pool ]; then
	usage="usage: test/coverage.sh --pool BINARY DIR N"
	bin=${2:?$usage} dir=${3:?$usage} pool=${4:?$usage}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# A pool of one names the file after the binary's signature; a pool of N adds _0.._N-1.
	LLVM_PROFILE_FILE="$tmp/%1m.profraw" ASAN_OPTIONS=detect_leaks=0 "$bin" --version >/dev/null
	name=$(cd "$tmp" && ls)
	case $name in *_0.profraw) ;; *) echo "coverage: $bin wrote no raw profile (got \"$name\")"; exit 1 ;; esac
	for ((i = 0; i < pool; i++)); do
		: >"$dir/${name%_0.profraw}_$i.profraw"
		chmod 666 "$dir/${name%_0.profraw}_$i.profraw"
	done
	exit 0
fi

if [ "${1:-}" = --unit ]; then
	build=${2:?usage: test/coverage.sh --unit BUILD_DIR} min=-
else
	build=${1:?usage: test/coverage.sh BUILD_DIR MIN}
	min=${2:?usage: test/coverage.sh BUILD_DIR MIN}
fi
cd "$(dirname "$0")/.."
prof=$build/prof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A pool file no process used is still empty, and not a profile.
mapfile -t raw < <(find "$prof" -name '*.profraw' -size +0)
[ "${#raw[@]}" -gt 0 ] || { echo "coverage: no raw profiles in $prof"; exit 1; }
llvm-profdata merge -sparse -o "$tmp/all.profdata" "${raw[@]}" ||
	{ echo "coverage: llvm-profdata could not merge the profiles in $prof"; exit 1; }
objects=()
for t in "$build"/test/test_*; do [ -x "$t" ] && objects+=(-object "$t"); done
llvm-cov export -summary-only -instr-profile "$tmp/all.profdata" "$build/walc" "${objects[@]}" \
	>"$tmp/summary.json" || { echo "coverage: llvm-cov export failed on $build"; exit 1; }
verdict "$tmp/summary.json" "$min" "$PWD/"
