#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""udev/60-entropy-broker.rules: the real udev parses it cleanly (`udevadm verify` where udev has
it, 253 and later; `udevadm test` on this machine's hw_random device in a private mount namespace
otherwise, so that no device node or udev database is touched), and for every known RNG a small
evaluator of the rules says which unit is wanted: eb-source-stream@hwrng.service for /dev/hwrng,
eb-source-stream@<tty>.service with ModemManager told to keep off for each TrueRNG and the OneRNG,
nothing for FTDI's generic 0403:6015 (the Infinite Noise's ID), a pinned serial TRNG only when
an admin's rule names its serial, eb-source-stream@chaoskeyN.service for each ChaosKey or Alea
(the chaoskey driver's usbmisc node), eb-ekeyd@ plus eb-source-egd@ on its socket for each Simtec
Entropy Key, nothing for other serial devices or on remove. The VM suite plugs real (emulated) devices in."""
import os
import re
import shutil
import subprocess
import tempfile

from eblib import check, main, run

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(SRC, "udev", "60-entropy-broker.rules")
CAPTURE = os.path.join(SRC, "udev", "70-entropy-broker-capture.rules")

# The keys and operators this file may use, as udev(7) spells them.
MATCH_KEYS = {"ACTION", "SUBSYSTEM", "KERNEL", "ATTRS", "ATTR", "ENV", "DRIVERS", "TAG"}
ASSIGN_KEYS = {"ENV", "TAG", "GROUP", "MODE", "OWNER", "GOTO", "LABEL", "SYMLINK", "RUN"}
TOKEN = re.compile(r'\s*([A-Z_]+)(?:\{([^}]+)\})?\s*(==|!=|\+=|-=|:=|=)\s*"([^"]*)"\s*(,|$)')


def parse(text, name="rules"):
    """Returns [(line number, [(key, attr, op, value), ...])]; raises on a malformed line."""
    rules = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pos, tokens = 0, []
        while pos < len(line):
            m = TOKEN.match(line, pos)
            if not m:
                raise ValueError(f"{name}:{n}: cannot parse at {line[pos:]!r}")
            key, attr, op, value, comma = m.groups()
            if op in ("==", "!=") and key not in MATCH_KEYS:
                raise ValueError(f"{name}:{n}: {key} is not a match key")
            if op not in ("==", "!=") and key not in ASSIGN_KEYS:
                raise ValueError(f"{name}:{n}: {key} cannot be assigned")
            if key in ("ATTRS", "ATTR", "ENV") and not attr:
                raise ValueError(f"{name}:{n}: {key} needs {{attribute}}")
            tokens.append((key, attr, op, value))
            pos = m.end()
            if comma == "" and pos < len(line):
                raise ValueError(f"{name}:{n}: missing comma before {line[pos:]!r}")
        rules.append((n, tokens))
    labels = {v for _, t in rules for k, _, _, v in t if k == "LABEL"}
    for n, t in rules:
        for k, _, _, v in t:
            if k == "GOTO" and v not in labels:
                raise ValueError(f"{name}:{n}: GOTO to unknown label {v}")
    return rules


def glob_match(pattern, value):
    """udev's patterns: *, ?, [...] and | between alternatives."""
    if value is None:
        return False
    for alt in pattern.split("|"):
        rx = ""
        i = 0
        while i < len(alt):
            c = alt[i]
            if c == "*":
                rx += ".*"
            elif c == "?":
                rx += "."
            elif c == "[":
                j = alt.index("]", i)
                rx += alt[i:j + 1]
                i = j
            else:
                rx += re.escape(c)
            i += 1
        if re.fullmatch(rx, value):
            return True
    return False


def evaluate(rules, dev):
    """Runs the rules over dev = {action, subsystem, kernel, attrs (of a parent), env} and returns
    (env, tags, group, mode) as udev would leave them."""
    env, tags, group, mode = dict(dev.get("env", {})), set(), None, None
    skip_to = None
    for _, tokens in rules:
        if skip_to is not None:
            if ("LABEL", None, "=", skip_to) in tokens:
                skip_to = None
            continue
        matched = True
        for key, attr, op, value in tokens:
            if op not in ("==", "!="):
                continue
            have = {"ACTION": dev.get("action"), "SUBSYSTEM": dev.get("subsystem"),
                    "KERNEL": dev.get("kernel"), "ATTRS": dev.get("attrs", {}).get(attr),
                    "ATTR": dev.get("attr", {}).get(attr),
                    "ENV": env.get(attr)}.get(key)
            ok = glob_match(value, have) if value != "" else not have
            if op == "!=":
                ok = not ok
            if not ok:
                matched = False
                break
        if not matched:
            continue
        for key, attr, op, value in tokens:
            value = value.replace("%k", dev.get("kernel", ""))
            value = re.sub(r"\$env\{([A-Z_]+)\}", lambda m: env.get(m.group(1), ""), value)
            if key == "ENV" and op in ("=", ":="):
                env[attr] = value
            elif key == "ENV" and op == "+=":
                env[attr] = (env.get(attr, "") + " " + value).strip()
            elif key == "TAG" and op in ("+=", "="):
                tags.add(value)
            elif key == "GROUP":
                group = value
            elif key == "MODE":
                mode = value
            elif key == "GOTO":
                skip_to = value
        if skip_to is not None and any(t == ("LABEL", None, "=", skip_to) for t in tokens):
            skip_to = None
    return env, tags, group, mode


def wants(rules, dev):
    env, tags, _, _ = evaluate(rules, dev)
    units = env.get("SYSTEMD_WANTS", "").split()
    if units and "systemd" not in tags:
        raise AssertionError(f"{dev['kernel']}: SYSTEMD_WANTS without TAG systemd")
    return units, env


def tty(kernel, vid, pid, serial="0001", action="add"):
    return {"action": action, "subsystem": "tty", "kernel": kernel,
            "attrs": {"idVendor": vid, "idProduct": pid, "serial": serial}}


def udev_parses(text, name="60-entropy-broker.rules"):
    """The real udev's parser on the rules: `udevadm verify` when there is one; otherwise
    `udevadm test` on hw_random with the rules as the only ones in /etc/udev/rules.d, in a mount
    namespace with private /dev and /run/udev (udevadm test applies modes to device nodes)."""
    tmp = tempfile.mkdtemp(prefix="eb-udev-")
    try:
        rules_dir = os.path.join(tmp, "rules.d")
        os.mkdir(rules_dir)
        path = os.path.join(rules_dir, name)
        with open(path, "w") as f:
            f.write(text)
        v = run(["udevadm", "verify", "--help"])
        if v.returncode == 0:
            p = run(["udevadm", "verify", path])
            return "verify", p.returncode == 0, (p.stdout + p.stderr).decode()
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            return "none", None, "needs root and unshare for udevadm test"
        if not os.path.exists("/sys/devices/virtual/misc/hw_random"):
            return "none", None, "needs a hw_random device for udevadm test"
        script = ("mount --bind \"$1\" /etc/udev/rules.d && mount -t tmpfs tmpfs /dev && "
                  "mount -t tmpfs tmpfs /run && "
                  "udevadm test --action=add /sys/devices/virtual/misc/hw_random")
        p = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                 rules_dir])
        out = (p.stdout + p.stderr).decode()
        problems = [l for l in out.splitlines() if f"{name}:" in l and
                    re.search(r"(?i)invalid|error|unknown|ignoring|failed", l) and
                    "Unknown group 'eb-source'" not in l]
        ok = p.returncode == 0 and f"Reading rules file: /etc/udev/rules.d/{name}" in out and not problems
        return "test", ok, out if not ok else "\n".join(l for l in out.splitlines() if l.startswith(("SYSTEMD_WANTS", "TAGS")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test():
    with open(RULES) as f:
        text = f.read()
    rules = parse(text, "60-entropy-broker.rules")
    check(len(rules) >= 6, f"the rules parse ({len(rules)} rules)")

    # The parser must be able to fail, or its silence proves nothing.
    for bad, what in [('SUBSYSTEM=="tty" ATTRS{idVendor}=="04d8"', "a missing comma"),
                      ('SUBSYSTEM=="tty", GOTO="nowhere"', "a GOTO to no label"),
                      ('ATTRS=="04d8"', "a key without its attribute")]:
        try:
            parse(bad)
            check(False, f"the parser catches {what}")
        except ValueError:
            check(True, f"the parser catches {what}")

    how, ok, out = udev_parses(text)
    if how == "none":
        print(f"# real udev parser not run: {out}")
    else:
        check(ok, f"udevadm {how} accepts the rules: {out.strip()[-600:]}")
        if how == "test":
            check("SYSTEMD_WANTS=eb-source-stream@hwrng.service" in out,
                  "udevadm test: the real hw_random device wants eb-source-stream@hwrng.service")
            # And the check catches a broken file.
            how, ok, out = udev_parses(text.replace('KERNEL=="hw_random",',
                                                    'KERNEL=="hw_random" BOGUS{x}="1",'))
            check(ok is False, "udevadm test catches a broken rule")

    hwrng = {"action": "add", "subsystem": "misc", "kernel": "hw_random",
             "attr": {"rng_current": "virtio_rng.0"}}
    units, _ = wants(rules, dict(hwrng, attr={"rng_current": "none"}))
    check(units == [], "hw_random with no driver behind it (rng_current none) wants nothing")
    units, env = wants(rules, hwrng)
    check(units == ["eb-source-stream@hwrng.service"], f"/dev/hwrng wants {units}")
    _, _, group, mode = evaluate(rules, hwrng)
    check(group == "eb-source" and mode == "0640", "/dev/hwrng is readable by group eb-source")

    # A virtio-rng hotplugged into a running VM: hw_random gets no event of its own then.
    vrng = {"action": "add", "subsystem": "virtio", "kernel": "virtio3",
            "env": {"MODALIAS": "virtio:d00000004v00001AF4"}}
    units, _ = wants(rules, vrng)
    check(units == ["eb-source-stream@hwrng.service"], f"a hotplugged virtio-rng wants {units}")
    units, _ = wants(rules, dict(vrng, env={"MODALIAS": "virtio:d00000001v00001AF4"}))
    check(units == [], "a virtio network device wants nothing")
    units, _ = wants(rules, dict(vrng, action="remove"))
    check(units == [], "nothing is started when the virtio-rng goes")

    known = {("04d8", "f5fe"): "truerng", ("16d0", "0aa0"): "truerng",
             ("04d8", "ebb5"): "truerng", ("1d50", "6086"): "onerng"}
    for i, ((vid, pid), kind) in enumerate(sorted(known.items())):
        units, env = wants(rules, tty(f"ttyACM{i}", vid, pid))
        check(units == [f"eb-source-stream@ttyACM{i}.service"],
              f"{vid}:{pid} ({kind}) as ttyACM{i} wants {units}")
        check(env.get("ID_MM_DEVICE_IGNORE") == "1", f"{vid}:{pid}: ModemManager ignores it")
        check(env.get("EB_STREAM_TYPE") == kind, f"{vid}:{pid}: EB_STREAM_TYPE={kind}")
        units, _ = wants(rules, tty(f"ttyACM{i}", vid, pid, action="remove"))
        check(units == [], f"{vid}:{pid}: nothing is started on remove")

    # Two of a kind: one instance each.
    a, _ = wants(rules, tty("ttyACM0", "04d8", "f5fe", "A"))
    b, _ = wants(rules, tty("ttyACM1", "04d8", "f5fe", "B"))
    check(a != b and len(a) == len(b) == 1, f"two TrueRNGs get an instance each ({a}, {b})")

    for vid, pid, what in [("0403", "6015", "FTDI's generic FT-X (Infinite Noise's ID)"),
                           ("2341", "0043", "an Arduino"), ("1d50", "60c6", "a ChaosKey")]:
        units, env = wants(rules, tty("ttyUSB0", vid, pid))
        check(units == [] and "ID_MM_DEVICE_IGNORE" not in env,
              f"{vid}:{pid} ({what}) is left alone")

    # An admin pins a serial TRNG the rules do not know by serial, in a rule that sorts first.
    pin = ('SUBSYSTEM=="tty", ATTRS{idVendor}=="2341", ATTRS{idProduct}=="0043", '
           'ATTRS{serial}=="1234ABCD", ENV{EB_STREAM_TYPE}="serial"\n')
    pinned = parse(pin + text, "59-local.rules + 60-entropy-broker.rules")
    units, env = wants(pinned, tty("ttyACM0", "2341", "0043", "1234ABCD"))
    check(units == ["eb-source-stream@ttyACM0.service"] and env.get("ID_MM_DEVICE_IGNORE") == "1",
          f"a pinned serial TRNG (serial 1234ABCD) wants {units}")
    units, _ = wants(pinned, tty("ttyACM1", "2341", "0043", "OTHER"))
    check(units == [], "another of its kind with a different serial is still left alone")
    check("infnoise" not in text.replace("Infinite Noise", ""),
          "the rules no longer offer the Infinite Noise a tty path that cannot work")

    # ChaosKey and Alea: the kernel's chaoskey driver makes a usbmisc device per key.
    for i, (vid, pid) in enumerate([("1d50", "60c6"), ("12d8", "0001")]):
        key = {"action": "add", "subsystem": "usbmisc", "kernel": f"chaoskey{i}",
               "attrs": {"idVendor": vid, "idProduct": pid}}
        units, _ = wants(rules, key)
        check(units == [f"eb-source-stream@chaoskey{i}.service"],
              f"{vid}:{pid} as /dev/chaoskey{i} wants {units}")
        _, _, group, mode = evaluate(rules, key)
        check(group == "eb-source" and mode == "0640",
              f"/dev/chaoskey{i} is readable by group eb-source ({group} {mode})")
        units, _ = wants(rules, dict(key, action="remove"))
        check(units == [], f"/dev/chaoskey{i}: nothing is started on remove")
    units, _ = wants(rules, {"action": "add", "subsystem": "usbmisc", "kernel": "hiddev0"})
    check(units == [], "another usbmisc device (hiddev0) wants nothing")

    # ComScire QNG: the USB device itself, told from every other FTDI chip by its serial number.
    def usb(vid, pid, serial, busnum="001", devnum="004", action="add"):
        return {"action": action, "subsystem": "usb", "kernel": "1-2",
                "attr": {"idVendor": vid, "idProduct": pid, "serial": serial},
                "env": {"DEVTYPE": "usb_device", "BUSNUM": busnum, "DEVNUM": devnum}}
    for pid, serial, devnum in [("6001", "QWR20042", "004"), ("6014", "QWR31234", "017")]:
        dev = usb("0403", pid, serial, devnum=devnum)
        units, _ = wants(rules, dev)
        check(units == [f"eb-source-qng@bus-usb-001-{devnum}.service"],
              f"a QNG (0403:{pid}, serial {serial}) wants {units}")
        _, _, group, mode = evaluate(rules, dev)
        check(group == "eb-source" and mode == "0660",
              f"the QNG's USB node is group eb-source's to open ({group} {mode})")
        units, _ = wants(rules, dict(dev, action="remove"))
        check(units == [], f"QNG {serial}: nothing is started on remove")
    p = run(["systemd-escape", "--unescape", "--", "bus-usb-001-004"])
    check(p.stdout.decode().strip() == "bus/usb/001/004",
          "the QNG unit's %I is its node under /dev (bus/usb/001/004)")
    for pid, serial, what in [("6001", "A10KZP3Q", "an FT232 serial adapter"),
                              ("6001", "QWR31234", "an R32MU's serial on an FT232's ID"),
                              ("6014", "QWR20042", "an R2000KU's serial on an FT232H's ID"),
                              ("6015", "QWR20042", "FTDI's generic FT-X")]:
        dev = usb("0403", pid, serial)
        units, _ = wants(rules, dev)
        _, _, group, _ = evaluate(rules, dev)
        check(units == [] and group is None, f"0403:{pid} serial {serial} ({what}) is left alone")
    units, env = wants(rules, tty("ttyUSB0", "0403", "6001", "QWR20042"))
    check(units == [] and env.get("ID_MM_DEVICE_IGNORE") == "1",
          f"a QNG's tty, while ftdi_sio has it: ModemManager ignores it, nothing reads it ({units})")
    units, env = wants(rules, tty("ttyUSB0", "0403", "6001", "A10KZP3Q"))
    check(units == [] and "ID_MM_DEVICE_IGNORE" not in env, "an FT232 adapter's tty is left alone")

    # Simtec Entropy Key: Debian's ekeyd and an EGD source on its socket, one pair per key.
    for i, serial in enumerate(("EK1", "EK2")):
        units, env = wants(rules, tty(f"ttyACM{i}", "20df", "0001", serial))
        check(units == [f"eb-ekeyd@ttyACM{i}.service",
                        f"eb-source-egd@-run-ekey-ttyACM{i}-egd.sock.service"],
              f"an Entropy Key as ttyACM{i} wants ekeyd and its EGD source ({units})")
        check(env.get("ID_MM_DEVICE_IGNORE") == "1" and "EB_STREAM_TYPE" not in env,
              f"ttyACM{i}: ModemManager ignores it and no stream source reads it")
        units, _ = wants(rules, tty(f"ttyACM{i}", "20df", "0001", serial, action="remove"))
        check(units == [], f"ttyACM{i}: nothing is started on remove")
    # The EGD source's instance is the socket the ekeyd unit makes: the escaped path of
    # RuntimeDirectory=ekey/%i plus the configuration's EGDUnixSocket.
    with open(os.path.join(SRC, "units", "eb-ekeyd@.service.in")) as f:
        unit = f.read()
    with open(os.path.join(SRC, "units", "eb-ekeyd.conf")) as f:
        conf = f.read()
    p = run(["systemd-escape", "--unescape", "--", "-run-ekey-ttyACM0-egd.sock"])
    sock = p.stdout.decode().strip()
    check(sock == "/run/ekey/ttyACM0/egd.sock" and "RuntimeDirectory=ekey/%i\n" in unit and
          re.search(r'^EGDUnixSocket "egd.sock"', conf, re.M) and
          "PropagatesStopTo=eb-source-egd@-run-ekey-%i-egd.sock.service" in unit and
          "BindsTo=dev-%i.device" in unit,
          f"eb-source-egd@ reads the socket eb-ekeyd@ makes ({sock}), and stops with it")

    test_capture(rules)


def test_capture(stream_rules):
    """70-entropy-broker-capture.rules: a sound card input or a camera is a source only when an
    administrator tagged it, and then only a capture device; the example in the file's header
    does what it says."""
    with open(CAPTURE) as f:
        text = f.read()
    rules = parse(text, "70-entropy-broker-capture.rules")
    check(len(rules) >= 3, f"the capture rules parse ({len(rules)} rules)")
    how, ok, out = udev_parses(text, "70-entropy-broker-capture.rules")
    if how != "none":
        check(ok, f"udevadm {how} accepts the capture rules: {out.strip()[-600:]}")
        how, ok, out = udev_parses(text.replace('ENV{EB_SOURCE}=="audio",',
                                                'ENV{EB_SOURCE}=="audio" BOGUS{x}="1",'),
                                   "70-entropy-broker-capture.rules")
        check(ok is False, "udevadm test catches a broken capture rule")

    def sound(kernel, tag=None, action="add", card_id="PCH"):
        env = {"EB_SOURCE": tag} if tag else {}
        return {"action": action, "subsystem": "sound", "kernel": kernel, "env": env,
                "attrs": {"id": card_id}}

    def video(kernel, caps=":capture:", tag=None, action="add"):
        env = {"ID_V4L_CAPABILITIES": caps, "ID_SERIAL": "046d_0825_ABCDEF01"}
        if tag:
            env["EB_SOURCE"] = tag
        return {"action": action, "subsystem": "video4linux", "kernel": kernel, "env": env}

    # Never by default: every sound node and camera, untagged, wants nothing, here or in the
    # stream rules.
    for dev in (sound("pcmC0D0c"), sound("pcmC1D2c"), sound("controlC0"), sound("pcmC0D0p"),
                video("video0"), video("video1", ":capture:video_overlay:")):
        for r in (rules, stream_rules):
            units, _ = wants(r, dev)
            check(units == [], f"untagged {dev['subsystem']} {dev['kernel']} wants nothing")

    units, _ = wants(rules, sound("pcmC1D0c", "audio"))
    check(units == ["eb-source-audio@pcmC1D0c.service"], f"a tagged capture PCM wants {units}")
    units, _ = wants(rules, sound("pcmC12D3c", "audio"))
    check(units == ["eb-source-audio@pcmC12D3c.service"], f"card 12 device 3 wants {units}")
    for kernel, what in (("pcmC1D0p", "a playback PCM"), ("controlC1", "a control node")):
        units, _ = wants(rules, sound(kernel, "audio"))
        check(units == [], f"{what}, tagged audio, wants nothing")
    units, _ = wants(rules, sound("pcmC1D0c", "v4l"))
    check(units == [], "a capture PCM tagged v4l wants nothing")
    units, _ = wants(rules, sound("pcmC1D0c", "audio", action="remove"))
    check(units == [], "nothing is started when a tagged PCM goes")

    units, _ = wants(rules, video("video0", ":capture:video_overlay:", "v4l"))
    check(units == ["eb-source-v4l@video0.service"], f"a tagged camera wants {units}")
    units, _ = wants(rules, video("video3", ":video_output:", "v4l"))
    check(units == [], "a tagged video output wants nothing")
    units, _ = wants(rules, video("video0", ":capture:", "audio"))
    check(units == [], "a camera tagged audio wants nothing")
    units, _ = wants(rules, video("video0", ":capture:", "v4l", action="remove"))
    check(units == [], "nothing is started when a tagged camera goes")

    # The header's example local rules, as an administrator would copy them.
    local = "\n".join(l[1:].strip() for l in text.splitlines()
                      if re.match(r"#\s+SUBSYSTEM==", l))
    check(local.count("EB_SOURCE") == 2, "the header shows a local rule for each kind")
    both = parse(local + "\n" + text, "65-entropy-broker-local.rules + capture rules")
    units, _ = wants(both, sound("pcmC0D0c"))
    check(units == ["eb-source-audio@pcmC0D0c.service"],
          f"the example tags card PCH's capture PCM 0: it wants {units}")
    units, _ = wants(both, sound("pcmC0D0c", card_id="Loopback"))
    check(units == [], "and leaves another card's alone")
    units, _ = wants(both, video("video2"))
    check(units == ["eb-source-v4l@video2.service"],
          f"the example tags the camera by ID_SERIAL: it wants {units}")


main(test)
