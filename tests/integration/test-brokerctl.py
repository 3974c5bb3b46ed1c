#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-brokerctl sources, sinks and users: the JSON figures are what was donated and drawn, the
tables say the same in aligned columns, REPORT pages a table of 300 sessions without a row twice,
and a REPORT read here, from docs/protocol.md's layout alone, agrees with eb-brokerctl."""
import json
import os
import re
import socket
import struct
import subprocess

from eblib import (MSG, ROLE_ADMIN, ROLE_SINK, ROLE_SOURCE, Broker, Failure, Raw, brokerctl, check,
                   draw, main, prog, reserve_port, run, tcp_listening, wait_for)

HEALTH = {0: "-", 1: "new", 2: "ok", 3: "no-claim", 4: "stuck", 5: "silent"}


def ctl(b, *args):
    return brokerctl(b, *args, user="admin")


def ctl_json(b, what):
    return json.loads(ctl(b, what, "--json"))[what]


def text(buf, off):
    n, = struct.unpack_from(">H", buf, off)
    return buf[off + 2:off + 2 + n].decode(), off + 2 + n


def report(raw, table, after=0):
    """One REPORT page read by hand: (rows as dicts, next)."""
    raw.send(MSG["REPORT_REQ"], struct.pack(">B3xQ", table, after))
    t, p = raw.recv()
    if t != MSG["REPORT"]:
        raise Failure(f"REPORT_REQ answered with type {t}: {p!r}")
    tab, count, nxt = struct.unpack_from(">BxHQ", p, 0)
    off, rows = 12, []
    for _ in range(count):
        if tab == 1:
            f = struct.unpack_from(">QBBBxIIIIQQQQQ", p, off)
            off += 68
            row = dict(zip(("id", "roles", "health", "flags", "claim", "connected_s", "last_ms",
                            "waiting_ms", "bytes_in", "bits_in", "bits_out", "bytes_drbg",
                            "quota_left"), f))
            row["user"], off = text(p, off)
            row["kind"], off = text(p, off)
            row["peer"], off = text(p, off)
        else:
            f = struct.unpack_from(">QBBxxIIIQQQQQQ", p, off)
            off += 72
            row = dict(zip(("id", "roles", "flags", "sessions", "sources", "sinks", "bytes_in",
                            "bits_in", "bits_out", "bytes_drbg", "quota_per_hour", "quota_left"), f))
            row["name"], off = text(p, off)
        rows.append(row)
    check_eq = off == len(p)
    if not check_eq:
        raise Failure(f"REPORT has {len(p) - off} bytes after its {count} rows")
    return rows, nxt


def hello(raw, roles, kind=b"raw", claim=0):
    raw.send(MSG["HELLO"], struct.pack(">HBBIH", 1, roles, 0, claim, len(kind)) + kind)
    t, p = raw.recv()
    if t != MSG["WELCOME"]:
        raise Failure(f"HELLO answered with type {t}: {p!r}")


def put(raw, data, credit):
    raw.send(MSG["PUT"], struct.pack(">II", credit, len(data)) + data)
    t, p = raw.recv()
    if t != MSG["PUT_ACK"]:
        raise Failure(f"PUT answered with type {t}: {p!r}")
    return struct.unpack(">II", p)[0]


def columns(table_text):
    """Rows of a printed table as lists of cells (cells are two or more spaces apart), and
    whether every column starts at the same place on every line (left-aligned ones) or ends
    there (right-aligned ones)."""
    lines = table_text.rstrip("\n").split("\n")
    return [re.split(r"\s{2,}", l.strip()) for l in lines], lines


