#!/usr/bin/env bash
# test.sh sets the machine up (scripts/setup.sh) and runs the README's
# test command, go test -race -count=1 -timeout 30m ./..., or the packages
# given as arguments. .ci/run calls it for its test step.
#
#   sudo scripts/test.sh [packages]
set -euo pipefail
cd "$(dirname "$0")/.."
gobin=$(bash scripts/setup.sh)
[ $# -gt 0 ] || set -- ./...
exec "$gobin" test -race -count=1 -timeout 30m "$@"
