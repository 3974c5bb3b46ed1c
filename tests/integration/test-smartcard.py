#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""eb-source-smartcard against Debian's pcscd with the vsmartcard virtual reader (vpcd) and card
(vicc, an ISO 7816 card that answers GET CHALLENGE): the challenges reach a broker and are
credited at the source's H; the card taken out (vicc stopped) and put back, and pcscd itself
stopped and started again, are both survived by the same process. pcscd runs in a private mount
namespace with its own /run/pcscd (its socket path is fixed) and its own reader.conf.d with the
virtual reader on a free port, so neither a pcscd of this machine nor another test is touched;
the source finds it through $PCSCLITE_CSOCK_NAME. Where nothing made /run/pcscd yet (pcscd.socket
never started, as on a machine without systemd running), the test makes the empty directory
that the bind mount needs; it is left in place, as pcscd.socket would leave it."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from eblib import SKIP, Broker, check, main, prog, reserve_port, wait_for

VPCD = "/usr/lib/pcsc/drivers/serial/libifdvpcd.so"
# Debian 12's python3-virtualsmartcard installs its package under site-packages/virtualsmartcard
# (not on Python's path) and imports Crypto, while Debian's pycryptodome is Cryptodome.
VICC_PATH = "/usr/lib/python3/site-packages/virtualsmartcard"
CRYPTO_SHIM = "import sys, Cryptodome\nsys.modules[__name__] = Cryptodome\n"


def skip(why):
    print(f"SKIP: {why}")
    raise SystemExit(SKIP)


def wait_source(cond, timeout, what, log=None):
    """eblib.wait_for(), with the tail of the source's log when it fails."""
    return wait_for(what, cond, timeout,
                    detail=(lambda: f"the source's log: {log()[-800:]}") if log else None)


class Pcsc:
    def __init__(self, tmp):
        self.tmp = tmp
        self.run = os.path.join(tmp, "run")
        self.conf = os.path.join(tmp, "reader.conf.d")
        os.makedirs(self.run)
        os.makedirs(self.conf)
        self.port_holder, self.port = reserve_port()
        with open(os.path.join(self.conf, "vpcd"), "w") as f:
            f.write(f'FRIENDLYNAME "EB test PCD"\nDEVICENAME /dev/null:0x{self.port:X}\n'
                    f"LIBPATH {VPCD}\nCHANNELID 0x{self.port:X}\n")
        shim = os.path.join(tmp, "shim")
        os.makedirs(shim)
        with open(os.path.join(shim, "Crypto.py"), "w") as f:
            f.write(CRYPTO_SHIM)
        self.vicc_env = dict(os.environ, PYTHONPATH=f"{shim}:{VICC_PATH}")
        self.sock = os.path.join(self.run, "pcscd.comm")
        self.pcscd = self.vicc = None

    def start_pcscd(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        log = open(os.path.join(self.tmp, "pcscd.log"), "ab")
        script = 'mount --bind "$1" /run/pcscd && exec pcscd --foreground --config "$2"'
        self.pcscd = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh",
                                       "-c", script, "sh", self.run, self.conf],
                                      stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        wait_source(lambda: os.path.exists(self.sock) or self.pcscd.poll() is not None, 20,
                 "pcscd makes its socket")
        if self.pcscd.poll() is not None:
            skip(f"pcscd did not start: {open(os.path.join(self.tmp, 'pcscd.log')).read()[-300:]}")

    def stop_pcscd(self):
        if self.pcscd and self.pcscd.poll() is None:
            self.pcscd.send_signal(signal.SIGTERM)
            self.pcscd.wait(20)
        self.pcscd = None

    def insert(self):
        """Starts vicc, again while it gives up at once: vpcd takes a moment to listen again
        after its last card left, and vicc exits when its connection is refused."""
        deadline = time.time() + 60
        while True:
            log = open(os.path.join(self.tmp, "vicc.log"), "ab")
            self.vicc = subprocess.Popen(["vicc", "--type", "iso7816", "--port", str(self.port)],
                                         env=self.vicc_env, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)
            try:
                rc = self.vicc.wait(3)
            except subprocess.TimeoutExpired:
                return
            if time.time() > deadline:
                check(False, f"vicc connects to vpcd on port {self.port} (vicc exited {rc}): " +
                      open(os.path.join(self.tmp, "vicc.log"), errors="replace").read()[-300:] +
                      " pcscd: " +
                      open(os.path.join(self.tmp, "pcscd.log"), errors="replace").read()[-300:])

    def remove(self):
        if self.vicc and self.vicc.poll() is None:
            self.vicc.send_signal(signal.SIGTERM)
            try:
                self.vicc.wait(20)
            except subprocess.TimeoutExpired:
                self.vicc.kill()
                self.vicc.wait()
        self.vicc = None

    def cleanup(self):
        self.remove()
        self.stop_pcscd()
        self.port_holder.close()


