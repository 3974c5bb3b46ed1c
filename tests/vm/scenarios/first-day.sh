#!/bin/bash
# SPDX-License-Identifier: MIT
# An administrator's first day, on a fresh guest, step by step as README's "Using it" and
# entropy-broker(7) tell it: install the .debs; `eb-brokerctl status` as root works with no file
# edited; nothing listens on TCP; `systemctl enable eb-brokerd-tcp.socket` and a restart of the
# broker open port 55225; a remote user made with eb-keygen and a [user] section is served over
# TCP after `systemctl reload`; a typo then makes `systemctl reload` fail and `systemctl status`
# say so while the clients already connected stay served; a client given a wrong host or a wrong
# port says so, naming the broker, within a few seconds; and an [upstream] section makes the
# packaged broker draw from a second broker over TCP, once the drop-in that the broker names gives
# it the network. Also: the packages' postinst re-announces an RNG plugged in before them (the
# virtio-rng here is there from boot), and eb-brokerd-virtio.socket activates the broker for a
# unix+tls client with a key.
# order: 91
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

top=$(cd "$EB_VM_LIB/../../.." && pwd)
base=$(dirname "$EB_VM_KERNEL")/rootfs
[[ -f $top/debian/control ]] || skip "no debian/ packaging in this tree"
[[ -x $base/usr/bin/apt ]] || skip "the base image has no apt (tests/vm/image/build-image.sh)"
if [[ -z ${EB_VM_DEBS:-} ]] && ! { command -v dpkg-buildpackage && command -v dh; } >/dev/null; then
	skip "dpkg-dev or debhelper missing (scripts/install-deps --test)"
fi
if [[ -n ${EB_VM_DEBS:-} ]]; then
	listing=$(dpkg-deb -c "$EB_VM_DEBS"/entropy-broker_*.deb 2>/dev/null || true)
	grep -q '/eb-brokerd-tcp\.socket$' <<<"$listing" || skip "the packages in $EB_VM_DEBS have no eb-brokerd-tcp.socket"
else
	[[ -f $top/units/eb-brokerd-tcp.socket ]] || skip "units/eb-brokerd-tcp.socket not in this tree"
fi
checks_done

d=$EB_VM_SCENARIO_DIR
conf=/etc/entropy-broker/eb-brokerd.conf

step "the packages"
t0=$(eb_now)
if [[ -n ${EB_VM_DEBS:-} ]]; then
	debs=$EB_VM_DEBS
else
	"$top/scripts/build-debs" "$d/debs" || fail "scripts/build-debs failed (see $d/debs/build.log)"
	debs=$d/debs
	report "packages built by scripts/build-debs in $(eb_elapsed "$t0") s"
fi
mkdir -p "$d/vm/share"
find "$debs" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' -exec cp -t "$d/vm/share/" {} +
compgen -G "$d/vm/share/entropy-broker_*.deb" >/dev/null || fail "no entropy-broker_*.deb in $debs"

step "a fresh guest, a virtio-rng plugged in from boot (before the packages)"
t0=$(eb_now)
truncate -s 1G "$d/fresh.img"
mke2fs -q -t ext4 -d "$base" -F "$d/fresh.img" || fail "mke2fs of the base image failed"
export EB_VM_ROOTIMG=$d/fresh.img
own_vm "$d/vm" -- -device virtio-rng-pci,rng=rng0
report "fresh guest up in $(eb_elapsed "$t0") s"
diag 'systemctl list-units --all --no-pager "eb-*"'
diag 'journalctl -b --no-pager -n 120 -u eb-brokerd.service -u eb-brokerd-tcp.socket -u "eb-source-stream@*"'
diag 'ss -Htlnp'
vm_exec 'command -v eb-brokerd' >/dev/null 2>&1 && fail "the fresh guest already has the project"
listening_before=$(guest 'ss -Htln | awk "{ print \$4 }" | sort')

cleanup() {
	vm_exec -t 20 'systemctl stop eb-test-old-client.service eb-test-upstream.service 2>/dev/null; true' >/dev/null 2>&1 || true
}
trap 'cleanup; _eb_scenario_exit; _eb_host_exit' EXIT

step "apt install ./*.deb"
t0=$(eb_now)
out=$(vm_exec -t 600 'cd /mnt/host && DEBIAN_FRONTEND=noninteractive apt install -y ./*.deb' 2>&1) ||
	fail "apt install failed in the guest: $(tail -n 5 <<<"$out" | tr '\n' ' ')"
report "apt install ./*.deb: $(eb_elapsed "$t0") s"

step "the RNG plugged in before the packages: the postinst announced it again"
wait_guest 90 'systemctl is-active --quiet eb-source-stream@hwrng.service' ||
	fail "eb-source-stream@hwrng.service did not start for the virtio-rng there before the packages"
report "postinst: the RNG plugged in before install started eb-source-stream@hwrng.service"