def test():
    me = os.getuid()
    b = Broker({"admin": {"role": "admin"},
                "alice": {"role": "source", "max-credit-per-byte": 8},
                "vm1": {"role": "sink", "quota-bits-per-hour": 1048576},
                "local": {"role": "source,sink,admin", "unix-uid": me, "key": False,
                          "max-sessions": 400},
                "edge": {"role": "sink", "downstream-broker": "yes"}},
               broker_extra="max-local-sessions = 512").start()
    raws = []
    try:
        # A source that comes and goes: its user's totals stay.
        data = os.path.join(b.tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(65536))
        p = run([prog("eb-source-file"), "-b", b.tcp, "-u", "alice", "-k", b.keys["alice"],
                 "--credit-per-byte=8", "--max-credit-per-byte=8", data], check=True)
        m = re.search(r"Donated 65536 bytes .*?, (\d+) bits credited", p.stderr.decode())
        check(m is not None, "eb-source-file donated 64 KiB")
        alice_bits = int(m.group(1))

        # A source that stays, seen through its own PUTs: one credited, then one stuck.
        src = Raw(b.sock)
        raws.append(src)
        hello(src, ROLE_SOURCE, b"raw source", claim=7500)
        sources = ctl_json(b, "sources")
        check(len(sources) == 1 and sources[0]["health"] == "new",
              f"a source without PUT is new: {sources}")
        credited = put(src, os.urandom(4096), 4096 * 8)
        check(credited == 4096 * 8, f"4096 random bytes credited {credited} bits")
        check(put(src, b"\x55" * 64, 512) == 0, "a PUT of one repeated byte gets no credit")
        sources = ctl_json(b, "sources")
        s = sources[0]
        check(s["user"] == "local" and s["kind"] == "raw source" and s["bytes_in"] == 4096 + 64
              and s["bits_credited"] == credited and s["claim_mbits_per_byte"] == 7500
              and s["health"] == "stuck" and s["tls"] is False and s["peer"].startswith("unix"),
              f"sources --json: the raw source's figures and the broker's verdict: {s}")
        put(src, os.urandom(1024), 0)
        check(ctl_json(b, "sources")[0]["health"] == "no-claim", "a PUT claiming nothing: no-claim")
        put(src, os.urandom(1024), 8)
        check(ctl_json(b, "sources")[0]["health"] == "ok", "a credited PUT again: ok")

        # A sink with a quota draws 1 KiB.
        p = draw(b, "vm1", 1024)
        check(p.returncode == 0 and len(p.stdout) == 1024, "vm1 drew 1024 bytes")
        users = {u["name"]: u for u in ctl_json(b, "users")}
        check(users["alice"]["bytes_in"] == 65536 and users["alice"]["bits_in"] == alice_bits
              and users["alice"]["sessions"] == 0,
              f"users: alice's totals outlive her session ({alice_bits} bits): {users['alice']}")
        v = users["vm1"]
        check(v["bits_out"] == 8192 and v["bytes_in"] == 0 and v["quota_bits_per_hour"] == 1048576
              and 1048576 - 8192 <= v["quota_left_bits"] <= 1048576,
              f"users: vm1 drew 8192 bits and its quota shows it: {v}")
        check(users["local"]["sessions"] == 1 and users["local"]["sources"] == 1
              and users["local"]["bits_in"] == credited + 8 and users["admin"]["quota_left_bits"] is None,
              f"users: the connected source and the admin: {users['local']}, {users['admin']}")
        st = b.status()
        check(st["bits_in"] == alice_bits + credited + 8,
              f"status bits_in {st['bits_in']} is the users' bits_in summed")

        # The tables say the same, aligned.
        out = ctl(b, "users")
        rows, lines = columns(out)
        check(rows[0][:3] == ["USER", "ROLES", "SESSIONS"], f"users table header: {lines[0]}")
        alice = next(r for r in rows if r[0] == "alice")
        check(alice[5] == "65536" and alice[6] == str(alice_bits), f"users table: alice's row {alice}")
        ends = {len(l) for l in lines}
        check(len(ends) == 1, f"users table: right-aligned last column ends on one column ({ends})")
        out = ctl(b, "sources")
        rows, lines = columns(out)
        check(rows[0] == ["ID", "USER", "PEER", "KIND", "BYTES IN", "BITS CREDITED", "CLAIM H",
                          "HEALTH", "LAST SEEN"], f"sources table header: {lines[0]}")
        check(rows[1][1] == "local" and rows[1][4] == str(4096 + 64 + 2048)
              and rows[1][6] == "7.500" and rows[1][7] == "ok",
              f"sources table row: {rows[1]}")
        check(lines[0].index("USER") == lines[1].index("local"), "sources table: columns line up")

        # A GET the pool cannot back waits in the queue: the sinks table says since when. The
        # wait is 250 ms, so try until a report lands inside one.
        sink, admin = Raw(b.sock), Raw(b.sock)
        raws += [sink, admin]
        hello(sink, ROLE_SINK, b"raw sink")
        hello(admin, ROLE_ADMIN, b"raw admin")
        seen, served = None, 0
        for _ in range(20):
            sink.send(MSG["GET"], struct.pack(">IB3x", 65536 * 8, 0))
            rows, _ = report(admin, 1)
            row = next(r for r in rows if r["kind"] == "raw sink")
            t, p = sink.recv()
            check(t in (MSG["EMPTY"], MSG["DATA"]), "the big GET is answered")
            if t == MSG["DATA"]:
                served += struct.unpack_from(">I", p)[0]
            if row["flags"] & 2:
                seen = row
                break
        check(seen is not None and seen["waiting_ms"] < 5000 and seen["roles"] == ROLE_SINK,
              f"a waiting GET shows with its wait: {seen}")
        sinks = [s for s in ctl_json(b, "sinks") if s["kind"] == "raw sink"]
        check(len(sinks) == 1 and sinks[0]["bits_served"] == served > 0
              and sinks[0]["waiting_ms"] is None and sinks[0]["quota_left_bits"] is None
              and sinks[0]["bytes_drbg"] == 0,
              f"sinks --json: the raw sink was served the {served} bits its DATA carried: {sinks}")
        out = ctl(b, "sinks")
        rows, lines = columns(out)
        # Its last GET was answered EMPTY: it still waits for entropy, and the table says so.
        check(rows[0] == ["ID", "USER", "PEER", "KIND", "BITS SERVED", "DRBG BYTES", "QUOTA LEFT",
                          "EMPTY", "QUOTA", "WAITING", "WAITS FOR", "LAST SEEN"]
              and rows[1][4] == str(served) and rows[1][6] == "-" and int(rows[1][7]) >= 1
              and rows[1][8] == "0" and rows[1][9] != "-" and rows[1][10] == "empty",
              f"sinks table: {rows[:2]}")

        # The REPORT as docs/protocol.md lays it out agrees with eb-brokerctl.
        rows, nxt = report(admin, 2)
        check(nxt == 0 and [r["name"] for r in rows] == ["admin", "alice", "vm1", "local", "edge"],
              f"users REPORT by hand: {[r['name'] for r in rows]}")
        by_hand = next(r for r in rows if r["name"] == "vm1")
        check(by_hand["bits_out"] == 8192 and by_hand["flags"] == 1, f"vm1 by hand: {by_hand}")

        # 300 more sessions: three pages, each row once, also when some close between pages.
        for i in range(300):
            r = Raw(b.sock)
            raws.append(r)
            hello(r, ROLE_SOURCE, f"many {i}".encode())
        page1, nxt = report(admin, 1)
        check(len(page1) == 128 and nxt == page1[-1]["id"], f"a page is 128 rows, next = last id {nxt}")
        for r in raws[-100:-90]:  # ten sessions from a later page leave
            r.close()
        ids, after = [x["id"] for x in page1], nxt
        while after:
            rows, after = report(admin, 1, after)
            ids += [x["id"] for x in rows]
        check(len(ids) == len(set(ids)) and ids == sorted(ids) and 293 <= len(ids) <= 303,
              f"paged to the end: {len(ids)} rows, in order, none twice")
        sources = ctl_json(b, "sources")
        many = [s for s in sources if s["kind"].startswith("many ")]
        check(len(many) >= 280 and len({s['id'] for s in sources}) == len(sources),
              f"eb-brokerctl sources pages through {len(sources)} sources")

        # A broker that draws from this one lists its draw as a source; this one lists it as a
        # sink, and the two agree on the bits.
        for _ in range(4):
            put(src, os.urandom(16384), 16384 * 8)
        down = Broker({"admin": {"role": "admin"},
                       "local": {"role": "admin", "unix-uid": me, "key": False}},
                      capacity=131072, activate=False,
                      broker_extra=f"""
[upstream]
broker = {b.tcp}
user = edge
key-file = {b.keys['edge']}
low-water-percent = 50
draw-bits = 16384
""").start()
        try:
            def settled():
                mine = [s for s in ctl_json(down, "sources") if s["upstream"]]
                theirs = [s for s in ctl_json(b, "sinks") if s["user"] == "edge"]
                # The downstream health-tests the upstream's bytes; the start-up test's first
                # 1024 bytes earn no credit (as integration-chain says).
                if (mine and theirs and mine[0]["bits_credited"] >= 65536
                        and mine[0]["bits_credited"] + 8 * 1024 == theirs[0]["bits_served"]
                        and mine[0]["bits_credited"] == down.status()["bits_in"]):
                    return mine[0], theirs[0]
                return None
            mine, theirs = wait_for("the downstream to fill from this broker", settled, 30)
            check(mine["kind"] == "upstream" and mine["peer"] == b.tcp and mine["user"] == "edge"
                  and mine["id"] is None and mine["claim_mbits_per_byte"] == 8000
                  and mine["health"] == "ok" and mine["tls"] is True,
                  f"the downstream's sources: its draw from upstream, {mine['bits_credited']} bits: {mine}")
            check(theirs["kind"] != "" and theirs["tls"] is True,
                  f"this broker's sinks: the downstream, served {theirs['bits_served']} bits: {theirs}")
            rows, _ = columns(ctl(down, "sources"))
            check(rows[1][:4] == ["-", "edge", b.tcp, "upstream"],
                  f"the downstream's sources table: {rows[1]}")
            # eb-metrics says the same of it, once, as eb-metrics@.service would.
            hold, port = reserve_port()
            exporter = subprocess.Popen(
                ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{port}",
                 prog("eb-metrics"), "-b", down.unix], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            try:
                wait_for("eb-metrics' socket", lambda: tcp_listening(port), 10)
                with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                    s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
                    text = b"".join(iter(lambda: s.recv(65536), b"")).decode()
                up = re.search(r"^eb_upstream_entropy_in_bytes_total ([\d.]+)$", text, re.M)
                check(up is not None and float(up.group(1)) * 8 >= mine["bits_credited"]
                      and "\neb_upstream_failing 0\n" in text,
                      f"eb-metrics: eb_upstream_entropy_in_bytes_total {up and up.group(1)}, "
                      f"not failing")
                # The upstream is not a source session: the health counts add up to eb_sources.
                sources = re.search(r"^eb_sources (\d+)$", text, re.M)
                by_health = re.findall(r"^eb_sources_by_health\{[^}]*\} (\d+)$", text, re.M)
                check(sources is not None and len(by_health) == 5
                      and sum(map(int, by_health)) == int(sources.group(1)),
                      f"eb_sources {sources and sources.group(1)} is the sum of "
                      f"eb_sources_by_health {by_health}")
                # The page says which broker it is, and the upstream's claim: full entropy.
                with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
                    page = b"".join(iter(lambda: s.recv(65536), b"")).decode()
                bid = re.search(r"Broker id ([0-9a-f]{16})", down.read_log())
                name = f"Entropy broker on {socket.gethostname()} (id {bid and bid.group(1)})"
                title = re.search(r"<title>(.*?)</title>", page)
                heading = re.search(r"<h1>(.*?)</h1>", page)
                print(f"# the page's title: {title and title.group(1)}")
                check(bid and title and title.group(1).startswith(name)
                      and heading and heading.group(1) == name,
                      f"the page's title and heading name the host and the broker id ({name})")
                ups = page[page.index("<h2>Upstreams</h2>"):]
                check('<td class="n">8.000</td>' in ups[:ups.index("</table>")],
                      "the page shows the upstream's claim as 8.000 bits/byte, not 0.000")
            finally:
                exporter.terminate()
                exporter.wait(10)
                hold.close()
        finally:
            down.cleanup()

        # Only an admin may ask.
        src.send(MSG["REPORT_REQ"], struct.pack(">B3xQ", 1, 0))
        t, p = src.recv()
        check(t == MSG["ERROR"] and struct.unpack_from(">H", p)[0] == 4,
              "REPORT_REQ from a source is FORBIDDEN")
        p = run([prog("eb-brokerctl"), "-b", b.tcp, "-u", "admin", "-k", b.keys["admin"],
                 "peers"])
        check(p.returncode == 2 and b"sources, sinks, users" in p.stderr,
              "an unknown command names the commands")
    finally:
        for r in raws:
            r.close()
        b.cleanup()


main(test)
