#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-metrics' status page in real browsers: a broker with its history's test-only interval
(EB_HISTORY_INTERVAL_MS=100, so that its "hour" of 360 samples passes in 36 s) lives through a
script of a few seconds, its first 60 samples or more: a sink starved, a source donating, a stuck
one raising a health alarm (the page's hour is that much of a shrunk hour, not a whole one); then
headless Chromium
draws the page at a desktop's and a phone's size: the screenshots are not blank (kept in the
build directory), the page's text names the source and says the stuck one is stuck, and at each
width the layout Chromium computes fits the screen (no sideways scrolling, no element past the
right edge); w3m shows the tables as text."""
import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import zlib

from eblib import (MSG, ROLE_SOURCE, SKIP, Broker, Failure, Raw, check, draw, main, need, prog,
                   reserve_port, run, tcp_listening, wait_for)


def png_stats(path):
    """(width, height, distinct colours, share of pixels that are not near-white)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
            depth, ctype, interlace = body[8], body[9], body[12]
            assert depth == 8 and ctype in (2, 6) and interlace == 0, "a PNG as Chromium writes"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    prev, colours, dark = bytearray(stride), set(), 0
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp * 2):
            px = bytes(line[x:x + 3])
            colours.add(px)
            dark += min(px) < 200
        prev = line
    return w, h, len(colours), dark / (h * w / 2)


def chromium(url, tmp, shot, size):
    """A screenshot and the DOM, from a fresh profile: Chromium is slow to start when loaded."""
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={os.path.join(tmp, 'chromium-' + size.replace(',', 'x'))}",
            f"--window-size={size}"]
    p = run(base + [f"--screenshot={shot}", url], timeout=180)
    check(p.returncode == 0 and os.path.exists(shot),
          f"chromium wrote a screenshot at {size} (exit {p.returncode}: "
          f"{p.stderr.decode(errors='replace')[-300:]})")
    p = run(base + ["--dump-dom", url], timeout=180)
    check(p.returncode == 0, "chromium dumped the DOM")
    return p.stdout.decode(errors="replace")


# Measures the page's layout in the browser that draws it: the viewport's width, the document's
# (wider means the page scrolls sideways), and every element whose right edge lies past the
# viewport, other than inside a box that scrolls sideways on its own (.scroll, the wide tables).
# Appended to a copy of the page, which Chromium opens as a file: the served page's
# Content-Security-Policy forbids scripts, and rightly. The copy is laid out in a frame of the
# width measured: headless Chromium makes no window narrower than 500 px, wider than a phone.
LAYOUT_JS = """<script>
addEventListener('load', function () {
  var vw = document.documentElement.clientWidth, over = [];
  document.querySelectorAll('body *').forEach(function (e) {
    var r = e.getBoundingClientRect(), p = e.parentElement;
    if (r.width > 0 && r.right > vw + 1 && !(p && p.closest('.scroll')))
      over.push(e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ':' +
                Math.round(r.left) + '-' + Math.round(r.right));
  });
  parent.postMessage(JSON.stringify({viewport: vw,
                                     document: document.documentElement.scrollWidth,
                                     over: over.slice(0, 12)}), '*');
});
</script>"""

FRAME = """<!DOCTYPE html><html><body style="margin:0"><pre id="eb-layout"></pre>
<script>addEventListener('message', function (e) {
  document.getElementById('eb-layout').textContent = e.data;
});</script>
<iframe src="{page}" width="{width}" height="2400" style="border:0;display:block"></iframe>
</body></html>"""


def layout(url, tmp, width):
    """The page at url laid out by Chromium width px wide: {viewport, document, over}."""
    p = run(["curl", "-sf", url], timeout=60)
    check(p.returncode == 0, f"the page is served ({p.returncode})")
    page = p.stdout.decode(errors="replace")
    check("</body>" in page, "the page has a body")
    copy = os.path.join(tmp, f"layout-{width}.html")
    with open(copy, "w") as f:
        f.write(page.replace("</body>", LAYOUT_JS + "</body>", 1))
    frame = os.path.join(tmp, f"frame-{width}.html")
    with open(frame, "w") as f:
        f.write(FRAME.replace("{page}", os.path.basename(copy)).replace("{width}", str(width)))
    p = run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={os.path.join(tmp, f'chromium-layout-{width}')}",
             f"--window-size={max(width, 500) + 20},2400", "--virtual-time-budget=10000",
             "--dump-dom", "file://" + frame], timeout=180)
    dom = p.stdout.decode(errors="replace")
    m = re.search(r'<pre id="eb-layout">(.+?)</pre>', dom, re.S)
    check(p.returncode == 0 and m is not None,
          f"chromium laid the page out {width} px wide ({p.stderr.decode(errors='replace')[-300:]})")
    return json.loads(html.unescape(m.group(1)))


