#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""[upstream] over TCP under the shipped eb-brokerd.service, whose PrivateNetwork=yes leaves the
broker a network namespace with nothing but lo. The broker runs as systemd would run it there:
socket-activated (the sockets made outside, in this machine's namespace), under `unshare -n`.
Clients are still served through the passed-in TCP socket; the draw from a TCP upstream cannot
work, and the broker says why and what to do in one line, naming the shipped drop-in. The same
configuration outside a private namespace draws and says nothing of the kind. The drop-in itself
passes systemd-analyze verify with the service and turns PrivateNetwork off."""
import os
import re
import shutil
import tempfile

from eblib import BUILD, Broker, check, main, need, need_root, prog, run

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DROPIN = "eb-brokerd-upstream.conf"
HINT = "has no interface but lo"


def downstream(up, private, broker=None, wrap=None):
    d = Broker({"admin": {"role": "admin"}}, capacity=65536, broker_extra=f"""
[upstream]
broker = {broker or up.tcp}
user = edge
key-file = {up.keys['edge']}
""")
    if private:
        d.wrap = wrap or ["unshare", "--net"]
        d.env = {"EB_LOG_LEVEL": "debug"}
    return d.start()


# In a namespace of its own with lo up, something that takes TCP connections on 127.0.0.1:PORT
# and answers them as an HTTP server would: an upstream that is reached and is no broker.
# The broker starts once it listens (a refused connect before then would rightly be the network's).
# The server dies with the broker (the shell execs it, so it is the server's parent): with
# PR_SET_PDEATHSIG, through setpriv, nothing is left listening once the test has ended.
NOT_A_BROKER = """ip link set lo up || exit 1
ready=$(mktemp -u /tmp/eb-netns-ready.XXXXXX)
setpriv --pdeathsig KILL python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 55399))
s.listen(16)
open(sys.argv[1], "w").close()
while True:
    c, _ = s.accept()
    c.sendall(b"HTTP/1.0 400 Bad Request\\r\\n\\r\\n")
    c.close()
' "$ready" &
i=0
while [ ! -e "$ready" ]; do
    i=$((i + 1)); [ $i -lt 600 ] || exit 1
    sleep 0.05
done
rm -f "$ready"
exec "$@"
"""


def verify_dropin():
    """The service with the example drop-in, as systemctl edit would place it."""
    tmp = tempfile.mkdtemp(prefix="eb-upstream-units-")
    try:
        with open(os.path.join(BUILD, "units", "eb-brokerd.service")) as f:
            text = f.read()
        # Our programs run from the build tree; others (kill) stay as they are.
        text = re.sub(r"^(Exec\w+=[-@+!]*)(\S+)",
                      lambda m: m.group(1) + (prog(os.path.basename(m.group(2)))
                                              if os.path.basename(m.group(2)).startswith("eb-")
                                              else m.group(2)),
                      text, flags=re.M)
        with open(os.path.join(tmp, "eb-brokerd.service"), "w") as f:
            f.write(text)
        shutil.copy(os.path.join(SRC, "units", "eb-brokerd.socket"), tmp)
        check("PrivateNetwork=yes" in text, "the shipped eb-brokerd.service has PrivateNetwork=yes")
        unit = os.path.join(tmp, "eb-brokerd.service")

        def security():
            p = run(["systemd-analyze", "security", "--offline=yes", "--no-pager", unit])
            return (p.stdout + p.stderr).decode()

        before = security()
        os.makedirs(unit + ".d")
        shutil.copy(os.path.join(SRC, "units", DROPIN), os.path.join(unit + ".d", "upstream.conf"))
        p = run(["systemd-analyze", "verify", "--man=no", unit])
        out = (p.stdout + p.stderr).decode().strip()
        check(p.returncode == 0 and out == "",
              f"systemd-analyze verify accepts eb-brokerd.service with {DROPIN}: {out}")
        after = security()
        net = lambda text: [l for l in text.splitlines() if "PrivateNetwork=" in l]
        check(any(l.lstrip().startswith("✓") for l in net(before)) and
              any(l.lstrip().startswith("✗") for l in net(after)),
              f"the drop-in gives the service the network: {net(before)} -> {net(after)}")
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", after)
        check(m is not None and float(m.group(1)) <= 2.0,
              f"and leaves its exposure low ({m.group(1) if m else after[-200:]})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test():
    need("unshare")
    need("systemd-analyze")
    need_root("for a private network namespace (unshare --net)")

    verify_dropin()

    up = Broker({"edge": {"role": "sink", "downstream-broker": "yes"}, "admin": {"role": "admin"}})
    d = None
    try:
        up.start()
        p = run(["unshare", "--net", "cat", "/proc/self/net/dev"], check=True)
        check(re.findall(r"^\s*([^\s:|]+):", p.stdout.decode(), re.M) == ["lo"],
              "unshare --net gives a namespace with lo alone, as PrivateNetwork=yes does")

        d = downstream(up, private=True)
        # The socket systemd made outside the namespace serves clients from inside it (and the
        # first connection starts the broker: socket activation).
        check("pool_bits" in d.status(), "a client on the passed-in TCP socket is served")
        check(d.wait_log(HINT, 30), "the broker without a network says why it cannot draw:\n" +
              d.read_log())
        line = next(l for l in d.read_log().splitlines() if HINT in l)
        print(f"# {line}")
        for what, text in (("the cause", "PrivateNetwork=yes"),
                           ("the command", "systemctl edit eb-brokerd.service"),
                           ("the drop-in", DROPIN), ("the page", "eb-brokerd.conf(5)")):
            check(text in line, f"the line names {what} ({text})")
        # The retries go on (at debug level), the line is not repeated.
        check(d.wait_log(", again", 30), "the broker retries:\n" + d.read_log()[-500:])
        check(len(re.findall(HINT, d.read_log())) == 1, "the line comes once, not at every retry")
        d.cleanup()

        # Outside a private namespace the same configuration draws, and there is no such line.
        d = downstream(up, private=False)
        d.status()  # the first connection starts it (socket activation)
        check(d.wait_log(f"Drawing from upstream {up.tcp} as user edge", 30),
              "in this machine's namespace the same broker draws from the upstream:\n" +
              d.read_log())
        check(HINT not in d.read_log(), "and says nothing of a missing network")
        d.cleanup()

        # A namespace with lo alone, but an upstream that is reached and fails for another
        # reason: the line would send the administrator the wrong way, so it does not come.
        d = downstream(up, private=True, broker="tcp://127.0.0.1:55399",
                       wrap=["unshare", "--net", "sh", "-c", NOT_A_BROKER, "sh"])
        d.status()
        check(d.wait_log(", again", 30), "the broker retries the upstream that is no broker:\n" +
              d.read_log()[-800:])
        check(HINT not in d.read_log(),
              "a reached upstream's failure is not blamed on the network:\n" + d.read_log()[-800:])
    finally:
        if d:
            d.cleanup()
        up.cleanup()


main(test)
