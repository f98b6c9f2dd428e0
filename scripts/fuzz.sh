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
#
# Go 1.26's fuzzing coordinator can fail a target with a bare "context
# deadline exceeded" when the -fuzztime deadline races a worker that is
# still mid-input on a loaded machine (go.dev/issue/75804, fixed in Go
# 1.27). That failure writes no failing input. A target that fails that
# way, with no new input under its testdata/fuzz/, runs again (twice at
# most); any other failure, or one that leaves an input, fails at once.
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
# inputs DIR: how many inputs go test has kept in DIR.
inputs() {
	if [[ -d $1 ]]; then find "$1" -type f | wc -l; else echo 0; fi
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	if [[ -n ${FUZZ_ONLY:-} && ! $name =~ $FUZZ_ONLY ]]; then
		continue
	fi
	n=$((n + 1))
	corpus="$dir/testdata/fuzz/$name"
	for try in 1 2 3; do
		echo "== fuzz $name (./$dir, $FUZZTIME)"
		before=$(inputs "$corpus")
		set +e
		"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		set -e
		[[ $rc -eq 0 ]] && break
		after=$(inputs "$corpus")
		if [[ $try -lt 3 && $after -eq $before ]] &&
			grep -A1 -E "^--- FAIL: $name " "$log" | grep -qx '    context deadline exceeded'; then
			echo "fuzz: $name: the coordinator's deadline race (no failing input); again"
			continue
		fi
		echo "fuzz: $name failed" >&2
		exit "$rc"
	done
done
echo "fuzz: $n targets, $FUZZTIME each, no failures"