def size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def test():
    for tool in ("pcscd", "vicc", "unshare"):
        if shutil.which(tool) is None:
            skip(f"needs {tool} (packages pcscd, vsmartcard-vpicc, util-linux)")
    if not os.path.exists(VPCD):
        skip("needs the vpcd reader driver (package vsmartcard-vpcd)")
    if not os.path.isdir(VICC_PATH):
        skip(f"needs python3-virtualsmartcard in {VICC_PATH}")
    if os.geteuid() != 0:
        skip("needs root to give pcscd a private /run/pcscd (a mount namespace and a bind mount)")
    # The mount point for the private /run/pcscd. Never removed: the other build's run of this
    # test may have its own bind mount on it at this moment.
    os.makedirs("/run/pcscd", mode=0o755, exist_ok=True)

    tmp = tempfile.mkdtemp(prefix="eb-smartcard-")
    pcsc = Pcsc(tmp)
    broker = Broker({"alice": {"role": "source", "max-credit-per-byte": 8},
                     "admin": {"role": "admin"}})
    src = None
    try:
        broker.start()
        pcsc.start_pcscd()
        pcsc.insert()

        raw = os.path.join(tmp, "raw")
        total = 4096
        env = dict(os.environ, PCSCLITE_CSOCK_NAME=pcsc.sock, EB_LOG_TARGET="console")
        out = open(os.path.join(tmp, "source.log"), "wb")
        started = time.time()
        src = subprocess.Popen([prog("eb-source-smartcard"), "-b", broker.tcp, "-u", "alice", "-k",
                                broker.keys["alice"], "-v", "--dump-raw", raw, "--samples", str(total)],
                               env=env, stdout=out, stderr=subprocess.STDOUT)
        log = lambda: open(os.path.join(tmp, "source.log"), errors="replace").read()

        wait_source(lambda: "Taking challenges from the card in \"EB test PCD" in log(), 60,
                 "the source takes challenges from the virtual card", log)
        check(True, "the source found the virtual card through pcscd")
        wait_source(lambda: size(raw) >= 2048, 60, "2048 bytes of challenges are sampled", log)

        # The card taken out and put back.
        pcsc.remove()
        wait_source(lambda: re.search(r"Lost the card|was taken out", log()), 60,
                 "the source notices the card is gone", log)
        check(True, "the source notices the card was taken out")
        before = size(raw)
        pcsc.insert()
        wait_source(lambda: size(raw) > before + 512, 60, "challenges resume after the card is back", log)
        check(True, f"challenges resume once the card is back ({before} -> {size(raw)} bytes)")

        # pcscd itself stopped and started again: the source waits and comes back.
        pcsc.remove()
        pcsc.stop_pcscd()
        before = size(raw)
        pcsc.start_pcscd()
        pcsc.insert()
        wait_source(lambda: size(raw) > before + 512, 90, "challenges resume after pcscd restarts",
                 log)
        check(True, f"challenges resume after pcscd restarts ({before} -> {size(raw)} bytes)")

        rc = src.wait(120)
        text = log()
        check(rc == 0, f"eb-source-smartcard exits 0 after --samples {total} (got {rc}): {text[-500:]}")
        check(size(raw) == total, f"--dump-raw holds every sample ({size(raw)} of {total})")
        with open(raw, "rb") as f:
            data = f.read()
        check(len(set(data)) > 200, f"the challenges look random ({len(set(data))} values)")
        m = re.search(r"Took (\d+) samples \((\d+) admitted.*?(\d+) bits credited of (\d+) claimed",
                      text, re.S)
        check(m is not None, f"the source reports what it did: {text[-300:]}")
        took, admitted, credited, claimed = map(int, m.groups())
        check(took == total, f"took {took} samples")
        # Two bits a byte for every admitted sample: the start-up test's 1024 are not credited.
        check(admitted >= total - 1024 - 1024 and credited == claimed == admitted * 2,
              f"credited {credited} bits = 2 x {admitted} admitted samples (claimed {claimed})")
        status = broker.status()
        check(status["bits_in"] == credited,
              f"the broker credited exactly that ({status['bits_in']} bits)")
        print(f"# rate: {took} challenge bytes in {time.time() - started:.1f} s, with the card "
              "taken out and pcscd restarted on the way")
    finally:
        if src and src.poll() is None:
            src.kill()
            src.wait()
        pcsc.cleanup()
        broker.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


main(test)
