#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-assess on the two captures an administrator would compare: eb-source-jitter's raw samples
(taken with --dump-raw against a private broker) and a zero source (an all-zero file). The PNGs
must be whole, valid PNGs of the documented sizes; the figures must tell the two apart (zero:
about 0 bits per byte, the health tests failing; jitter: several bits); and the ent-style
statistics must agree with Debian's ent on the same file."""
import json
import os
import shutil
import struct
import tempfile
import zlib

from eblib import Broker, check, main, need, prog, run

SAMPLES = 200000
# The sizes eb-assess(1) states.
SIZES = {"histogram.png": (860, 400), "pairs.png": (600, 600), "health.png": (800, 500)}
# Where pairs.png's 256 x 256 cells are, 2 x 2 whole pixels each (tools/assess-plot.[ch]).
PAIRS_X, PAIRS_Y, PAIRS_CELL = 70, 34, 2


def png_size(path):
    """(width, height) of a PNG whose every chunk has a good CRC, whose IHDR comes first and
    IEND last, and whose image data inflates to exactly the rows IHDR promises."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{os.path.basename(path)} starts as a PNG")
    pos, chunks, idat, bad = 8, [], b"", []
    while pos + 12 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(ctype + body) != crc:
            bad.append(ctype)
        chunks.append((ctype, body))
        if ctype == b"IDAT":
            idat += body
        pos += 12 + length
    check(not bad, f"{os.path.basename(path)}: every chunk's CRC is good (bad: {bad})")
    check(chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND" and pos == len(data),
          f"{os.path.basename(path)}: IHDR first, IEND last, nothing after")
    w, h, depth, color = struct.unpack(">IIBB", chunks[0][1][:10])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    rows = zlib.decompress(idat)
    check(len(rows) == h * (1 + w * channels * depth // 8),
          f"{os.path.basename(path)}: image data holds {h} rows of {w} pixels")
    return w, h


def png_pixels(path):
    """The RGB pixels of an 8-bit RGB or RGBA PNG, rows of (r, g, b) tuples, unfiltered as
    the PNG specification's section 9 says."""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat, ihdr = 8, b"", None
    while pos + 12 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        if ctype == b"IHDR":
            ihdr = data[pos + 8:pos + 8 + length]
        elif ctype == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    check(depth == 8 and color in (2, 6) and interlace == 0,
          f"{os.path.basename(path)} is 8-bit RGB(A), not interlaced")
    bpp = 3 if color == 2 else 4
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xff
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xff
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xff
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return rows


def check_pairs_plot(png, data):
    """pairs.png shows exactly the data's pair counts: each cell a uniform block of whole pixels
    in the grey its count gives, so its row averages cannot beat with a period of their own."""
    rows = png_pixels(png)
    count = [0] * 65536
    for i in range(0, len(data) - 1, 2):
        count[data[i] << 8 | data[i + 1]] += 1
    top = max(count)
    worst, mixed, row_means = 0, 0, []
    for y in range(256):
        py = PAIRS_Y + (255 - y) * PAIRS_CELL  # y grows upwards
        for x in range(256):
            c = count[x << 8 | y]
            want = 255 if c == 0 else round(255 * 0.85 * (1 - c / top))
            px = PAIRS_X + x * PAIRS_CELL
            block = {rows[py + j][px + i] for j in range(PAIRS_CELL) for i in range(PAIRS_CELL)}
            if len(block) != 1:
                mixed += 1
            worst = max(worst, max(abs(v - want) for p in block for v in p))
    for py in range(PAIRS_Y, PAIRS_Y + 256 * PAIRS_CELL):
        row_means.append(sum(p[0] for p in rows[py][PAIRS_X:PAIRS_X + 256 * PAIRS_CELL]) / 512)
    check(mixed == 0, f"pairs.png: every cell is one uniform {PAIRS_CELL} x {PAIRS_CELL} block "
          f"({mixed} of 65536 are not)")
    check(worst <= 1, f"pairs.png: every cell is the grey of its pair's count (off by {worst})")
    # Row means of cells drawn from the counts alone: the spread is the data's, no beat.
    expect = []
    for y in range(256):
        cells = [255 if count[x << 8 | y] == 0 else 255 * 0.85 * (1 - count[x << 8 | y] / top)
                 for x in range(256)]
        expect += [sum(cells) / 256] * PAIRS_CELL
    expect.reverse()
    dev = max(abs(a - b) for a, b in zip(row_means, expect))
    mean = sum(row_means) / len(row_means)
    var = sum((m - mean) ** 2 for m in row_means) / len(row_means)
    emean = sum(expect) / len(expect)
    evar = sum((m - emean) ** 2 for m in expect) / len(expect)
    print(f"# pairs.png row means: variance {var:.3f}, the data's {evar:.3f}; max deviation "
          f"{dev:.3f}")
    check(dev <= 1, f"pairs.png: each row's mean is the data's (max deviation {dev:.2f} grey levels)")


