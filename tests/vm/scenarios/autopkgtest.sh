#!/bin/bash
# SPDX-License-Identifier: MIT
# Debian's autopkgtest on the built packages, run by autopkgtest itself: its ssh runner installs
# the .debs and runs every test of debian/tests/control in a fresh guest (the base image, nothing
# of the project in it, systemd as PID 1), reached over user-mode networking with no route out
# (restrict=on; only the forwarded ssh port). The setup script (tests/vm/lib/autopkgtest-ssh-setup)
# declares the guest a machine of its own, as the tests that feed its kernel need. Anything but
# "every test passed" fails the scenario: a skipped test (autopkgtest's exit 2) and no tests at
# all (8) included.
# order: 92
# vm: own
set -euo pipefail
# shellcheck source=../lib/scenario.sh
source "$EB_VM_LIB/scenario.sh"

top=$(cd "$EB_VM_LIB/../../.." && pwd)
base=$(dirname "$EB_VM_KERNEL")/rootfs
[[ -f $top/debian/tests/control ]] || skip "no debian/tests/control in this tree"
[[ -x $base/usr/sbin/sshd ]] || skip "the base image has no sshd (tests/vm/image/build-image.sh)"
command -v autopkgtest >/dev/null && command -v ssh >/dev/null ||
	skip "autopkgtest or ssh missing on the host (scripts/install-deps --test)"
if [[ -z ${EB_VM_DEBS:-} ]]; then
	command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null ||
		skip "dpkg-dev or debhelper missing (scripts/install-deps --test)"
fi
checks_done

d=$EB_VM_SCENARIO_DIR
step "the packages"
if [[ -n ${EB_VM_DEBS:-} ]]; then
	debs=$EB_VM_DEBS
	report "packages from $debs (built by scripts/test)"
else
	t=$(eb_now)
	"$top/scripts/build-debs" "$d/debs" || fail "scripts/build-debs failed (see $d/debs/build.log)"
	debs=$d/debs
	report "packages built by scripts/build-debs in $(eb_elapsed "$t") s"
fi
mapfile -t packages < <(find "$debs" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' | sort)
((${#packages[@]} == 5)) || fail "expected the 5 packages in $debs, found ${#packages[@]}"
# The source tree autopkgtest reads debian/tests from: the tracked files, as a clean clone has them.
rm -rf "$d/src"
mkdir -p "$d/src"
git -C "$top" ls-files -z | (cd "$top" && xargs -0 cp --parents -a -t "$d/src")
# The tree the packages were built from, so a built tree (autopkgtest tells one by its
# debian/files): the tests need nothing built, and the testbed no dpkg-dev to unpack a source.
for p in "${packages[@]}"; do
	printf '%s %s %s\n' "$(basename "$p")" "$(dpkg-deb -f "$p" Section)" "$(dpkg-deb -f "$p" Priority)"
done >"$d/src/debian/files"

step "a fresh guest with sshd on a forwarded port"
t=$(eb_now)
rm -f "$d/id" "$d/id.pub"
ssh-keygen -q -t ed25519 -N '' -C eb-autopkgtest -f "$d/id"
port=$((20000 + RANDOM % 20000))
truncate -s 1G "$d/fresh.img"
mke2fs -q -t ext4 -d "$base" -F "$d/fresh.img" || fail "mke2fs of the base image failed"
EB_VM_ROOTIMG=$d/fresh.img own_vm "$d/vm" --append "systemd.wants=systemd-networkd.service" \
	-- -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
	-device virtio-net-pci,netdev=n0
diag 'systemctl status --no-pager ssh.service systemd-networkd.service; ip addr'
diag 'journalctl -b --no-pager -n 100 -u "eb-*"'
# The guest's APT has no network: what the tests depend on is in the image, and the packages
# come from autopkgtest's own local repository.
guest "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*; install -d -m 0700 /root/.ssh &&
	printf '%s\n' '$(cat "$d/id.pub")' >/root/.ssh/authorized_keys && systemctl start ssh.service" ||
	fail "could not start sshd in the guest"
wait_guest 60 'networkctl status 2>/dev/null | grep -q "10\.0\.2\.15"' ||
	fail "the guest's user-mode network did not come up within 60 s"
for ((i = 0; i < 60; i++)); do
	ssh -q -p "$port" -i "$d/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o BatchMode=yes -o ConnectTimeout=5 root@127.0.0.1 true && break
	sleep 1
done
((i < 60)) || fail "no ssh login to the guest on port $port within 60 s"
report "guest up with sshd in $(eb_elapsed "$t") s"

step "autopkgtest $(dpkg-query -W -f '${Version}' autopkgtest) -- ssh"
t=$(eb_now)
rm -rf "$d/out"
rc=0
EB_AUTOPKGTEST_PORT=$port EB_AUTOPKGTEST_IDENTITY=$d/id \
	timeout 1500 autopkgtest --output-dir "$d/out" "${packages[@]}" "$d/src/" -- \
	ssh -s "$EB_VM_LIB/autopkgtest-ssh-setup" || rc=$?
report "autopkgtest exited $rc in $(eb_elapsed "$t") s:"
[[ -f $d/out/summary ]] && report "$(cat "$d/out/summary")"
case $rc in
0) ;;
2) fail "autopkgtest skipped a test (exit 2): every test of debian/tests/control must run here" ;;
8) fail "autopkgtest found no tests to run (exit 8)" ;;
*) fail "autopkgtest failed (exit $rc; logs in $d/out)" ;;
esac
want=$(grep -E '^Tests:' "$top/debian/tests/control" | sed 's/^Tests://; s/,/ /g' | wc -w)
got=$(grep -cE ' PASS$' "$d/out/summary")
((got == want)) || fail "$got of the $want tests of debian/tests/control passed"
report "autopkgtest: all $want tests of debian/tests/control passed"
