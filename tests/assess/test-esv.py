#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-assess esv, the evidence kit (eb-assess(1), section ESV), on real sources:

- eb-source-jitter at its own claim writes the whole folder: a raw file of the samples asked
  for, a restart file of restarts x samples, results.json valid against
  docs/assess-esv.schema.json, a summary with every figure, SHA256SUMS that sha256sum -c
  verifies; the figures are those eb-assess gives on the same files, and the claim is the one
  the source states;
- a stub source (eb-source-exec running a program of 2-bit samples) claiming 6 bits fails with
  exit 3 naming the claim criterion, and the program ran once for the raw file and once per
  restart: real restarts, not a loop inside it;
- eb-source-jitter claiming 8 bits fails the same way;
- a source whose every restart gives the same samples (eb-source-file on one file) fails the
  restart sanity check, by name.

The jitter run is a smaller trial (100,000 samples, 20 restarts), which results.json must call not
ESV-sized, checked against eb-assess on its raw file; with --full, an ESV-sized one too
(1,000,000 samples, 1,000 restarts of 1,000: about 15 s on two idle cores), checked against
eb-assess --restart on its restart file.

Usage: test-esv.py EB_ASSESS EB_SOURCE_JITTER EB_SOURCE_EXEC EB_SOURCE_FILE SCHEMA [--full]"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import jsonschema

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


ASSESS, JITTER, EXEC, FILE, SCHEMA = sys.argv[1:6]
FULL = "--full" in sys.argv[6:]
# A restart's samples: the 1,000 SP 800-90B asks for; fewer restarts in the small trials.
SMALL = ["--samples", "100000", "--restarts", "20", "--samples-per-restart", "1000"]
FILES = ["raw.bin", "restart.bin", "capture.log", "results.json", "summary.md", "SHA256SUMS"]


def esv(out, args, source, expect, env=None):
    """Runs eb-assess esv -o out ARGS SOURCE...; checks its exit code, returns (json, stderr)."""
    p = subprocess.run([ASSESS, "esv", "-o", out] + args + source, capture_output=True,
                       text=True, timeout=600, env=env)
    check(p.returncode == expect,
          f"eb-assess esv {' '.join(args)} exits {expect}, not {p.returncode}: {p.stderr}")
    check(sorted(os.listdir(out)) == sorted(FILES),
          f"the folder holds exactly {FILES} (no temporary file left): {os.listdir(out)}")
    with open(os.path.join(out, "results.json")) as f:
        result = json.load(f)
    with open(SCHEMA) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    try:
        jsonschema.validate(result, schema, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as e:
        raise Failed(f"results.json is valid against the schema: {e.message} at "
                     f"{list(e.absolute_path)}")
    sums = subprocess.run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=out,
                          capture_output=True, text=True)
    check(sums.returncode == 0, f"sha256sum -c SHA256SUMS verifies: {sums.stdout}{sums.stderr}")
    with open(os.path.join(out, "SHA256SUMS")) as f:
        listed = [line.split("  ", 1)[1].strip() for line in f]
    check(sorted(listed) == sorted(set(FILES) - {"SHA256SUMS"}),
          f"SHA256SUMS lists every other file: {listed}")
    return result, p.stderr


def criterion(result, name):
    return next(c for c in result["criteria"] if c["name"] == name)


def assess_json(args):
    p = subprocess.run([ASSESS, "--json"] + args, capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"eb-assess {args} runs: {p.stderr}")
    return json.loads(p.stdout)