def assess(path, plots):
    p = run([prog("eb-assess"), "--json", "--plots", plots, path], timeout=120)
    check(p.returncode == 0, f"eb-assess {os.path.basename(path)} exits 0 "
          f"({p.stderr.decode(errors='replace').strip()})")
    a = json.loads(p.stdout)
    for name, size in SIZES.items():
        png = os.path.join(plots, name)
        check(os.path.exists(png), f"{png} written")
        check(png_size(png) == size, f"{name} is {size[0]} x {size[1]}")
    # The text report says the same as the JSON one.
    t = run([prog("eb-assess"), path], check=True).stdout.decode()
    check(f"{a['sp800_90b']['min_entropy']:.4f} bits/sample = min(" in t,
          "the text report prints the JSON's min-entropy")
    return a


def ent(path):
    """Debian's ent in its terse CSV form: entropy, chi-square, mean, pi, correlation."""
    p = run(["ent", "-t", path], check=True)
    row = p.stdout.decode().strip().splitlines()[1].split(",")
    return {"entropy": float(row[2]), "chi_square": float(row[3]), "mean": float(row[4]),
            "monte_carlo_pi": float(row[5]), "serial_correlation": float(row[6])}


def same_as_ent(a, path, what):
    e = ent(path)
    ours = a["ent"]
    # ent prints six decimals: the figures agree to them.
    for k in ("entropy", "chi_square", "mean", "monte_carlo_pi"):
        check(abs(ours[k] - e[k]) <= 2e-6 + 1e-9 * abs(e[k]),
              f"{what}: {k} {ours[k]} as ent's {e[k]}")
    if ours["serial_correlation"] is None:
        # ent prints -100000 for "undefined" (every byte the same).
        check(e["serial_correlation"] == -100000, f"{what}: serial correlation undefined in both")
    else:
        check(abs(ours["serial_correlation"] - e["serial_correlation"]) <= 2e-6,
              f"{what}: serial correlation {ours['serial_correlation']} as ent's "
              f"{e['serial_correlation']}")


