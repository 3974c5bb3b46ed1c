#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The upstream's state as an admin sees it (docs/protocol.md 3.17): an edge that drew from its
site and is idle (its pool full, nothing to draw) says connected, with its last data; the site
killed, the idle edge's "eb-brokerctl status" says failing, with the reason, within a bound, and
eb-metrics' eb_upstream_failing says 1; the site back, connected again. "sources" gives the
upstream's state under its table, and its row's LAST SEEN is the last data, not 0."""
import json
import os
import signal
import socket
import subprocess
import time

from eblib import (Broker, brokerctl, check, donate, main, prog, reserve_port, tcp_listening,
                   wait_for)

# The site's process dies: its kernel closes the connection, which an idle edge watches, and the
# reconnect says why it fails: within 2 s, eb-brokerd.conf(5) says; the bound is 2.5 times that.
BOUND_S = 5


def ctl(b, *args):
    return brokerctl(b, *args, user="admin")


def upstream(b):
    return json.loads(ctl(b, "status", "--json"))["upstream"]


def metrics(b):
    """One scrape of eb-metrics, as eb-metrics.socket runs it."""
    hold, port = reserve_port()
    hold.close()
    p = subprocess.Popen(["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{port}",
                          prog("eb-metrics"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("eb-metrics' socket", lambda: tcp_listening(port), 10)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    finally:
        p.terminate()
        p.wait(10)
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in
            data.decode().split("\r\n\r\n", 1)[1].splitlines()
            if line and not line.startswith("#"))}


def test():
    site = Broker({"edge": {"role": "sink", "downstream-broker": "yes"},
                   "src": {"role": "source"}, "admin": {"role": "admin"}}).start()
    edge = Broker({"admin": {"role": "admin"}}, capacity=65536, broker_extra=f"""
[upstream]
broker = {site.tcp}
user = edge
key-file = {site.keys['edge']}
""")
    try:
        data = os.path.join(site.tmp, "random")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        donate(site, "src", data)
        edge.start()
        # The edge fills to its upstream's low water and rests: an idle edge, connected.
        up = wait_for("the edge connected to its site",
                      lambda: (u := upstream(edge)) and u["state"] == "connected" and
                      u["last_data_ms"] and u, 30)
        check(up["broker"] == site.tcp and up["reason"] is None,
              f"connected to {up['broker']}, data {time.time() - up['last_data_ms'] / 1000:.1f} s ago")
        text = ctl(edge, "status")
        check("Upstream: connected to " + site.tcp in text, "status says connected, and to whom")
        rows = json.loads(ctl(edge, "sources", "--json"))
        row = [s for s in rows["sources"] if s["upstream"]][0]
        check(row["last_seen_ms"] > 0 and rows["upstream"]["state"] == "connected",
              f"sources: the upstream's row was last seen {row['last_seen_ms']} ms ago, "
              f"and its state follows the table")
        time.sleep(1)

        site.stop(signal.SIGKILL)
        t0 = time.monotonic()
        up = wait_for("the idle edge says its upstream fails, and why",
                      lambda: (u := upstream(edge))["state"] == "failing" and
                      "refused" in (u["reason"] or "") and u, BOUND_S, interval=0.05)
        took = time.monotonic() - t0
        text = ctl(edge, "status")
        check("Upstream: failing since" in text and "refused" in text,
              f"status: {[l for l in text.splitlines() if 'failing' in l]}")
        m = metrics(edge)
        check(m.get("eb_upstream_failing") == 1 and m.get("eb_upstream_connected") == 0 and
              m.get("eb_upstream_last_data_timestamp_seconds", 0) > 0,
              "eb-metrics: eb_upstream_failing 1, eb_upstream_connected 0, the last data's time")
        print(f"# site killed: the idle edge's status said failing ({up['reason']}) "
              f"after {took:.2f} s (bound {BOUND_S} s)")

        site.start()
        wait_for("connected again once the site is back",
                 lambda: upstream(edge)["state"] == "connected", 90)
    finally:
        edge.cleanup()
        site.cleanup()


if __name__ == "__main__":
    main(test)
