#!/bin/bash
# SPDX-License-Identifier: MIT
# Pool-level status in the journal: eb-brokerd's entries carry MESSAGE_ID= and the EB_POOL_*
# fields, journalctl can select on them, every message ID has a catalog entry (journalctl -x),
# and a donation shows up as a higher EB_POOL_BITS=.
# order: 20
# vm: shared
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

need usr/sbin/eb-brokerd lib/systemd/system/eb-brokerd.socket lib/systemd/system/eb-brokerd.service \
	-- "issue 'core slice' (broker and its units) not landed"
checks_done
ctl=$(program eb-brokerctl || true)
src=$(program eb-source-file || true)

diag 'systemctl status --no-pager eb-brokerd.service'
diag 'journalctl -b --no-pager -n 30 -u eb-brokerd.service -o verbose'

# Only entries from this scenario's broker instance count: they are selected by its invocation
# ID. (--after-cursor is no use: journalctl 252 combined with a MESSAGE_ID= match finds nothing.)
step "a fresh broker instance"
broker_test_config
guest 'systemctl stop eb-brokerd.service; systemctl reset-failed eb-brokerd.service 2>/dev/null; systemctl start eb-brokerd.socket eb-brokerd.service' >/dev/null
wait_guest 30 'systemctl is-active eb-brokerd.service' >/dev/null || fail "eb-brokerd.service did not start"
inv=$(guest 'systemctl show -P InvocationID eb-brokerd.service')
this="_SYSTEMD_INVOCATION_ID=$inv"

# This instance's journal entries with pool fields, as JSON lines.
entries() {
	vm_exec "journalctl $this -o json --no-pager |
		jq -c 'select(.EB_POOL_BITS != null) | {id: .MESSAGE_ID, bits: .EB_POOL_BITS, cap: .EB_POOL_CAPACITY_BITS, zone: .EB_POOL_ZONE, sources: .EB_SOURCES, sinks: .EB_SINKS, msg: .MESSAGE}'"
}

step "entries with EB_POOL_* fields and a MESSAGE_ID"
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 30 '[ -n "$(journalctl '"$this"' -o json --no-pager | jq -c "select(.EB_POOL_BITS != null)")" ]' ||
	fail "no journal entry of eb-brokerd.service carries EB_POOL_BITS= within 30 s"
out=$(entries) || fail "journalctl/jq failed: $out"
echo "$out"
bad=$(jq -r 'select((.id // "") | test("^[0-9a-f]{32}$") | not) | .msg' <<<"$out" | head -n 3)
[[ -z $bad ]] || fail "pool entries without a 128-bit MESSAGE_ID: $bad"
bad=$(jq -r 'select((.bits | test("^[0-9]+$")) and (.cap | test("^[0-9]+$")) | not) | .msg' <<<"$out" | head -n 3)
[[ -z $bad ]] || fail "EB_POOL_BITS/EB_POOL_CAPACITY_BITS not numbers in: $bad"
mapfile -t ids < <(jq -r .id <<<"$out" | sort -u)

step "journalctl selects on the fields"
first=$(jq -r 'select(.id != null) | .id' <<<"$out" | head -n 1)
n=$(guest "journalctl $this MESSAGE_ID=$first -o cat --no-pager | wc -l")
((n > 0)) || fail "journalctl MESSAGE_ID=$first finds nothing"
guest "journalctl $this -o verbose --no-pager --output-fields=MESSAGE_ID,EB_POOL_BITS,EB_POOL_CAPACITY_BITS,EB_POOL_ZONE -n 2"

step "every message ID has a catalog entry"
installed usr/lib/systemd/catalog/entropy-broker.catalog ||
	compgen -G "$EB_VM_DESTDIR/usr/lib/systemd/catalog/*.catalog" >/dev/null ||
	fail "no journal catalog installed under /usr/lib/systemd/catalog (message IDs: ${ids[*]})"
guest 'journalctl --update-catalog' >/dev/null
for id in "${ids[@]}"; do
	subject=$(guest "journalctl --list-catalog $id --no-pager" | cut -d' ' -f2-)
	[[ -n $subject ]] || fail "message ID $id has no catalog entry"
	guest "journalctl -x $this MESSAGE_ID=$id -n 1 --no-pager | grep -q 'Subject: '" >/dev/null ||
		fail "journalctl -x shows no explanation for $id"
	report "$id  $subject"
done

step "a donation raises EB_POOL_BITS"
if [[ -z $src || -z $ctl ]]; then
	echo "eb-source-file or eb-brokerctl not installed: donation check left out"
else
	before=$(guest "$ctl status --json" | jq -r '.pool_bits // .pool // empty')
	guest "head -c 8192 /dev/urandom | $src -b unix:/run/entropy-broker/broker.sock --credit-per-byte 4 -" ||
		fail "eb-source-file could not donate over unix:"
	# A zone crossing or the next periodic report (5 s) logs the new level.
	# shellcheck disable=SC2016 # expanded in the guest
	wait_guest 20 '[ "$(journalctl '"$this"' -o json --no-pager | jq -r "select(.EB_POOL_BITS != null) | .EB_POOL_BITS" | sort -n | tail -n 1)" -gt '"${before:-0}"' ]' ||
		fail "no journal entry shows EB_POOL_BITS above ${before:-0} after donating 8192 bytes"
	entries | tail -n 3
	report "pool level: ${before:-0} bits before, $(entries | jq -r .bits | sort -n | tail -n 1) after a donation (journal)"
fi
