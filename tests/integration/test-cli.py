#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The command-line contract of every program in the build: --help, --version, exit 2 with a
clear message for an unknown option, a missing argument, an invalid broker address and a key
file others may read; and a man page for each program that documents every option --help
lists. A program added to the build without an entry here or a man page fails this test."""
import os
import re
import shutil
import tempfile

from eblib import BUILD, check, main, run, write_key

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN = os.path.join(SRC, "docs", "man")
CLIENTS = ("eb-source-file", "eb-source-kernel", "eb-sink-file", "eb-sink-kernel", "eb-sink-egd",
           "eb-brokerctl", "eb-source-jitter", "eb-source-timers", "eb-proxy-knuth",
           "eb-source-stream", "eb-source-egd", "eb-source-exec", "eb-source-audio",
           "eb-source-v4l")
# Sources that take no device argument and sample their own hardware (USB devices, smart cards).
CLIENTS += ("eb-source-usb", "eb-source-smartcard")
# A ComScire QNG: its USB node is optional (the first QNG found).
CLIENTS += ("eb-source-qng",)
CLIENTS += ("eb-metrics",)
BAD_URIS = ("bogus://x", "tcp://", "tcp://host:99999", "tcp://[::1", "unix:relative/path",
            "vsock://notacid")


def project_version():
    if os.environ.get("EB_VERSION"):
        return os.environ["EB_VERSION"]
    with open(os.path.join(SRC, "meson.build")) as f:
        m = re.search(r"project\([^)]*?version\s*:\s*'([^']+)'", f.read(), re.S)
    if not m:
        raise RuntimeError("no version in meson.build")
    return m.group(1)


def programs():
    """Every eb-* executable the build made, by name."""
    found = {}
    for sub in ("daemon", "sources", "sinks", "tools"):
        d = os.path.join(BUILD, sub)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else ():
            path = os.path.join(d, name)
            if name.startswith("eb-") and os.path.isfile(path) and os.access(path, os.X_OK):
                found[name] = path
    return found


class Cli:
    def __init__(self, tmp):
        self.tmp = tmp
        # No sockets, credentials or journal from whoever runs the tests: messages on stderr.
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("LISTEN_") and k not in (
                        "CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "JOURNAL_STREAM",
                        "EB_LOG_LEVEL")}
        self.env["EB_LOG_TARGET"] = "console"

    def __call__(self, path, *args, env=None):
        p = run([path, *args], timeout=20, env=env or self.env, cwd=self.tmp)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def usage_error(cli, path, args, needles, what, env=None):
    rc, out, err = cli(path, *args, env=env)
    missing = [n for n in needles if n not in err]
    check(rc == 2 and not missing,
          f"{what}: exit 2 (got {rc}) and a message with {needles} (stderr: {err.strip()!r})")


def man_page(name):
    for section in ("1", "8"):
        path = os.path.join(MAN, f"{name}.{section}")
        if os.path.exists(path):
            return path, section
    return None, None


def test():
    version = project_version()
    progs = programs()
    check({"eb-brokerd", "eb-keygen", "eb-assess", *CLIENTS} <= set(progs),
          f"the build has every program this test knows ({', '.join(progs)})")
    tmp = tempfile.mkdtemp(prefix="eb-cli-")
    cli = Cli(tmp)
    try:
        data = os.path.join(tmp, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(64))
        good_key = os.path.join(tmp, "good.key")
        write_key(good_key)
        open_key = os.path.join(tmp, "group-readable.key")
        write_key(open_key)
        os.chmod(open_key, 0o640)
        with open(os.path.join(SRC, "docs", "meson.build")) as f:
            docs_meson = f.read()

        # What each program needs besides the option under test, to reach the check.
        rest = {
            "eb-source-file": [data],
            "eb-source-kernel": [],
            "eb-source-jitter": [],
            "eb-source-timers": [],
            "eb-source-stream": [data],
            "eb-source-egd": [os.path.join(tmp, "no-egd.sock")],
            "eb-source-exec": ["--", "true"],
            # The broker and key are checked before the device is opened: none is needed.
            "eb-source-audio": ["/dev/snd/pcmC99D0c"],
            "eb-source-v4l": ["/dev/video-none"],
            "eb-proxy-knuth": ["-a", "m", data, data],
            "eb-sink-file": ["--bytes", "32"],
            "eb-sink-kernel": ["--oneshot"],
            "eb-sink-egd": [],
            "eb-brokerctl": ["status"],
        }
        rest.update({"eb-source-usb": [], "eb-source-smartcard": [], "eb-source-qng": []})
        rest["eb-metrics"] = []
        known = {"eb-brokerd", "eb-keygen", "eb-assess", *CLIENTS}

        for name, path in progs.items():
            # --help and --version.
            rc, out, err = cli(path, "--help")
            check(rc == 0 and out.startswith("Usage:") and err == "",
                  f"{name} --help exits 0 and prints Usage: (got {rc}, {err.strip()!r})")
            help_text = out
            rc, out, _ = cli(path, "--version")
            check(rc == 0 and out.split() == [name, "(entropy-broker)", version],
                  f"{name} --version exits 0 and prints {version} (got {rc}, {out.strip()!r})")

            # Unknown options, short and long.
            usage_error(cli, path, ["--no-such-option"], ["no-such-option"],
                        f"{name} --no-such-option")
            usage_error(cli, path, ["-Z"], ["Z"], f"{name} -Z")

            # The man page: there, installed, clean, naming every option --help lists.
            page, section = man_page(name)
            check(page is not None, f"{name} has a man page in docs/man")
            base = os.path.basename(page)
            check(f"'man/{base}'" in docs_meson, f"docs/meson.build installs {base}")
            check(f"{name}({section})" in help_text, f"{name} --help points to {name}({section})")
            with open(page) as f:
                roff = f.read()
            text = roff.replace("\\-", "-")
            for opt in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", help_text))):
                check(opt in text, f"{base} documents {opt}")
            for sect in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "EXAMPLES",
                         "SEE ALSO"):
                check(f".SH {sect}" in roff, f"{base} has a {sect} section")
            if shutil.which("groff"):
                p = run(["groff", "-man", "-ww", "-z", page])
                check(p.returncode == 0 and p.stderr == b"",
                      f"{base} renders without warnings ({p.stderr.decode().strip()!r})")

            # The rest of this test knows each program's required arguments: teach it a new one.
            check(name in known, f"{name} is covered by the checks below in test-cli.py")

        # Missing required arguments, each named in the error.
        b = progs["eb-brokerd"]
        usage_error(cli, b, ["--config"], ["--config"], "eb-brokerd --config without PATH")
        usage_error(cli, b, ["--listen"], ["--listen"], "eb-brokerd --listen without URI")
        usage_error(cli, b, ["-c", os.path.join(tmp, "missing.conf")], ["missing.conf"],
                    "eb-brokerd -c with a file that does not exist")
        conf = os.path.join(tmp, "nolisten.conf")
        with open(conf, "w") as f:
            f.write("[broker]\nseed-file =\n")
        usage_error(cli, b, ["-c", conf], ["Nothing to listen on", "--listen", "listen="],
                    "eb-brokerd with nothing to listen on")
        usage_error(cli, b, ["unexpected"], ['"unexpected"'], "eb-brokerd with an argument")
        k = progs["eb-keygen"]
        usage_error(cli, k, [], ["PATH"], "eb-keygen without PATH")
        a = progs["eb-assess"]
        usage_error(cli, a, [], ["FILE"], "eb-assess without FILE")
        usage_error(cli, a, ["--bits", "9", data], ['--bits "9"'], "eb-assess --bits 9")
        usage_error(cli, a, ["--claim", "0", data], ['--claim "0"'], "eb-assess --claim 0")
        usage_error(cli, a, ["--plots"], ["--plots"], "eb-assess --plots without DIR")
        usage_error(cli, progs["eb-source-file"], ["-b", "unix:/nonexistent"], ["PATH"],
                    "eb-source-file without PATH")
        usage_error(cli, progs["eb-sink-file"], ["-b", "unix:/nonexistent"], ["--bytes"],
                    "eb-sink-file without --bytes")
        usage_error(cli, progs["eb-brokerctl"], ["-b", "unix:/nonexistent"], ["status"],
                    "eb-brokerctl without a command")
        usage_error(cli, progs["eb-brokerctl"], ["frobnicate"], ['"frobnicate"', "status"],
                    "eb-brokerctl with an unknown command")
        for name in CLIENTS:
            p = progs[name]
            usage_error(cli, p, ["--broker"], ["--broker"], f"{name} --broker without URI")
            usage_error(cli, p, ["--key-file"], ["--key-file"], f"{name} --key-file without PATH")
            if name not in ("eb-brokerctl", "eb-metrics"):  # they have a default broker
                usage_error(cli, p, rest[name], ["--broker"], f"{name} without --broker")
            usage_error(cli, p, ["-b", "tcp://127.0.0.1:1", "-k", good_key, *rest[name]],
                        ["--user", "tcp://127.0.0.1:1"], f"{name} with a TLS broker and no --user")
            # Over plain unix: the broker knows a peer by its uid: -u and -k would be ignored.
            for extra in (["-u", "alice"], ["-k", good_key]):
                usage_error(cli, p, ["-b", "unix:/nonexistent", *extra, *rest[name]],
                            ["unix:/nonexistent", "--user and --key-file are for TLS brokers"],
                            f"{name} {extra[0]} with a unix: broker")

        # Invalid broker addresses, quoted in the error.
        for uri in BAD_URIS:
            usage_error(cli, b, ["-l", uri], [f'"{uri}"'], f"eb-brokerd -l {uri}")
            for name in CLIENTS:
                usage_error(cli, progs[name], ["-b", uri, *rest[name]], [f'"{uri}"'],
                            f"{name} -b {uri}")
        # The message lists every kind of address a client takes, unix+tls: and srv: included.
        for name in CLIENTS:
            usage_error(cli, progs[name], ["-b", "bogus://x", *rest[name]],
                        ["tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH, vsock://CID[:PORT], "
                         "virtio:NAME or srv:NAME"], f"{name}: the address syntax in full")

        # What every source shares through eb_cli_source_parse(): a bad value names its option
        # and exits 2 before anything runs, in every program that takes the option.
        sources = [n for n in CLIENTS if n.startswith("eb-source-") or n == "eb-proxy-knuth"]
        credit = ("eb-source-file", "eb-source-exec", "eb-proxy-knuth", "eb-source-kernel")
        capped = ("eb-source-file", "eb-source-exec", "eb-proxy-knuth")
        estimate = ("eb-source-egd", "eb-source-stream", "eb-source-qng")  # --min-entropy, 0-8
        measured = ("eb-source-jitter", "eb-source-timers",  # --min-entropy 0.001-8
                    "eb-source-audio", "eb-source-v4l")
        measured += ("eb-source-usb", "eb-source-smartcard")
        bad_bits = ("8.001", "x", "-1", "1e3", "")
        no_dir = os.path.join(tmp, "no", "such", "dir", "raw")
        too_many = " ".join(["unix:/nonexistent"] * 17)
        for name in sources:
            p, r = progs[name], rest[name]
            ok = ["-b", "unix:/nonexistent"]
            usage_error(cli, p, [*ok, "--samples", "0", *r], ['--samples "0"'],
                        f"{name} --samples 0")
            usage_error(cli, p, [*ok, "--dump-raw", no_dir, *r], ["--dump-raw", no_dir],
                        f"{name} --dump-raw in a missing directory")
            usage_error(cli, p, r, ["$EB_BROKER"], f"{name} with 17 brokers in $EB_BROKER",
                        env=dict(cli.env, EB_BROKER=too_many))
            opts = ((["--credit-per-byte", "--min-entropy"] if name in credit else []) +
                    (["--max-credit-per-byte"] if name in capped else []) +
                    (["--min-entropy"] if name in estimate else []))
            for opt in opts:
                for bad in bad_bits:
                    usage_error(cli, p, [*ok, opt, bad, *r], [f'{opt} "{bad}"', "0-8 bits"],
                                f"{name} {opt} {bad!r}")
                usage_error(cli, p, [*ok, f"{opt}=9", *r], [f'{opt} "9"'], f"{name} {opt}=9")
            if name in measured:
                for bad in ("0", "8.5", "x"):
                    usage_error(cli, p, [*ok, "--min-entropy", bad, *r],
                                [f'--min-entropy "{bad}"', "0.001-8 bits"],
                                f"{name} --min-entropy {bad}")
            for opt in ("--credit-per-byte", "--max-credit-per-byte"):
                if opt not in opts:
                    usage_error(cli, p, [*ok, opt, "1", *r], [opt], f"{name} has no {opt}")
            if not r:  # it takes no arguments
                usage_error(cli, p, [*ok, "extra"], ['"extra"'], f"{name} with an argument")

        # A key file its group may read is refused, by path, with the fix.
        for name in CLIENTS:
            p = progs[name]
            usage_error(cli, p, ["-b", "tcp://127.0.0.1:1", "-u", "alice", "-k", open_key,
                                 *rest[name]], [open_key, "chmod 0600"],
                        f"{name} -k with a 0640 key file")
            # The default key, the credential eb.key, is held to the same rule.
            creds = os.path.join(tmp, "creds")
            os.makedirs(creds, exist_ok=True)
            shutil.copy(open_key, os.path.join(creds, "eb.key"))
            os.chmod(os.path.join(creds, "eb.key"), 0o640)
            env = dict(cli.env, CREDENTIALS_DIRECTORY=creds)
            usage_error(cli, p, ["-b", "tcp://127.0.0.1:1", "-u", "alice", *rest[name]],
                        [os.path.join(creds, "eb.key"), "chmod 0600"],
                        f"{name} with a 0640 credential eb.key", env=env)
        conf = os.path.join(tmp, "openkey.conf")
        with open(conf, "w") as f:
            f.write(f"[broker]\nseed-file =\n\n[user alice]\nrole = source\nkey-file = {open_key}\n")
        usage_error(cli, b, ["-c", conf, "-l", f"unix:{os.path.join(tmp, 'b.sock')}"],
                    [open_key, "chmod 0600"], "eb-brokerd with a 0640 key-file=")

        # eb-keygen writes what the others accept, and never overwrites it.
        new_key = os.path.join(tmp, "new.key")
        rc, _, err = cli(k, new_key)
        check(rc == 0 and os.stat(new_key).st_mode & 0o777 == 0o600,
              f"eb-keygen writes a key with mode 0600 ({err.strip()!r})")
        with open(new_key) as f:
            check(re.fullmatch(r"[0-9a-f]{64}\n", f.read()) is not None,
                  "the key is 64 hexadecimal digits and a newline")
        rc, _, err = cli(k, new_key)
        check(rc == 1 and new_key in err, f"eb-keygen refuses to overwrite it ({err.strip()!r})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main(test)
