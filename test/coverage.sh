#!/usr/bin/env bash
# Prints line and branch coverage per module of internal/ from the .gcda files a --coverage
# build left in BUILD_DIR (clang's, read through llvm-cov gcov), then the total; fails when the
# total line figure is under MIN percent.
# Usage: test/coverage.sh BUILD_DIR MIN
set -euo pipefail
build=${1:?usage: test/coverage.sh BUILD_DIR MIN}
min=${2:?usage: test/coverage.sh BUILD_DIR MIN}
cd "$(dirname "$0")/.."
command -v gcovr >/dev/null || { echo "coverage: gcovr is not installed (deploy/deps.sh test)"; exit 1; }
# The build is clang's: its notes need llvm-cov's gcov reader.
command -v llvm-cov >/dev/null || { echo "coverage: llvm-cov is not installed"; exit 1; }
gcov="llvm-cov gcov"
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
gcovr --gcov-executable "$gcov" -r . --filter 'internal/' --json-summary "$summary" "$build" \
	>/dev/null 2>&1 || { echo "coverage: gcovr failed on $build"; exit 1; }
python3 - "$summary" "$min" <<'EOF'
import collections, json, sys
data = json.load(open(sys.argv[1]))
minimum = float(sys.argv[2])
mods = collections.defaultdict(lambda: [0, 0, 0, 0])
for f in data["files"]:
    m = mods[f["filename"].split("/")[1]]
    m[0] += f["line_covered"]; m[1] += f["line_total"]
    m[2] += f["branch_covered"]; m[3] += f["branch_total"]
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