def jitter_writes_the_folder(tmp, full):
    out = os.path.join(tmp, "jitter")
    # A broker in the environment, as a unit's EnvironmentFile= gives one: a capture donates
    # nothing and waits for no broker (this one does not exist; the source would retry forever).
    env = dict(os.environ, EB_BROKER="unix:" + os.path.join(tmp, "no-broker.sock"))
    result, _ = esv(out, [] if full else SMALL, [JITTER], 0, env)
    reg, seq, rs = result["registration"], result["sequential"], result["restart"]
    samples, restarts, length = (1000000, 1000, 1000) if full else (100000, 20, 1000)
    check(os.path.getsize(os.path.join(out, "raw.bin")) == samples,
          f"raw.bin holds {samples} samples")
    check(os.path.getsize(os.path.join(out, "restart.bin")) == restarts * length,
          f"restart.bin holds {restarts} x {length} samples")
    check((reg["raw_samples"], reg["restarts"], reg["samples_per_restart"]) ==
          (samples, restarts, length), f"the registration says the sizes: {reg}")
    check(reg["esv_sized"] is full, f"esv_sized is {full}")
    check(reg["bits_per_sample"] == 8, "8-bit samples, as the source states")
    check(result["source"]["stated_h"] == 1.0 and result["source"]["stated_h_from"] == "source",
          f"the stated H is the source's own claim, 1 bit: {result['source']}")
    check(result["verdict"] == "pass" and all(c["result"] == "pass" for c in result["criteria"]),
          f"jitter at its claim passes every criterion: {result['criteria']}")
    check([c["vetted"] for c in reg["conditioning"]] == [True],
          f"one conditioning component, the broker's vetted SHA-512: {reg['conditioning']}")
    check(result["command"][:2] == [ASSESS, "esv"], f"the command is recorded: {result['command']}")

    # The figures are eb-assess's own on the same files (the raw file's in the small trial only:
    # the large one's cost 10-20 s again, for the same code).
    if not full:
        plain = assess_json([os.path.join(out, "raw.bin")])["sp800_90b"]
        check(plain["min_entropy"] == seq["min_entropy"] and plain["literal"] == seq["literal"]
              and plain["bitstring"] == seq["bitstring"],
              f"the raw file's estimates are eb-assess's on raw.bin: {plain} against {seq}")
    check(rs["h_i"] == min(1.0, seq["min_entropy"]), f"H_I = min(estimate, claim): {rs}")
    want = min(seq["min_entropy"], rs["h_rows"], rs["h_columns"])
    check(abs(reg["h_estimate"] - want) < 1e-6,
          f"the H estimate is the least assessment, {want}: {reg['h_estimate']}")
    if full:
        again = assess_json(["--restart", str(rs["h_i"]), os.path.join(out, "restart.bin")])
        r = again["restart"]
        check((r["cutoff"], r["row_max"], r["column_max"], r["h_rows"], r["h_columns"]) ==
              (rs["cutoff_rows"], rs["row_max"], rs["column_max"], rs["h_rows"],
               rs["h_columns"]), f"the restart figures are eb-assess --restart's: {r} {rs}")

    # The summary carries every figure.
    with open(os.path.join(out, "summary.md")) as f:
        summary = f.read()
    figures = [reg["h_estimate"], seq["min_entropy"], rs["h_rows"], rs["h_columns"]]
    figures += [v for v in list(seq["literal"].values()) + list(seq["bitstring"].values()) if v]
    for v in figures:
        check(f"{v:.6f}" in summary, f"summary.md has {v:.6f}")
    for v in (rs["cutoff_rows"], rs["row_max"], rs["column_max"], samples, restarts, length):
        check(re.search(rf"\b{v}\b", summary), f"summary.md has {v}")
    check("Verdict: **pass**" in summary, "summary.md gives the verdict")
    check(("not the sizes of a registration" in summary) is not full,
          "summary.md says when the trial is smaller than ESV's")
    print(f"# jitter: H estimate {reg['h_estimate']}, {restarts} restarts took "
          f"{result['capture']['restart_seconds']:.1f} s")


@test
def jitter_small_trial(tmp):
    jitter_writes_the_folder(tmp, False)


if FULL:
    @test
    def jitter_esv_sized(tmp):
        jitter_writes_the_folder(tmp, True)


