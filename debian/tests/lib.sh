# SPDX-License-Identifier: MIT
# shellcheck shell=sh
# What the tests share: a bounded wait, the pool's level, a source to fill it.
set -eu
exec 2>&1

fail() {
	echo "FAIL: $*"
	exit 1
}

# wait_for SECONDS COMMAND...: runs COMMAND every half second until it succeeds.
wait_for() {
	n=$(($1 * 2))
	shift
	while [ "$n" -gt 0 ]; do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
		n=$((n - 1))
	done
	return 1
}

pool_bits() {
	eb-brokerctl status --json | jq -e .pool_bits
}

pool_at_least() {
	[ "$(pool_bits)" -ge "$1" ]
}

# The packaged CPU jitter source fills the pool (1 bit per sample, as its man page states).
fill_pool() {
	systemctl start eb-source-jitter.service
	wait_for 180 pool_at_least "$1" ||
		fail "the pool did not reach $1 bits within 180 s with eb-source-jitter running ($(pool_bits) bits)"
	echo "pool: $(pool_bits) bits"
}