step "eb-brokerctl status, as root, with no file edited"
out=$(vm_exec -t 60 'eb-brokerctl status' 2>&1) || fail "eb-brokerctl status as root failed: $out"
printf '%s\n' "$out"
grep -qi 'pool' <<<"$out" || fail "eb-brokerctl status printed no pool level: $out"
vm_exec "test ! -e $conf" >/dev/null || fail "$conf exists: something edited it"
report "eb-brokerctl status as root: $(grep -i -m1 pool <<<"$out")"

step "nothing listens on TCP that did not before"
listening=$(guest 'ss -Htln | awk "{ print \$4 }" | sort')
[[ $listening == "$listening_before" ]] ||
	fail "the packages opened TCP listeners: $(comm -13 <(echo "$listening_before") <(echo "$listening") | tr '\n' ' ')"
report "ss -tln: no new TCP listener (${listening:-none})"

step "systemctl enable eb-brokerd-tcp.socket; systemctl restart eb-brokerd.service (README)"
guest 'systemctl enable eb-brokerd-tcp.socket && systemctl restart eb-brokerd.service' >/dev/null
wait_guest 30 'ss -Htln | grep -q ":55225 "' || fail "nothing listens on port 55225 after enabling eb-brokerd-tcp.socket"
report "eb-brokerd-tcp.socket: $(guest 'ss -Htln | awk "/:55225 / { print \$4 }" | paste -sd" "')"

step "a remote user: eb-keygen, a [user] section, systemctl reload"
# The "remote machine" is the guest itself: its copy of the key is root's, 0600.
guest "set -e
	eb-keygen --owner root --group entropy-broker /etc/entropy-broker/keys/alice.key
	install -m 0600 /etc/entropy-broker/keys/alice.key /root/alice.key
	printf '[user alice]\\nrole = source, sink\\nkey-file = /etc/entropy-broker/keys/alice.key\\n' >>$conf" >/dev/null