# A program of 2-bit samples (min-entropy 2 bits at most; 8 x H_bitstring far below), recording
# each start in a file so that the restarts can be counted.
STUB = """import os, sys
with open(sys.argv[1], "a") as f:
    f.write("%d\\n" % os.getpid())
while True:
    sys.stdout.buffer.write(bytes(b & 3 for b in os.urandom(4096)))
"""


@test
def stub_claiming_too_much_fails(tmp):
    out, starts = os.path.join(tmp, "stub"), os.path.join(tmp, "starts")
    args = ["--samples", "10000", "--restarts", "10", "--samples-per-restart", "1000"]
    source = [EXEC, "--credit-per-byte", "6", "--max-credit-per-byte", "8", "--",
              sys.executable, "-c", STUB, starts]
    result, err = esv(out, args, source, 3)
    check(result["source"]["stated_h"] == 6.0, f"the stub states 6 bits: {result['source']}")
    check(result["registration"]["h_estimate"] < 2.0,
          f"the data support less than 2 bits: {result['registration']['h_estimate']}")
    check(criterion(result, "claim")["result"] == "fail" and result["verdict"] == "fail",
          f"the claim criterion fails: {result['criteria']}")
    check("ESV criterion claim failed: the stated H, 6.000 bits per sample, is above the H "
          "estimate" in err, f"the failure is named on stderr: {err}")
    with open(starts) as f:
        pids = f.read().split()
    check(len(pids) == 11 and len(set(pids)) == 11,
          f"the program was started 1 + 10 times, each a new process: {len(pids)} starts")


@test
def jitter_claiming_8_bits_fails(tmp):
    result, err = esv(os.path.join(tmp, "jitter8"), SMALL, [JITTER, "--min-entropy", "8"], 3)
    check(criterion(result, "claim")["result"] == "fail",
          f"8 bits per jitter sample is more than the data support: {result['criteria']}")
    check("ESV criterion claim failed" in err, f"named on stderr: {err}")


@test
def repeating_restarts_fail(tmp):
    data = os.path.join(tmp, "data.bin")
    with open(data, "wb") as f:
        f.write(os.urandom(200000))
    result, err = esv(os.path.join(tmp, "file"), ["--samples", "100000", "--restarts", "20",
                                                  "--samples-per-restart", "1000"],
                      [FILE, "--credit-per-byte", "1", data], 3)
    check(criterion(result, "claim")["result"] == "pass",
          f"random bytes support a claim of 1 bit: {result['criteria']}")
    rs = result["restart"]
    check(rs["sanity"] == "fail" and rs["column_max"] == 20,
          f"every column is one value 20 times, above the cutoff: {rs}")
    check("ESV criterion restart-sanity failed" in err, f"named on stderr: {err}")


@test
def refusals(tmp):
    out = os.path.join(tmp, "exists")
    os.mkdir(out)
    p = subprocess.run([ASSESS, "esv", "-o", out, JITTER], capture_output=True, text=True)
    check(p.returncode == 1 and "must not exist" in p.stderr,
          f"an existing folder is refused: {p.returncode} {p.stderr}")
    p = subprocess.run([ASSESS, "esv", JITTER], capture_output=True, text=True)
    check(p.returncode == 2 and "-o DIR" in p.stderr, f"no -o is a usage error: {p.stderr}")
    p = subprocess.run([ASSESS, "esv", "-o", os.path.join(tmp, "n"), "--restarts", "1",
                        JITTER], capture_output=True, text=True)
    check(p.returncode == 2 and "--restarts" in p.stderr, f"1 restart is refused: {p.stderr}")


def main():
    print(f"1..{len(TESTS)}")
    failed = 0
    for i, fn in enumerate(TESTS, 1):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            try:
                fn(tmp)
                print(f"ok {i} - {fn.__name__} ({time.monotonic() - start:.1f} s)")
            except Failed as e:
                failed += 1
                print(f"not ok {i} - {fn.__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
