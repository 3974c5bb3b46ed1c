#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""srv:NAME broker addresses against a real DNS server. The test runs itself in a network and
mount namespace of its own (unshare), where Debian's dnsmasq serves the zone fleet.test on
127.0.0.1:53 and a private /etc/resolv.conf (bind-mounted, seen only in that namespace) points
the clients at it; the host's resolver is never touched. Three brokers listen on 127.0.0.1, each
on its own port, named b1, b2, b3.fleet.test; the SRV records of _entropy-broker._tcp.fleet.test
say which to use:
- a sink with srv:fleet.test draws from the priority-0 broker;
- eb-brokerctl with srv: works, and so does a broker's [upstream] with srv:;
- the priority-0 broker killed, the sink fails over to the next;
- the records changed while a sink runs (dnsmasq restarted with new ones): the sink follows them
  after their TTL;
- a name with no records: one line naming the address, the name asked for and NXDOMAIN."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from eblib import SKIP, Broker, check, main, need, need_root, prog, run, wait_for

INNER = "EB_TEST_SRV_INNER"
TTL = 5
QNAME = "_entropy-broker._tcp.fleet.test"


class Dns:
    """dnsmasq answering for fleet.test (and NXDOMAIN for the rest of .test) on 127.0.0.1:53."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.proc = None
        self.log = os.path.join(tmp, "dnsmasq.log")

    def start(self, srv, hosts):
        """srv: [(priority, weight, target, port)]; hosts: the names that are 127.0.0.1."""
        cmd = ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
               "--no-hosts", "--no-poll", "--listen-address=127.0.0.1", "--bind-interfaces",
               "--port=53", "--local=/test/", f"--local-ttl={TTL}", "--user=root",
               f"--pid-file={os.path.join(self.tmp, 'dnsmasq.pid')}", "--log-facility=-",
               "--log-queries"]
        cmd += [f"--srv-host={QNAME},{t},{port},{prio},{weight}" for prio, weight, t, port in srv]
        cmd += [f"--host-record={h},127.0.0.1" for h in hosts]
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf)
        wait_for("dnsmasq answers", lambda: run(["getent", "hosts", hosts[0]]).returncode == 0,
                 timeout=20, detail=lambda: open(self.log, errors="replace").read()[-500:])

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


def sink(key, n, broker="srv:fleet.test", extra=()):
    return run([prog("eb-sink-file"), "-v", "-b", broker, "-u", "sink", "-k", key, "--bytes",
                str(n), "-o", "/dev/null", "--timeout", "60", *extra], timeout=90)


def served_by(p):
    """The broker an eb-sink-file -v run says it drew from."""
    err = p.stderr.decode(errors="replace")
    return [l.split("Drawing from ", 1)[1] for l in err.splitlines() if "Drawing from " in l]


def inner():
    tmp = tempfile.mkdtemp(prefix="eb-srv-")
    dns = Dns(tmp)
    brokers, follower = [], None
    try:
        run(["ip", "link", "set", "lo", "up"], check=True)
        # The clients' resolver: this namespace's dnsmasq, through a resolv.conf (and an
        # nsswitch.conf with no other source of names) seen in this mount namespace only.
        with open(os.path.join(tmp, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:2 attempts:2\n")
        with open(os.path.join(tmp, "nsswitch.conf"), "w") as f:
            f.write("hosts: files dns\n")
        for name in ("resolv.conf", "nsswitch.conf"):
            run(["mount", "--bind", os.path.join(tmp, name), f"/etc/{name}"], check=True)

        users = {"sink": {"role": "sink"}, "src": {"role": "source"}, "admin": {"role": "admin"},
                 "edge": {"role": "sink", "downstream-broker": "yes"}}
        keys = None
        for _ in range(3):
            b = Broker(users, keys=keys).start()
            keys = keys or b.keys
            brokers.append(b)
        b1, b2, b3 = brokers
        data = os.path.join(tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(64 * 1024))
        for b in brokers:
            p = run([prog("eb-source-file"), "-b", b.tcp, "-u", "src", "-k", keys["src"],
                     "--credit-per-byte=8", "--max-credit-per-byte=8", data])
            check(p.returncode == 0, f"a source fills broker {b.port}: {p.stderr[-300:]}")

        name = lambda i: f"b{i}.fleet.test"
        dns.start([(0, 10, name(1), b1.port), (1, 10, name(2), b2.port)],
                  [name(1), name(2), name(3)])

        p = sink(keys["sink"], 4096)
        check(p.returncode == 0, f"a sink with srv:fleet.test draws: {p.stderr[-500:]}")
        check(served_by(p) == [f"srv:fleet.test ({name(1)}:{b1.port})"],
              f"from the priority-0 broker: {served_by(p)}")

        p = run([prog("eb-brokerctl"), "-b", "srv:fleet.test", "-u", "admin", "-k",
                 keys["admin"], "status"])
        check(p.returncode == 0 and b"pool" in p.stdout.lower(),
              f"eb-brokerctl -b srv:fleet.test status works: {p.stdout[-300:]} {p.stderr[-300:]}")

        # [upstream] with srv:.
        d = Broker({"admin": {"role": "admin"}}, capacity=65536, broker_extra=f"""