out=$(vm_exec -t 90 'systemctl reload eb-brokerd.service' 2>&1) || fail "systemctl reload failed with a good file: $out"
tcp=(-b tcp://127.0.0.1:55225 -u alice -k /root/alice.key)
out=$(vm_exec -t 90 "head -c 8192 /dev/urandom | eb-source-file ${tcp[*]} --credit-per-byte 8 - &&
	eb-sink-file ${tcp[*]} --bytes 32 --timeout 30 -o /tmp/alice.bin && stat -c %s /tmp/alice.bin" 2>&1) ||
	fail "alice could not donate and draw over TCP after the reload: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
[[ $(tail -n 1 <<<"$out") == 32 ]] || fail "alice drew $(tail -n 1 <<<"$out") bytes, not 32"
report "alice (eb-keygen, [user alice], systemctl reload) donated 8192 bytes and drew 32 over TCP"

step "a typo: systemctl reload fails, systemctl status says so, old clients stay served"
guest "systemd-run --unit=eb-test-old-client eb-source-kernel ${tcp[*]}" >/dev/null
wait_guest 60 'eb-brokerctl sources | grep -q alice' || fail "the old client (eb-source-kernel as alice) did not connect"
guest "printf '\\n[user bob]\\nrle = sink\\n' >>$conf" >/dev/null
if out=$(vm_exec -t 90 'systemctl reload eb-brokerd.service' 2>&1); then
	fail "systemctl reload succeeded with a typo in $conf"
fi
status=$(vm_exec 'systemctl status --no-pager eb-brokerd.service' || true)
printf '%s\n' "$status"
grep -q 'active (running)' <<<"$status" || fail "eb-brokerd.service is not running after the failed reload"
# ExecReload='s --check-config refuses the file before the broker sees it: systemd's "Reload
# failed" and the checker's FILE:LINE are in the status's journal lines (a reload that the broker
# itself refuses puts "Reload failed: FILE:LINE" in STATUS=).
grep -qi 'reload failed' <<<"$status" || fail "systemctl status does not say the reload failed"
grep -q 'eb-brokerd\.conf:[0-9]' <<<"$status" || fail "systemctl status does not say where the error is (FILE:LINE)"
grep -q 'rle' <<<"$(guest 'journalctl -b --no-pager -u eb-brokerd.service -n 30')" ||
	fail "the journal does not name the typo"
vm_exec 'systemctl is-active --quiet eb-test-old-client.service' || fail "the old client stopped after the failed reload"
wait_guest 30 'eb-brokerctl sources | grep -q alice' || fail "the old client's session is gone after the failed reload"
out=$(vm_exec -t 60 "eb-sink-file ${tcp[*]} --bytes 32 --timeout 30 -o /tmp/alice2.bin" 2>&1) ||
	fail "alice is no longer served after the failed reload: $out"
report "typo: systemctl reload failed; status: $(grep -m1 'eb-brokerd\.conf:[0-9]' <<<"$status" | sed 's/^ *//' | cut -c1-150); alice still served"
guest "sed -i '/^\\[user bob\\]/,\$d' $conf && systemctl reload eb-brokerd.service" >/dev/null ||
	fail "systemctl reload failed once the typo was gone"

step "a client pointed the wrong way says so within a few seconds"
for wrong in tcp://broker.invalid:55225 tcp://127.0.0.1:55299; do
	t0=$(eb_now)
	out=$(vm_exec -t 30 "timeout 6 eb-sink-file -b $wrong -u alice -k /root/alice.key --bytes 32 -o /dev/null 2>&1; true")
	printf '%s\n' "$out"
	# Naming the broker: the host that does not resolve, or the address that refused.
	needle=${wrong#tcp://}
	[[ $wrong == *invalid* ]] && needle=${needle%%:*}
	line=$(grep -m1 -F "$needle" <<<"$out") || fail "eb-sink-file -b $wrong said nothing naming the broker within 6 s"
	case $wrong in
	*invalid*) grep -qiE 'resol|name|not known|DNS' <<<"$line" || fail "the line for a wrong host does not say the name did not resolve: $line" ;;
	*) grep -qi 'refused' <<<"$line" || fail "the line for a wrong port does not say the connection was refused: $line" ;;
	esac
	report "wrong ${wrong%%:[0-9]*}: $line"
done

step "[upstream]: the packaged broker draws from a second broker over TCP"
# The second broker, as a central one on another port: alice may draw from it as a downstream
# broker (eb-brokerd.conf(5): downstream-broker=), and it is full.
guest "set -e
	mkdir -p /etc/eb-central
	install -m 0600 /etc/entropy-broker/keys/alice.key /etc/eb-central/alice.key
	printf '[broker]\\nseed-file = /var/tmp/eb-central.seed\\n[user alice]\\nrole = sink\\ndownstream-broker = yes\\nkey-file = /etc/eb-central/alice.key\\n[user root]\\nrole = source, admin\\nunix-uid = 0\\n' >/etc/eb-central/eb-brokerd.conf
	systemd-run --unit=eb-test-upstream /usr/sbin/eb-brokerd -c /etc/eb-central/eb-brokerd.conf -l tcp://127.0.0.1:55300 -l unix:/run/eb-central.sock" >/dev/null
wait_guest 30 'test -S /run/eb-central.sock' || fail "the second broker did not start"
guest 'head -c 65536 /dev/urandom | eb-source-file -b unix:/run/eb-central.sock --credit-per-byte 8 -' >/dev/null
guest "systemctl stop eb-test-old-client.service
	printf '[upstream]\\nbroker = tcp://127.0.0.1:55300\\nuser = alice\\nkey-file = /etc/entropy-broker/keys/alice.key\\n' >>$conf
	systemctl restart eb-brokerd.service" >/dev/null
# Under the shipped service (PrivateNetwork=yes) the broker says what to do, in one line: the
# drop-in from eb-brokerd.conf(5).
wait_guest 60 'journalctl -b --no-pager -u eb-brokerd.service | grep -q eb-brokerd-upstream.conf' ||
	fail "with a tcp:// [upstream] and no network, the broker did not name the drop-in that gives it one"
report "upstream without the drop-in: $(guest 'journalctl -b --no-pager -o cat -u eb-brokerd.service | grep -m1 eb-brokerd-upstream.conf' | cut -c1-160)"
# eb-brokerd.conf(5)'s "systemctl edit eb-brokerd.service" with its [Service] lines (the test image
# installs no /usr/share/doc, where the example file is).
guest "set -e
	mkdir -p /etc/systemd/system/eb-brokerd.service.d
	printf '[Service]\\nPrivateNetwork=no\\n' >/etc/systemd/system/eb-brokerd.service.d/override.conf
	systemctl daemon-reload
	systemctl restart eb-brokerd.service" >/dev/null
# shellcheck disable=SC2016 # expanded in the guest
wait_guest 90 'eb-brokerctl -b unix:/run/eb-central.sock status --json | jq -e ".bits_out > 0"' ||
	fail "with the drop-in, the packaged broker drew nothing from its upstream over TCP within 90 s: $(guest 'journalctl -b --no-pager -u eb-brokerd.service | grep -i upstream | tail -n 3' | tr '\n' ' ')"
report "upstream with the drop-in: $(guest 'eb-brokerctl -b unix:/run/eb-central.sock status' | grep -E '^Out:')"

step "eb-brokerd-virtio.socket activates the broker for a unix+tls client"
guest 'systemctl stop eb-brokerd.service eb-brokerd.socket eb-brokerd-tcp.socket
	systemctl start eb-brokerd-virtio.socket eb-brokerd.socket' >/dev/null
vm_exec 'systemctl is-active --quiet eb-brokerd.service' && fail "eb-brokerd.service runs before any client connected"
out=$(vm_exec -t 90 'eb-sink-file -b unix+tls:/run/entropy-broker/virtio.sock -u alice -k /root/alice.key --bytes 32 --timeout 60 -o /tmp/virtio.bin && stat -c %s /tmp/virtio.bin' 2>&1) ||
	fail "a unix+tls client on eb-brokerd-virtio.socket was not served: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
vm_exec 'systemctl is-active --quiet eb-brokerd.service' || fail "eb-brokerd.service is not running after the virtio socket's client"
report "eb-brokerd-virtio.socket: a unix+tls client activated eb-brokerd.service and drew 32 bytes"