def test():
    need("ent")
    tmp = tempfile.mkdtemp(prefix="eb-assess-")
    b = Broker({"src": {"role": "source", "unix-uid": os.getuid(), "key": False}},
               capacity=1 << 31).start()
    try:
        # A directory given by mistake is named for what it is.
        p = run([prog("eb-assess"), tmp])
        err = p.stderr.decode()
        check(p.returncode != 0 and "Is a directory" in err and tmp in err,
              f"eb-assess on a directory says so ({p.returncode}: {err.strip()})")
        # 1 MB of /dev/urandom: the pairs plot shows its counts and nothing else.
        rnd = os.path.join(tmp, "urandom")
        with open("/dev/urandom", "rb") as f:
            data = f.read(1 << 20)
        with open(rnd, "wb") as f:
            f.write(data)
        rplots = os.path.join(tmp, "urandom-plots")
        os.mkdir(rplots)
        assess(rnd, rplots)
        check_pairs_plot(os.path.join(rplots, "pairs.png"), data)
        # The histogram's count axis has ticks at round numbers, not only 0 and the expected
        # count: tick marks are dark pixels just left of the frame (x 66-69).
        hist = png_pixels(os.path.join(rplots, "histogram.png"))
        ticks = [y for y in range(1, len(hist)) if sum(hist[y][67]) < 200 <= sum(hist[y - 1][67])]
        check(len(ticks) >= 4, f"histogram.png: the count axis has {len(ticks)} ticks")
        # A capture of eb-source-jitter, the way docs/sources.md's figures are taken.
        raw = os.path.join(tmp, "jitter.raw")
        p = run([prog("eb-source-jitter"), "-b", b.unix, "--dump-raw", raw, "--samples",
                 str(SAMPLES)], timeout=300)
        check(p.returncode == 0 and os.path.getsize(raw) == SAMPLES,
              f"eb-source-jitter wrote {SAMPLES} raw samples "
              f"({p.stderr.decode(errors='replace').strip()[-200:]})")
        zero = os.path.join(tmp, "zero.raw")
        with open(zero, "wb") as f:
            f.write(bytes(SAMPLES))

        j = assess(raw, os.path.join(tmp, "jitter"))
        z = assess(zero, os.path.join(tmp, "zero"))
        print(f"# jitter: {json.dumps(j)}")
        print(f"# zero: {json.dumps(z)}")

        # The zero source: nothing, and the health tests say so.
        check(z["sp800_90b"]["min_entropy"] < 0.001, "zero: ~0 bits of min-entropy per sample")
        check(z["ent"]["entropy"] < 0.001, "zero: ~0 bits per byte by ent's measure")
        check(z["health"]["state"] == "failed" and z["health"]["alarms"] > 0 and
              z["health"]["credited"] == 0, "zero: the health tests fail it and credit nothing")
        check(z["health"]["claim_raised"], "zero: the tests ran at the least claim they can")

        # The jitter capture: several bits per sample, as docs/sources.md reports (4.4-4.9 on
        # 10^6 samples); well above the 1 bit eb-source-jitter claims.
        check(j["bits"] == 8, "jitter: 8-bit samples")
        check(j["sp800_90b"]["min_entropy"] > 2.0,
              f"jitter: min-entropy {j['sp800_90b']['min_entropy']:.3f} > 2 bits per sample")
        check(j["ent"]["entropy"] > 5.0, f"jitter: {j['ent']['entropy']:.3f} > 5 bits per byte")
        # At the 1 bit per sample eb-source-jitter claims (at its estimate an alarm is a matter
        # of chance: alpha per sample, and the estimate sits near the truth).
        p = run([prog("eb-assess"), "--json", "--claim", "1", raw], check=True)
        h = json.loads(p.stdout)["health"]
        check(h["state"] == "ok" and h["alarms"] == 0 and h["credited"] > SAMPLES * 0.99 and
              (h["rct_cutoff"], h["apt_cutoff"]) == (21, 311),
              f"jitter: the health tests at its claim of 1 bit (cutoffs 21, 311) pass: {h}")

        # The statistics are ent's, checked against ent itself.
        same_as_ent(j, raw, "jitter")
        same_as_ent(z, zero, "zero")

        # Refusals: too short to estimate, and a missing file, each with exit 1 and the name.
        short = os.path.join(tmp, "short.raw")
        with open(short, "wb") as f:
            f.write(os.urandom(999))
        for path in (short, os.path.join(tmp, "missing.raw")):
            p = run([prog("eb-assess"), path])
            check(p.returncode == 1 and os.path.basename(path) in p.stderr.decode(),
                  f"{os.path.basename(path)} refused with exit 1, named")
        p = run([prog("eb-assess"), "--bits", "4", raw])
        check(p.returncode == 1 and "--bits 4" in p.stderr.decode(),
              "samples wider than --bits are refused")
    finally:
        b.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


main(test)
