#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a short, fixed budget each
# (make test does; docs/verify.md). A target is a `func FuzzX(f
# *testing.F)` in a _test.go file; go test fuzzes one target of one
# package per run, so each gets its own. Inputs that fail are kept by go
# test under the package's testdata/fuzz/FuzzX/ and replayed by every
# later plain `go test` run.
#
#   FUZZTIME   the budget of one target (default 5s; go test -fuzztime)
#   GO         the go command (default go)
#   FUZZ_ONLY  a regular expression: fuzz only the targets it matches
set -euo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}
cd "$(dirname "$0")/.."

mapfile -t targets < <(grep -rHo --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' internal cmd |
	sed -E 's#^([^:]*)/[^/]*:func (Fuzz[A-Za-z0-9_]+).*#\1 \2#' | sort -u)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
n=0
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	if [[ -n ${FUZZ_ONLY:-} && ! $name =~ $FUZZ_ONLY ]]; then
		continue
	fi
	n=$((n + 1))
	echo "== fuzz $name (./$dir, $FUZZTIME)"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir"
done
echo "fuzz: $n targets, $FUZZTIME each, no failures"
