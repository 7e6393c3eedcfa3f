#!/usr/bin/env bash
# test.sh sets the machine up (scripts/setup.sh) and runs the README's
# test command, go test -race -count=1 -timeout 60m ./..., or the packages
# given as arguments. Its output is go test's (each package's ok or FAIL
# line, the failed tests' output: scripts/testreport reads go test -json
# as it comes), then the ten slowest tests. It exits with go test's
# status. .ci/run calls it for its test step.
#
#   sudo scripts/test.sh [packages]
set -euo pipefail
cd "$(dirname "$0")/.."
gobin=$(bash scripts/setup.sh)
[ $# -gt 0 ] || set -- ./...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gobin" build -o "$tmp/testreport" ./scripts/testreport
set +e
"$gobin" test -race -count=1 -timeout 60m -json "$@" | "$tmp/testreport"
status=${PIPESTATUS[0]} report=${PIPESTATUS[1]}
set -e
# go test's status decides; the report's only if go test passed and the
# report found a failure all the same (or could not read the stream).
[ "$status" -ne 0 ] && exit "$status"
exit "$report"
