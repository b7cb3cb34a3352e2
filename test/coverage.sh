#!/usr/bin/env bash
# Prints line and branch coverage per module of internal/ from the raw profiles that a build
# with clang's source-based coverage (make coverage) left in BUILD_DIR/prof, then the total;
# fails when the total line figure is under MIN percent.
# Usage: test/coverage.sh BUILD_DIR MIN
#        test/coverage.sh --pool BINARY DIR N: makes BINARY's N pool files in DIR beforehand, writable
#        by every user (BINARY also runs as postgres, whose umask would keep root out of a
#        file it created first)
set -euo pipefail
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

build=${1:?usage: test/coverage.sh BUILD_DIR MIN}
min=${2:?usage: test/coverage.sh BUILD_DIR MIN}
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
python3 - "$tmp/summary.json" "$min" "$PWD/internal/" <<'EOF'
import collections, json, sys
data = json.load(open(sys.argv[1]))
minimum = float(sys.argv[2])
root = sys.argv[3]
mods = collections.defaultdict(lambda: [0, 0, 0, 0])
for f in data["data"][0]["files"]:
    if not f["filename"].startswith(root):
        continue
    s = f["summary"]
    m = mods[f["filename"][len(root):].split("/")[0]]
    m[0] += s["lines"]["covered"]; m[1] += s["lines"]["count"]
    m[2] += s["branches"]["covered"]; m[3] += s["branches"]["count"]
pct = lambda a, b: 100.0 * a / b if b else 100.0
print("coverage of internal/ (unit + integration tests):")
print(f"  {'module':10} {'lines':>16} {'branches':>18}")
for name, (lc, lt, bc, bt) in sorted(mods.items()):
    print(f"  {name:10} {lc:5}/{lt:<5} {pct(lc, lt):5.1f}%  {bc:5}/{bt:<5} {pct(bc, bt):5.1f}%")
lc = sum(m[0] for m in mods.values()); lt = sum(m[1] for m in mods.values())
bc = sum(m[2] for m in mods.values()); bt = sum(m[3] for m in mods.values())
total = pct(lc, lt)
print(f"  {'total':10} {lc:5}/{lt:<5} {total:5.1f}%  {bc:5}/{bt:<5} {pct(bc, bt):5.1f}%")
if total < minimum:
    print(f"coverage: {total:.1f}% of lines is under the {minimum:g}% reached before")
    sys.exit(1)
EOF