def test():
    need("systemd-socket-activate")
    for tool in ("chromium", "w3m"):
        if shutil.which(tool) is None:
            print(f"SKIP: needs Debian's {tool} (scripts/install-deps --test)")
            raise SystemExit(SKIP)
    b = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                "vm1": {"role": "sink"},
                "admin": {"role": "admin"},
                "local": {"role": "source,admin", "unix-uid": os.getuid(), "key": False,
                          "max-credit-per-byte": 8}})
    b.env = dict(getattr(b, "env", {}), EB_HISTORY_INTERVAL_MS="100")
    b.start()
    mhold, mport = reserve_port()
    exporter = feeder = None
    try:
        cmd = ["systemd-socket-activate", "--accept", "-l", f"127.0.0.1:{mport}"]
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if var in os.environ:
                cmd += ["-E", f"{var}={os.environ[var]}"]
        cmd += [prog("eb-metrics"), "-b", b.unix, "--timeout", "20"]
        exporter = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(b.tmp, "metrics.log"), "wb"))
        wait_for("eb-metrics' socket", lambda: tcp_listening(mport), 20)
        url = f"http://127.0.0.1:{mport}/"

        def history():
            p = run(["curl", "-sf", url + "history.json"], timeout=60)
            return json.loads(p.stdout) if p.returncode == 0 else {}

        # The script: a sink starved by the empty pool, a source that stays and donates, a sink
        # that draws, a stuck source that raises a health alarm.
        p = draw(b, "vm1", 64, extra=["--timeout", "2"])
        check(p.returncode != 0, "a sink is starved by the empty pool")
        feeder = subprocess.Popen([prog("eb-source-file"), "-b", b.tcp, "-u", "alice", "-k",
                                   b.keys["alice"], "--credit-per-byte=8",
                                   "--max-credit-per-byte=8", "-"],
                                  stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        feeder.stdin.write(os.urandom(65536))
        feeder.stdin.flush()
        wait_for("the pool to fill", lambda: b.status()["pool_bits"] > 100000, 60)
        check(draw(b, "vm1", 2048).returncode == 0, "a sink draws 2 KiB")
        # A source whose PUT repeats one byte: the broker's own test withholds its credit.
        raw = Raw(b.sock)
        raw.send(MSG["HELLO"], struct.pack(">HBBIH", 1, ROLE_SOURCE, 0, 8000, 11) + b"stuck noise")
        check(raw.recv()[0] == MSG["WELCOME"], "the stuck source is welcome")
        raw.send(MSG["PUT"], struct.pack(">II", 512, 64) + b"\x55" * 64)
        t, ack = raw.recv()
        if t != MSG["PUT_ACK"]:
            raise Failure(f"PUT answered with type {t}")
        check(struct.unpack(">II", ack)[0] == 0, "a PUT of one repeated byte is not credited")
        h = wait_for("the alarm and the starvation in the hour's history", lambda: (
            lambda x: x if x.get("broker_up") and
            sum(s["alarms"] for s in x["history"]["hour"]["samples"]) > 0 and
            sum(s["empty_answers"] for s in x["history"]["hour"]["samples"]) > 0 and
            len(x["history"]["hour"]["samples"]) > 60 else None)(history()), 120, interval=1)
        check(h["history"]["hour"]["interval_ms"] == 100 and
              any(s["user"] == "alice" for s in h["sources"]),
              "history.json: 100 ms samples under the test's interval, alice among the sources")

        out = os.environ.get("EB_BUILD_DIR", b.tmp)
        shots = {"desktop": (os.path.join(out, "status-page.png"), "1280,1600"),
                 "phone": (os.path.join(out, "status-page-phone.png"), "390,2400")}
        for name, (shot, size) in shots.items():
            dom = chromium(url, b.tmp, shot, size)
            w, hgt, colours, dark = png_stats(shot)
            print(f"# {name} screenshot: {shot} ({w}x{hgt}, {colours} colours, "
                  f"{dark:.1%} not white)")
            check(colours > 20 and dark > 0.02, f"the {name} screenshot is not blank")
            check("alice" in dom and "[chart: pool level over the last hour" in dom,
                  f"the {name} page names the source alice and charts the hour")
            # The alarm names the stuck source (user local, on the unix socket) and says what
            # it is: its kind "stuck noise" alone would not tell.
            alarm = re.search(r"<b>Health alarm:</b> source local \(([^)]*)\) is (\w+)", dom)
            check(alarm is not None and alarm.group(2) == "stuck",
                  f"the {name} page's alarm says the source local is stuck "
                  f"({alarm.group(0) if alarm else dom[:400]!r})")
            # Laid out at this width: nothing wider than the screen, nothing sticking out of it
            # (wide tables scroll inside their own box).
            width = int(size.split(",")[0])
            lay = layout(url, b.tmp, width)
            print(f"# {name} layout: {lay}")
            check(lay["viewport"] == width and lay["document"] <= width and not lay["over"],
                  f"at {width} px the page fits the screen: no sideways scrolling, no element "
                  f"past its right edge ({lay})")
        p = run(["w3m", "-dump", "-cols", "100", url], timeout=60,
                env=dict(os.environ, HOME=b.tmp))
        text = p.stdout.decode(errors="replace")
        check(p.returncode == 0 and "Sources" in text and "alice" in text
              and "[chart: bits per second over the last hour" in text
              and any(l.split()[:1] == ["alice"] and "ok" in l for l in text.splitlines()),
              f"w3m -dump shows the tables as text: {text[:600]!r}")
        p = run(["w3m", "-dump", "-cols", "40", url], timeout=60, env=dict(os.environ, HOME=b.tmp))
        check(p.returncode == 0 and "alice" in p.stdout.decode(errors="replace"),
              "w3m at a phone's 40 columns")
    finally:
        if feeder and feeder.poll() is None:
            feeder.kill()
            feeder.wait()
        if exporter and exporter.poll() is None:
            exporter.send_signal(signal.SIGTERM)
            exporter.wait(20)
        mhold.close()
        b.cleanup()


main(test)