[upstream]
broker = srv:fleet.test
user = edge
key-file = {keys['edge']}
""")
        brokers.append(d)
        d.start()
        d.status()  # the first connection starts it (socket activation)
        check(d.wait_log(f"Drawing from upstream srv:fleet.test ({name(1)}:{b1.port})", 30),
              "a broker's [upstream] with srv: draws from the priority-0 broker:\n" +
              d.read_log()[-800:])
        d.cleanup()
        brokers.remove(d)

        # The priority-0 broker killed: the next in the records serves.
        b1.stop(signal.SIGKILL)
        p = sink(keys["sink"], 4096)
        check(p.returncode == 0, f"with b1 killed the sink still draws: {p.stderr[-500:]}")
        check(served_by(p) == [f"srv:fleet.test ({name(2)}:{b2.port})"],
              f"from the priority-1 broker: {served_by(p)}")

        # A sink that keeps drawing, on b2; then the records change to put b3 first and drop
        # b1: after the TTL the sink leaves b2 for b3.
        flog = open(os.path.join(tmp, "follower.log"), "wb")
        follower = subprocess.Popen(
            [prog("eb-sink-file"), "-v", "-b", "srv:fleet.test", "-u", "sink", "-k",
             keys["sink"], "--bytes", str(1 << 40), "-o", "/dev/null", "--timeout", "300"],
            stdout=flog, stderr=flog)
        flog_text = lambda: open(os.path.join(tmp, "follower.log"), errors="replace").read()
        wait_for("the long-running sink draws from b2",
                 lambda: f"Drawing from srv:fleet.test ({name(2)}:{b2.port})" in flog_text(),
                 timeout=60, detail=lambda: flog_text()[-800:])
        dns.stop()
        changed = time.monotonic()
        dns.start([(0, 10, name(3), b3.port), (1, 10, name(2), b2.port)],
                  [name(1), name(2), name(3)])
        wait_for("the sink follows the changed records to b3",
                 lambda: f"Drawing from srv:fleet.test ({name(3)}:{b3.port})" in flog_text(),
                 timeout=60, detail=lambda: flog_text()[-800:])
        took = time.monotonic() - changed
        print(f"# the sink followed the new records after {took:.1f} s (TTL {TTL} s)")
        check("the SRV records changed" in flog_text(),
              "and says why it left b2:\n" + flog_text()[-500:])
        follower.kill()
        follower.wait()
        follower = None

        # A name with no records: the line an administrator reads.
        p = sink(keys["sink"], 64, broker="srv:nothing.test", extra=("--timeout", "3"))
        err = p.stderr.decode(errors="replace")
        want = f"srv:nothing.test: no SRV records for _entropy-broker._tcp.nothing.test (NXDOMAIN)"
        check(p.returncode != 0 and want in err and "tcp://HOST[:PORT]" in err,
              f"a name without records is said as such, with what to do:\n{err[-600:]}")
        print("# " + next(l for l in err.splitlines() if want in l))
    finally:
        if follower:
            follower.kill()
            follower.wait()
        dns.stop()
        for b in brokers:
            b.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def test():
    if os.environ.get(INNER):
        inner()
        return
    need("dnsmasq")
    need("unshare")
    need("ip")
    need_root("for a network and mount namespace (unshare --net --mount)")
    if run(["unshare", "--net", "--mount", "true"]).returncode != 0:
        print("SKIP: cannot make a network namespace (unshare --net --mount)")
        sys.exit(SKIP)
    # The same test, inside the namespaces; its output is this test's.
    p = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private",
                        sys.executable, os.path.abspath(__file__)],
                       env=dict(os.environ, **{INNER: "1"}), timeout=400)
    sys.exit(p.returncode)


if __name__ == "__main__":
    main(test)
