# SPDX-License-Identifier: MIT
"""Network namespaces joined by veth pairs, for tests that need more than one host on this
machine (tests/fleet/): each namespace is a host with lo up, each veth pair a cable with an
address at both ends. Named namespaces (ip netns) so that any command can run in one with
`ip netns exec`, which also gives it /etc/netns/NAME/resolv.conf as its /etc/resolv.conf.
Names carry the test's pid: tests run side by side."""

import os
import shutil
import subprocess
import sys

from eblib import SKIP, Failure

_made = []


def _ip(*args, check=True):
    p = subprocess.run(["ip", *args], capture_output=True, timeout=30)
    if check and p.returncode != 0:
        raise Failure(f"ip {' '.join(args)} exited {p.returncode}: "
                      f"{p.stderr.decode(errors='replace').strip()}")
    return p


def need_netns():
    """Skips the test (exit 77, saying why) where network namespaces and veth pairs cannot be
    made: not root, no ip, or a kernel or container that refuses them."""
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces (ip netns add)")
        sys.exit(SKIP)
    if shutil.which("ip") is None:
        print("SKIP: needs ip (iproute2)")
        sys.exit(SKIP)
    name = f"eb-probe-{os.getpid()}"
    p = _ip("netns", "add", name, check=False)
    if p.returncode != 0:
        print(f"SKIP: cannot make a network namespace: {p.stderr.decode(errors='replace').strip()}")
        sys.exit(SKIP)
    try:
        p = _ip("-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1",
                check=False)
        if p.returncode != 0:
            print(f"SKIP: cannot make a veth pair: {p.stderr.decode(errors='replace').strip()}")
            sys.exit(SKIP)
    finally:
        _ip("netns", "del", name, check=False)


class Netns:
    """A named network namespace with lo up; .cmd(argv) is argv run inside it."""

    def __init__(self, tag):
        self.name = f"eb-{tag}-{os.getpid()}"
        _ip("netns", "add", self.name)
        _made.append(self)
        _ip("-n", self.name, "link", "set", "lo", "up")
        self.etc = os.path.join("/etc/netns", self.name)

    def cmd(self, argv):
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv, timeout=60, check=False):
        p = subprocess.run(self.cmd(argv), capture_output=True, timeout=timeout)
        if check and p.returncode != 0:
            raise Failure(f"{' '.join(argv)} in {self.name} exited {p.returncode}: "
                          f"{p.stderr.decode(errors='replace').strip()}")
        return p

    def resolver(self, address):
        """Commands run in this namespace resolve names through the DNS server at address."""
        os.makedirs(self.etc, exist_ok=True)
        with open(os.path.join(self.etc, "resolv.conf"), "w") as f:
            f.write(f"nameserver {address}\noptions timeout:2 attempts:3\n")

    def delete(self):
        _ip("netns", "del", self.name, check=False)
        shutil.rmtree(self.etc, ignore_errors=True)


_n_links = 0


def link(a, a_addr, b, b_addr, prefix=24):
    """A veth pair between namespaces a and b, up, with a_addr at a's end and b_addr (one address
    or a list: a host with several) at b's. Returns the two interface names."""
    global _n_links
    _n_links += 1
    # Interface names are at most 15 bytes, and live in the namespace they are made in.
    ea, eb = f"v{os.getpid() % 100000}a{_n_links}", f"v{os.getpid() % 100000}b{_n_links}"
    _ip("-n", a.name, "link", "add", ea, "type", "veth", "peer", "name", eb, "netns", b.name)
    _ip("-n", a.name, "addr", "add", f"{a_addr}/{prefix}", "dev", ea)
    for addr in [b_addr] if isinstance(b_addr, str) else b_addr:
        _ip("-n", b.name, "addr", "add", f"{addr}/{prefix}", "dev", eb)
    _ip("-n", a.name, "link", "set", ea, "up")
    _ip("-n", b.name, "link", "set", eb, "up")
    return ea, eb


def route(ns, dest, via):
    """In namespace ns, packets for dest (a prefix) go through the router at via."""
    _ip("-n", ns.name, "route", "add", dest, "via", via)


def forward(ns):
    """Namespace ns routes between its links."""
    p = ns.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
    if p.returncode != 0:
        raise Failure(f"cannot turn on forwarding in {ns.name}: "
                      f"{p.stderr.decode(errors='replace').strip()}")


def cleanup():
    """Deletes every namespace made here (their veth pairs go with them)."""
    while _made:
        _made.pop().delete()
