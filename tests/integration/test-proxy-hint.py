#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A broker that lists its load balancer in proxy-protocol-from= behind a real HAProxy that does
not send the PROXY header (no send-proxy-v2): the broker refuses each connection and says why,
and the client, which sees only a connection closed before its TLS handshake, names
send-proxy-v2 among the causes rather than blaming a busy broker alone."""
import os
import shutil
import subprocess

from eblib import SKIP, Broker, check, main, prog, reserve_port, run, tcp_listening, wait_for


def test():
    if shutil.which("haproxy") is None:
        print("SKIP: needs Debian's haproxy (scripts/install-deps --test)")
        raise SystemExit(SKIP)
    b = Broker({"admin": {"role": "admin"}},
               broker_extra="proxy-protocol-from = 127.0.0.1").start()
    hold, port = reserve_port()
    hold.close()
    cfg = os.path.join(b.tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(f"""defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
listen entropy
    bind 127.0.0.1:{port}
    server edge1 127.0.0.1:{b.port}
""")
    h = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for("HAProxy listening", lambda: tcp_listening(port, h.pid), 20)
        p = run([prog("eb-brokerctl"), "-b", f"tcp://127.0.0.1:{port}", "-u", "admin", "-k",
                 b.keys["admin"], "status"])
        err = p.stderr.decode()
        check(p.returncode == 1 and "send-proxy-v2" in err and "proxy-protocol-from=" in err,
              f"the client names send-proxy-v2: {err.strip()}")
        check(b.wait_log("no PROXY protocol header") and "send-proxy-v2" in b.read_log(),
              "the broker's line names the fix too")
    finally:
        h.terminate()
        h.wait(10)
        b.cleanup()


if __name__ == "__main__":
    main(test)
