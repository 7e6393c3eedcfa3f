#!/usr/bin/env bash
# link-latency.sh: the median time from a carrier change on a veth to the
# router port's link handler (the netlink RTNLGRP_LINK subscription in
# hw/link_linux.go), over FLAPS down/up flaps (default 50). Needs root;
# everything happens in a network namespace the test makes and removes.
#   scripts/link-latency.sh [FLAPS]
set -euo pipefail
cd "$(dirname "$0")/.."
flaps=${1:-50}
GVROUTER_LINK_FLAPS=$flaps go test -count=1 -run '^TestLinkEventLatency$' ./hw/ -v |
	grep -E '^link event latency|^(--- )?FAIL|^ok'
