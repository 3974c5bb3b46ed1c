#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seeded data sets that eb-assess is compared on with NIST's SP 800-90B reference tool
(tests/assess/sp90b-reference.tsv holds that tool's figures for them). Every set comes from
Python's Mersenne Twister seeded with the set's own number, so the files are the same on every
machine and Python 3 version.

    sp90b-sets.py [--samples N] DIR [NAME...]

writes DIR/NAME.bin (one sample per byte) for each named set, or every set; --samples (default
1,000,000) cuts each set short, keeping its first N samples."""

import argparse
import os
import random
import sys

SAMPLES = 1000000


def iid8(rng, n):
    """Uniform bytes: H = 8."""
    return rng.randbytes(n)


def biased(rng, n):
    """3-bit samples, 0 with probability 1/2 and 1-7 alike otherwise: H = 1."""
    return bytes(0 if rng.random() < 0.5 else rng.randrange(1, 8) for _ in range(n))


def markov(rng, n):
    """Bits, one a byte, that repeat the last with probability 0.8: H = -log2(0.8) = 0.32."""
    out = bytearray(n)
    b = 0
    for i in range(n):
        if rng.random() >= 0.8:
            b ^= 1
        out[i] = b
    return bytes(out)


def periodic(rng, n):
    """A fixed 300-byte pattern over and over, 10 % of its samples replaced by random bytes: a
    period no lag predictor of depth 128 sees. H is about 0.15."""
    pattern = rng.randbytes(300)
    out = bytearray(pattern[i % 300] for i in range(n))
    for i in range(n):
        if rng.random() < 0.1:
            out[i] = rng.randrange(256)
    return bytes(out)


def counter(rng, n):
    """A 7-bit counter with one random bit below it: H = 1."""
    return bytes(((i & 0x7F) << 1) | rng.getrandbits(1) for i in range(n))


def uniform4(rng, n):
    """Uniform 4-bit samples: H = 4."""
    return bytes(b & 0x0F for b in rng.randbytes(n))


def bits8(rng, n):
    """Independent bits with P(1) = 0.8, eight to a byte: H = 8 x -log2(0.8) = 2.58."""
    out = bytearray(n)
    for i in range(n):
        v = 0
        for _ in range(8):
            v = v << 1 | (rng.random() < 0.8)
        out[i] = v
    return bytes(out)


def sticky(rng, n):
    """Bytes that repeat the one before with probability 1/2, else uniform: H = -log2(1/2 +
    1/512) = 0.99."""
    out = bytearray(n)
    v = 0
    for i in range(n):
        if rng.random() >= 0.5:
            v = rng.randrange(256)
        out[i] = v
    return bytes(out)


def gauss(rng, n):
    """An ADC's noise: round(N(128, 3)), clipped to a byte; IID, H = -log2(P(128)) = 2.91."""
    return bytes(min(255, max(0, round(rng.gauss(128, 3)))) for _ in range(n))


SETS = {f.__name__: (seed, f) for seed, f in enumerate(
    [iid8, biased, markov, periodic, counter, uniform4, bits8, sticky, gauss], start=1)}


def main():
    ap = argparse.ArgumentParser(description="Writes SP 800-90B comparison sets.")
    ap.add_argument("--samples", type=int, default=SAMPLES)
    ap.add_argument("dir")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if not 1 <= args.samples <= SAMPLES:
        sys.exit(f"--samples {args.samples}: expected 1 to {SAMPLES}")
    for name in args.names or SETS:
        if name not in SETS:
            sys.exit(f"Unknown set '{name}'; the sets are {', '.join(SETS)}.")
        seed, f = SETS[name]
        data = f(random.Random(seed), SAMPLES)[:args.samples]
        with open(os.path.join(args.dir, name + ".bin"), "wb") as out:
            out.write(data)


if __name__ == "__main__":
    main()
