#!/usr/bin/env bash
# lab.sh sets the machine up (scripts/setup.sh) and runs the virtual lab
# (cmd/gvlab), which builds cmd/gvrouter and proves it in network
# namespaces; arguments go to gvlab (e.g. -keep, -topology bcm47094).
#
#   sudo scripts/lab.sh [-keep] [gvlab flags]
set -euo pipefail
cd "$(dirname "$0")/.."
gobin=$(bash scripts/setup.sh)
exec "$gobin" run ./cmd/gvlab "$@"
