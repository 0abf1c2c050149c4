"""One cache for a fleet: sealfs daemons on several "hosts" over one GlusterFS
volume (issue 16, label shared).

The fixture (gluster_cluster.py) starts glusterd, a replica-2 volume from two
bricks and one FUSE client mount of it per host; every host runs its own
sealfs daemon (tilelang profile, cache_timeout=1) over its own client mount,
as a fleet sharing a network cache does. Writers and loaders are separate
processes following TileLang's save and load protocol
(tilelang_protocol.py), and TileLang-protocol loads run on every host while
the faults happen. A load is a hit, a miss, or *corrupt* (files present, bytes
not what params.pkl says): corrupt must never happen.

Printed (look for "shared:"): how long a publish on one host takes to show on
another, how long damage done through one host's client takes to hide the
entry on another, the GlusterFS client's own entry and attribute cache
delays, R8's stamps as GlusterFS reports them, and each fault's outcome.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Callable, Optional

import gluster_cluster as gc
import sealfs_mount as sm
import tilelang_protocol as tp

PROTOCOL = str(Path(__file__).with_name("tilelang_protocol.py"))
CACHE_TIMEOUT_S = 1
OPTIONS = ["profile=tilelang", f"cache_timeout={CACHE_TIMEOUT_S}"]
HOSTS = 4
FAULT_EXIT = 75  # the daemon's exit status at an injected fault (SEALFS_FAULT_STEP)
# A directory publish's steps (core/store/publish.hpp), in order.
DIR_PUBLISH_STEPS = ("files_synced", "validated", "manifest_written", "dst_cleared", "renamed", "dir_synced")
PROTOCOL_TIMEOUT_S = 60
# Slack on top of cache_timeout + the client's own delay: process start-up
# and polling on 2 busy cores.
MARGIN_S = 1.0
# A daemon over GlusterFS has been seen to take over 20 s to exit after its
# unmount on a loaded machine (cause not found yet): allow a minute.
DAEMON_EXIT_TIMEOUT_S = 60
REPLACES = 25  # R6: file-entry replaces on one host while another reads

# How a host mounts a GlusterFS volume that sealfs uses as B: no client-side
# caching of names, attributes or small files' contents, because sealfs
# caches above it (cache_timeout) and must judge what the bricks hold. With
# GlusterFS's defaults (entry and attribute timeouts of 1 s, md-cache,
# quick-read, open-behind) a host can pair a freshly replaced file with its
# previous sidecar, call the new file damaged and quarantine it for every
# host, and readers get ESTALE during replaces (R6): see fs/README.md
# "Shared backing stores" for the figures.
CLIENT_OPTIONS = ("--entry-timeout=0", "--attribute-timeout=0", "--negative-timeout=0")
VOLUME_OPTIONS = (("performance.stat-prefetch", "off"), ("performance.quick-read", "off"),
                  ("performance.open-behind", "off"))

CLUSTER: Optional[gc.GlusterCluster] = None
_stack = contextlib.ExitStack()


def setUpModule() -> None:
    global CLUSTER
    # SIGTERM or SIGINT still tears the cluster down (SIGKILL cannot: the
    # next run reaps what is left, gluster_cluster.reap_orphaned_clusters).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    atexit.register(_stack.close)
    t0 = time.monotonic()
    CLUSTER = _stack.enter_context(gc.GlusterCluster(hosts=HOSTS, client_options=CLIENT_OPTIONS,
                                                     volume_options=VOLUME_OPTIONS))
    report(f"cluster of {HOSTS} client mounts up in {time.monotonic() - t0:.1f}s ({CLUSTER.root}); "
           f"clients {' '.join(CLIENT_OPTIONS)}; volume {' '.join('='.join(kv) for kv in VOLUME_OPTIONS)}")


def tearDownModule() -> None:
    _stack.close()


def report(line: str) -> None:
    print(f"shared: {line}", flush=True)


# ---- TileLang protocol, one process per call, as separate programs ---------

def protocol(command: str, cache: str, ns: str, key: str, variant: str = "v1") -> tuple[int, str]:
    argv = [sys.executable, PROTOCOL, command, cache, key, "--ns", ns]
    if command == "save":
        argv += ["--variant", variant]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=PROTOCOL_TIMEOUT_S)
    return r.returncode, (r.stdout + r.stderr).strip()


# A long-running program per host that loads with TileLang's protocol
# (tilelang_protocol.load) on request: one line "cache\tns\tkey" in, one
# line "<exit code>\t<what it printed>" out. It spares a Python start-up per
# load, which on 2 busy cores is what the load loops would otherwise measure.
LOADER = f"""
import contextlib, io, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import tilelang_protocol as tp
for line in sys.stdin:
    cache, ns, key = line.rstrip("\\n").split("\\t")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            rc = tp.load(cache, ns, key)
        except OSError as e:
            rc = tp.EXIT_ERROR
            print(f"error: {{e}}")
    print(f"{{rc}}\\t{{out.getvalue().strip()}}".replace("\\n", " "), flush=True)
"""


class Loader:
    """One host's loading program (LOADER), used by one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None

    def load(self, cache: str, ns: str, key: str) -> tuple[int, str]:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = subprocess.Popen([sys.executable, "-c", LOADER], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, text=True)
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(f"{cache}\t{ns}\t{key}\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            if not line:
                self._proc = None
                return tp.EXIT_ERROR, "the loader died"
            rc, _, out = line.rstrip("\n").partition("\t")
            return int(rc), out

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.stdin.close()
                self._proc.wait(timeout=30)
                self._proc.stdout.close()
                self._proc = None


def wait_for(what: str, pred: Callable[[], bool], timeout: float, interval: float = 0.02) -> float:
    """Seconds until pred() holds; AssertionError after timeout."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout:.1f}s")
        time.sleep(interval)
    return time.monotonic() - t0


def variant_of(cache: str, ns: str, key: str) -> Optional[str]:
    """The variant recorded in a visible entry's params.pkl."""
    try:
        with open(os.path.join(cache, ns, "kernels", key, "params.pkl"), "rb") as f:
            return pickle.load(f)["variant"]
    except FileNotFoundError:
        return None


def write_foreign_entry(root: str, ns: str, key: str, variant: str) -> None:
    """A complete-looking entry written straight into B (no manifest)."""
    entry = os.path.join(root, ns, "kernels", key)
    os.makedirs(entry, exist_ok=True)
    for name, data in tp.contents(key, variant, 4096).items():
        with open(os.path.join(entry, name), "wb") as f:
            f.write(data)


def stage_entry(cache: str, ns: str, key: str, variant: str = "v1") -> str:
    """TileLang's save up to its last step: the staging directory, filled
    through tmp/; the caller renames it to <ns>/kernels/<key>."""
    staging = os.path.join(cache, ns, ".staging", f"{key}_{os.getpid()}_{random.getrandbits(32):08x}")
    os.makedirs(staging)
    os.makedirs(os.path.join(cache, ns, "kernels"), exist_ok=True)
    for name, data in tp.contents(key, variant, 4096).items():
        os.replace(tp.write_temp(cache, data), os.path.join(staging, name))
    return staging


class Fleet:
    """One sealfs daemon per host over `<host's client mount>/<name>`: the
    shared backing store B as each host sees it."""

    def __init__(self, name: str, hosts: range = range(HOSTS),
                 options_of: Optional[Callable[[int], list[str]]] = None) -> None:
        assert CLUSTER is not None
        self.name = name
        self.hosts = hosts
        self.options_of = options_of or (lambda h: OPTIONS)
        self.mounts: dict[int, sm.SealfsMount] = {}
        self.loaders = {h: Loader() for h in hosts}

    def __enter__(self) -> "Fleet":
        try:
            for h in self.hosts:
                self.start(h)
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> bool:
        for loader in self.loaders.values():
            loader.close()
        first: Optional[sm.MountError] = None
        for h in list(self.mounts):  # every host, even after one failed
            try:
                self.stop(h, quiet=exc[0] is not None)
            except sm.MountError as e:
                first = first or sm.MountError(f"host {h}: {e}")
        if first is not None:
            raise first
        return False

    def start(self, h: int, env: Optional[dict[str, str]] = None) -> sm.SealfsMount:
        m = sm.SealfsMount(options=self.options_of(h), backing=self.b(h), env=env,
                           exit_timeout=DAEMON_EXIT_TIMEOUT_S)
        m.__enter__()
        self.mounts[h] = m
        return m

    def stop(self, h: int, quiet: bool = False) -> None:
        m = self.mounts.pop(h)
        try:
            m.unmount()
        except sm.MountError:
            if not quiet:
                raise
        finally:
            m._close()

    def m(self, h: int) -> str:
        return self.mounts[h].mountpoint

    def b(self, h: int, rel: str = "") -> str:
        """B through host h's client, behind sealfs."""
        assert CLUSTER is not None
        base = os.path.join(CLUSTER.client(h), self.name)
        return os.path.join(base, rel) if rel else base

    def load(self, h: int, ns: str, key: str) -> tuple[int, str]:
        return self.loaders[h].load(self.m(h), ns, key)

    def save(self, h: int, ns: str, key: str, variant: str = "v1") -> tuple[int, str]:
        return protocol("save", self.m(h), ns, key, variant)

    def quarantined(self, h: int) -> list[str]:
        return self.mounts[h].quarantined_names()

    def make_namespace(self, ns: str) -> None:
        """Create a namespace's directories once, through host 0's mount,
        before several hosts save into it at once. GlusterFS 10.3 (this
        replica-2 volume, no sealfs in the way) answers EIO to some of four
        clients that create the same new directory at the same moment (77 of
        1,600 makedirs in 400 rounds of four plain clients racing on
        ns/.staging and ns/kernels, 40 of 400 through sealfs; in the CI run
        that met it, every later save into that namespace failed too), so a fleet creates its cache's directories once; the
        race under test is the publish, not GlusterFS's mkdir."""
        for sub in ("kernels", ".staging"):
            os.makedirs(os.path.join(self.m(0), ns, sub), exist_ok=True)


class LoadLoop:
    """TileLang-protocol loads on some hosts, over and over, until stopped:
    counts hits, misses, corrupt loads and errors per host."""

    def __init__(self, fleet: Fleet, hosts, keys: Callable[[], list[tuple[str, str]]], pause_s: float = 0.05):
        self.fleet, self.hosts, self.keys, self.pause_s = fleet, list(hosts), keys, pause_s
        self.counts = {h: {"hit": 0, "miss": 0, "corrupt": 0, "error": 0} for h in self.hosts}
        self.bad: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(h,), daemon=True) for h in self.hosts]

    def _run(self, h: int) -> None:
        rng = random.Random(h)
        while not self._stop.is_set():
            keys = self.keys()
            if keys:
                ns, key = rng.choice(keys)
                rc, out = self.fleet.load(h, ns, key)
                kind = {tp.EXIT_HIT: "hit", tp.EXIT_MISS: "miss", tp.EXIT_CORRUPT: "corrupt"}.get(rc, "error")
                self.counts[h][kind] += 1
                if kind in ("corrupt", "error"):
                    self.bad.append(f"host {h} {ns}/{key}: {kind}: {out}")
            self._stop.wait(self.pause_s)

    def __enter__(self) -> "LoadLoop":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=PROTOCOL_TIMEOUT_S + 10)
        return False

    def total(self, kind: str) -> int:
        return sum(c[kind] for c in self.counts.values())

    def summary(self) -> str:
        return ", ".join(f"{k} {self.total(k)}" for k in ("hit", "miss", "corrupt", "error"))


class SharedTestCase(sm.ScenarioTestCase):
    fleet_hosts = range(HOSTS)

    def host_options(self, h: int) -> list[str]:
        return OPTIONS

    def setUp(self) -> None:
        self.fleet = Fleet(self.id().rsplit(".", 1)[-1], self.fleet_hosts, self.host_options)
        self.fleet.__enter__()
        self.addCleanup(self.fleet.__exit__, None, None, None)

    def assert_hit(self, h: int, ns: str, key: str) -> None:
        rc, out = self.fleet.load(h, ns, key)
        self.assertEqual(rc, tp.EXIT_HIT, f"host {h}: {ns}/{key}: {out}")

    def wait_load(self, h: int, ns: str, key: str, want: int, timeout: float) -> float:
        """Seconds until a load on host h answers `want`; a corrupt load on the
        way fails at once."""
        def ok() -> bool:
            rc, out = self.fleet.load(h, ns, key)
            self.assertNotEqual(rc, tp.EXIT_CORRUPT, f"host {h}: {ns}/{key}: {out}")
            return rc == want
        return wait_for(f"host {h}: {ns}/{key} -> {want}", ok, timeout, 0.05)

    def assert_clean(self, loads: LoadLoop, what: str) -> None:
        report(f"{what}: loads during it: {loads.summary()}")
        self.assertEqual(loads.bad, [], f"{what}: corrupt loads or errors")
        self.assertGreater(loads.total("hit") + loads.total("miss"), 0, "the load loop ran no load")


# The delay after which damage done behind a host's back must be noticed:
# sealfs's cache_timeout plus the GlusterFS client's attribute timeout (1 s,
# measured in test_visibility_delays) plus slack.
DAMAGE_DEADLINE_S = CACHE_TIMEOUT_S + 1 + MARGIN_S + 2


class SeedScenariosAcrossHosts(SharedTestCase):
    """DESIGN's seed scenarios, with the save on one host, the damage through
    another host's client, and the check on both."""

    def test_saves_on_one_host_are_hits_on_another(self) -> None:
        keys = [f"k{i:02d}" for i in range(20)]
        with LoadLoop(self.fleet, [2, 3], lambda: [("ns", k) for k in keys]) as loads:
            for k in keys:
                rc, out = self.fleet.save(0, "ns", k)
                self.assertEqual(rc, 0, out)
            for k in keys:
                self.wait_load(1, "ns", k, tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        self.assert_clean(loads, "20 saves on host 0, hits on host 1")
        # Seed 1: the manifest covers the four files, with the library's digest.
        manifest = json.loads(Path(self.fleet.b(1, "ns/kernels/k00/.sealfs-manifest")).read_text())
        files = manifest["files"]
        self.assertEqual(sorted(files), sorted(tp.FILES))
        lib = Path(self.fleet.b(1, "ns/kernels/k00/kernel_lib.so")).read_bytes()
        self.assertEqual(files["kernel_lib.so"], {"size": len(lib), "sha256": hashlib.sha256(lib).hexdigest()})
        self.assertNotIn("sha256", files["device_kernel.cu"])

    def _damage_case(self, key: str, damage: Callable[[str], object], what: str) -> None:
        rc, out = self.fleet.save(0, "ns", key)
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", key, tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        self.assert_hit(0, "ns", key)
        with LoadLoop(self.fleet, [2, 3], lambda: [("ns", key)]) as loads:
            damage(self.fleet.b(1, f"ns/kernels/{key}/kernel_lib.so"))  # through host 1's client
            t1 = self.wait_load(1, "ns", key, tp.EXIT_MISS, DAMAGE_DEADLINE_S)
            t0 = self.wait_load(0, "ns", key, tp.EXIT_MISS, DAMAGE_DEADLINE_S)
        self.assert_clean(loads, f"{what} through host 1's client")
        report(f"{what}: a miss on host 1 after {t1:.2f}s, on host 0 after a further {t0:.2f}s")
        libs = [n for h in (0, 1) for n in self.fleet.quarantined(h)]
        self.assertTrue(any(self._slot_holds(n, key) for n in libs), f"{key} is not in quarantine: {libs}")
        # The program's own miss -> rebuild -> save path, on host 1, repairs it for host 0.
        rc, out = self.fleet.save(1, "ns", key)
        self.assertEqual(rc, 0, out)
        self.wait_load(0, "ns", key, tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        self.assert_hit(1, "ns", key)

    def _slot_holds(self, slot: str, key: str) -> bool:
        reason = Path(self.fleet.mounts[0].quarantine, slot, "reason.json")
        try:
            return key in reason.read_text()
        except OSError:
            return False

    def test_truncated_library_is_a_miss_on_both_and_repaired(self) -> None:
        self._damage_case("trunc", sm.truncate_file, "kernel_lib.so truncated")

    def test_zeroed_library_is_a_miss_on_both_and_repaired(self) -> None:
        self._damage_case("zeros", sm.zero_fill, "kernel_lib.so zeroed (same size)")

    def test_source_overwritten_same_size_stays_a_hit(self) -> None:
        rc, out = self.fleet.save(0, "ns", "src")
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", "src", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        sm.overwrite_same_size(self.fleet.b(1, "ns/kernels/src/device_kernel.cu"))
        time.sleep(DAMAGE_DEADLINE_S)  # past every cache: the change is seen
        for h in self.fleet.hosts:
            self.assert_hit(h, "ns", "src")
        with open(os.path.join(self.fleet.m(0), "ns/kernels/src/device_kernel.cu"), "rb") as f:
            self.assertEqual(set(f.read()), {ord("x")}, "host 0 does not see the new source bytes")

    def test_entry_without_manifest_is_a_miss_then_repaired(self) -> None:
        write_foreign_entry(self.fleet.b(1), "ns", "foreign", "planted")
        for h in self.fleet.hosts:
            rc, out = self.fleet.load(h, "ns", "foreign")
            self.assertEqual(rc, tp.EXIT_MISS, f"host {h}: {out}")
        rc, out = self.fleet.save(0, "ns", "foreign")
        self.assertEqual(rc, 0, f"the save over a foreign entry failed: {out}")
        for h in self.fleet.hosts:
            self.wait_load(h, "ns", "foreign", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
            self.assertEqual(variant_of(self.fleet.m(h), "ns", "foreign"), "v1")


class RacesAndFaults(SharedTestCase):

    def test_four_hosts_publish_the_same_keys_at_once(self) -> None:
        keys = [f"race{i}" for i in range(8)]
        results: dict[tuple[int, str], tuple[int, str]] = {}
        self.fleet.make_namespace("ns")

        def saver(h: int) -> None:
            for k in keys:
                results[(h, k)] = self.fleet.save(h, "ns", k, variant=f"host{h}")

        with LoadLoop(self.fleet, self.fleet.hosts, lambda: [("ns", k) for k in keys], pause_s=0.02) as loads:
            threads = [threading.Thread(target=saver, args=(h,)) for h in self.fleet.hosts]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assert_clean(loads, "4 hosts publishing 8 keys at once")
        for k in keys:
            outcome = {h: results[(h, k)][0] for h in self.fleet.hosts}
            winners = [h for h, rc in outcome.items() if rc == 0]
            self.assertEqual(len(winners), 1, f"{k}: {outcome} {[results[(h, k)][1] for h in outcome]}")
            self.assertTrue(all(rc in (0, tp.EXIT_LOST) for rc in outcome.values()), f"{k}: {outcome}")
            for h in self.fleet.hosts:
                self.wait_load(h, "ns", k, tp.EXIT_HIT, DAMAGE_DEADLINE_S)
                self.assertEqual(variant_of(self.fleet.m(h), "ns", k), f"host{winners[0]}",
                                 f"host {h} does not show the winner's {k}")
        report("4 hosts x 8 keys: one winner per key, every host on it; torn reads 0")

    def test_daemon_killed_at_each_publish_step(self) -> None:
        """A daemon on host 0 exits at a step of a directory publish (as kill -9
        would) while hosts 1-3 load the key; they must see the old state or
        the complete new entry, and the name can be published again."""
        outcomes = []
        # Over a foreign entry (a directory of hidden files, cleared by the
        # publish) where the destination matters; fresh before that.
        cases = [(step, "fresh") for step in DIR_PUBLISH_STEPS]
        cases += [(step, "foreign") for step in ("dst_cleared", "renamed")]
        for step, over in cases:
            key = f"{step}_{over}"
            if over == "foreign":
                write_foreign_entry(self.fleet.b(1), "ns", key, "planted")
            # A second daemon on host 0, over the same client mount, is the
            # one that crashes; host 0's own daemon stays up and then plays
            # "after the remount" (stopping a live daemon is what is slow, see
            # DAEMON_EXIT_TIMEOUT_S).
            crashing = sm.SealfsMount(options=OPTIONS, backing=self.fleet.b(0),
                                      env={"SEALFS_FAULT_STEP": step}, exit_timeout=DAEMON_EXIT_TIMEOUT_S)
            crashing.__enter__()
            crashing.expect_exit_status(FAULT_EXIT)
            try:
                with LoadLoop(self.fleet, [1, 2, 3], lambda: [("ns", key)], pause_s=0.02) as loads:
                    time.sleep(0.2)
                    rc, out = protocol("save", crashing.mountpoint, "ns", key)
                    status = crashing.wait_exit(20)
                    self.assertEqual(status, FAULT_EXIT, f"{key}: the daemon did not stop at {step} "
                                                         f"(save: {rc} {out})\n{crashing.log_text()}")
                    time.sleep(1)
            finally:
                crashing.__exit__(*sys.exc_info())
            seen = {h: self.fleet.load(h, "ns", key)[0] for h in (1, 2, 3)}
            self.assertEqual(loads.bad, [], f"{key}: corrupt loads or errors")
            self.assertTrue(all(rc in (tp.EXIT_HIT, tp.EXIT_MISS) for rc in seen.values()), f"{key}: {seen}")
            for h, rc in seen.items():
                if rc == tp.EXIT_HIT:
                    self.assertEqual(variant_of(self.fleet.m(h), "ns", key), "v1", f"{key} on host {h}")
            rc, out = self.fleet.save(0, "ns", key, variant="v1")
            self.assertIn(rc, (0, tp.EXIT_LOST), f"{key}: the save after the crash: {out}")
            for h in self.fleet.hosts:
                self.wait_load(h, "ns", key, tp.EXIT_HIT, DAMAGE_DEADLINE_S)
            state = "hit" if tp.EXIT_HIT in seen.values() else "miss"
            outcomes.append(f"{key}: others saw {state} ({loads.summary()}), then a hit everywhere")
        for line in outcomes:
            report(f"daemon killed at {line}")

    def test_writer_killed_mid_write(self) -> None:
        m0 = self.fleet.m(0)
        os.makedirs(os.path.join(m0, "ns", "blobs"), exist_ok=True)
        path = os.path.join(m0, "ns", "blobs", "half.bin")
        writer = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time\n"
             "f = open(sys.argv[1], 'wb')\n"
             "f.write(b'w' * (256 << 10)); f.flush()\n"
             "print('ready', flush=True)\n"
             "time.sleep(600)\n", path], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(writer.stdout.readline().strip(), "ready")
            time.sleep(DAMAGE_DEADLINE_S / 2)
            for h in (1, 2, 3):  # foreign there: no manifest covers it (R3)
                self.assertFalse(sm.exists_in_mount(os.path.join(self.fleet.m(h), "ns/blobs/half.bin")), f"host {h}")
            self.assertTrue(sm.exists_in_mount(path), "in progress on host 0: visible there (R4)")
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
            writer.stdout.close()
        wait_for("the abandoned file hidden on host 0", lambda: not sm.exists_in_mount(path), DAMAGE_DEADLINE_S)
        wait_for("the abandoned file in quarantine",
                 lambda: any("half.bin" in n or self._reason_mentions(n, "half.bin") for n in self.fleet.quarantined(0)),
                 DAMAGE_DEADLINE_S)
        for h in self.fleet.hosts:
            self.assertFalse(sm.exists_in_mount(os.path.join(self.fleet.m(h), "ns/blobs/half.bin")), f"host {h}")
        # A TileLang save killed while it writes its temp file (volatile tmp/):
        # nothing is published; another host's save then wins cleanly.
        saver = subprocess.Popen(
            [sys.executable, "-c",
             "import os, sys, time\n"
             "d = os.path.join(sys.argv[1], 'tmp'); os.makedirs(d, exist_ok=True)\n"
             "st = os.path.join(sys.argv[1], 'ns', '.staging', 'cut_1'); os.makedirs(st, exist_ok=True)\n"
             "open(os.path.join(st, 'params.pkl'), 'wb').write(b'x' * 100)\n"
             "f = open(os.path.join(d, 'tmp_lib'), 'wb'); f.write(b'\\x7fELF' + b'l' * 65536); f.flush()\n"
             "print('ready', flush=True); time.sleep(600)\n", m0], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(saver.stdout.readline().strip(), "ready")
        finally:
            saver.send_signal(signal.SIGKILL)
            saver.wait()
            saver.stdout.close()
        for h in self.fleet.hosts:
            rc, out = self.fleet.load(h, "ns", "cut")
            self.assertEqual(rc, tp.EXIT_MISS, f"host {h}: {out}")
        rc, out = self.fleet.save(2, "ns", "cut")
        self.assertEqual(rc, 0, out)
        for h in self.fleet.hosts:
            self.wait_load(h, "ns", "cut", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        report("writer killed mid-write: hidden on every host, quarantined by its own; "
               "a save killed mid-write: a miss everywhere, then repaired from another host")

    def _reason_mentions(self, slot: str, text: str) -> bool:
        try:
            return text in Path(self.fleet.mounts[0].quarantine, slot, "reason.json").read_text()
        except OSError:
            return False

    def test_brick_killed_and_restarted_under_load(self) -> None:
        assert CLUSTER is not None
        saved: list[tuple[str, str]] = []
        save_errors: list[str] = []
        stop = threading.Event()
        lock = threading.Lock()
        self.fleet.make_namespace("ns")

        def saver(h: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"h{h}_{i}"
                rc, out = self.fleet.save(h, "ns", key)
                with lock:
                    if rc == 0:
                        saved.append(("ns", key))
                    else:
                        save_errors.append(f"host {h} {key}: {rc} {out}")
                i += 1
                stop.wait(0.1)

        def snapshot() -> list[tuple[str, str]]:
            with lock:
                return list(saved)

        phases = {}
        with LoadLoop(self.fleet, self.fleet.hosts, snapshot) as loads:
            savers = [threading.Thread(target=saver, args=(h,)) for h in self.fleet.hosts]
            for t in savers:
                t.start()
            time.sleep(2)
            t0 = time.monotonic()
            CLUSTER.kill_brick(1)
            phases["kill"] = time.monotonic() - t0
            time.sleep(3)
            during = len(snapshot())
            t0 = time.monotonic()
            CLUSTER.start_missing_bricks()
            phases["restart"] = time.monotonic() - t0
            time.sleep(1)
            stop.set()
            for t in savers:
                t.join()
            removed_before = len(CLUSTER.removed_unhealable)
            phases["heal"] = CLUSTER.wait_healed()
            removed = CLUSTER.removed_unhealable[removed_before:]
            time.sleep(1)
        self.assert_clean(loads, "brick 1 killed and restarted")
        # Only the brick that was killed may hold what GlusterFS cannot heal.
        self.assertEqual([p for p in removed if not p.startswith(CLUSTER.brick(1) + os.sep)], [])
        self.assertEqual(save_errors, [], "saves failed while a brick was down")
        self.assertEqual(CLUSTER.bricks_differ(), [], "the replica did not heal")
        for ns, key in snapshot():
            for h in self.fleet.hosts:
                self.assert_hit(h, ns, key)
        report(f"brick killed under load: {len(snapshot())} entries saved ({during} by the restart), "
               f"every one a hit on every host after the heal; glusterd noticed the kill in {phases['kill']:.1f}s, "
               f"restart {phases['restart']:.1f}s, heal {phases['heal']:.1f}s"
               + (f"; GlusterFS could not heal {len(removed)} files the killed brick left "
                  f"({[os.path.relpath(p, CLUSTER.brick(1)) for p in removed]}), removed from it "
                  "as its operators do" if removed else ""))


class VisibilityAndSemantics(SharedTestCase):
    fleet_hosts = range(2)

    def _poll_delay(self, prepare: Callable[[], None], change: Callable[[], None],
                    seen: Callable[[], bool]) -> float:
        """Seconds from change() returning until seen() holds, polled every
        5 ms by a thread that started before the change."""
        prepare()
        found = threading.Event()
        at = [0.0]

        def poll():
            while not seen():
                time.sleep(0.005)
            at[0] = time.monotonic()
            found.set()

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        time.sleep(0.05)
        change()
        done = time.monotonic()
        self.assertTrue(found.wait(30), "never seen")
        return max(0.0, at[0] - done)

    def test_visibility_delays(self) -> None:
        assert CLUSTER is not None
        raw0, raw1 = os.path.join(CLUSTER.client(0), "raw"), os.path.join(CLUSTER.client(1), "raw")
        os.makedirs(raw0, exist_ok=True)
        entry_delays, attr_delays = [], []
        for i in range(20):  # a new name renamed into place on client 0, polled on client 1
            tmp, dst = os.path.join(raw0, f".t{i}"), os.path.join(raw0, f"e{i}")
            entry_delays.append(self._poll_delay(
                lambda: Path(tmp).write_bytes(b"x"), lambda: os.rename(tmp, dst),
                lambda: os.path.exists(os.path.join(raw1, f"e{i}"))))
        for i in range(10):  # a size change right after client 1 looked: the whole attribute cache window
            p0, p1 = os.path.join(raw0, f"e{i}"), os.path.join(raw1, f"e{i}")
            attr_delays.append(self._poll_delay(
                lambda: os.stat(p1), lambda: Path(p0).write_bytes(b"hello"),
                lambda: os.stat(p1).st_size == 5))
        publish_delays, rename_costs = [], []
        for i in range(20):  # TileLang's save on host 0, timed at its publishing rename, polled on host 1
            key = f"vis{i}"
            lib = os.path.join(self.fleet.m(1), "ns", "kernels", key, "kernel_lib.so")
            staging = stage_entry(self.fleet.m(0), "ns", key)
            dst = os.path.join(self.fleet.m(0), "ns", "kernels", key)
            began = [0.0]

            def publish():
                began[0] = time.monotonic()
                os.rename(staging, dst)
                rename_costs.append(time.monotonic() - began[0])
            publish_delays.append(self._poll_delay(lambda: None, publish, lambda: os.path.exists(lib)))
            self.assert_hit(1, "ns", key)
        damage_delays = []
        for i in range(5):  # truncation through host 1's client, polled through host 0's sealfs
            key = f"vis{i}"
            lib0 = os.path.join(self.fleet.m(0), "ns", "kernels", key, "kernel_lib.so")
            damage_delays.append(self._poll_delay(
                lambda: self.assert_hit(0, "ns", key),
                lambda: sm.truncate_file(self.fleet.b(1, f"ns/kernels/{key}/kernel_lib.so")),
                lambda: not os.path.exists(lib0) or self.fleet.load(0, "ns", key)[0] == tp.EXIT_MISS))

        def fmt(xs):
            return f"median {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms (n={len(xs)})"
        report(f"GlusterFS client, new name on another client: {fmt(entry_delays)}")
        report(f"GlusterFS client, attribute change on another client: {fmt(attr_delays)}")
        report(f"sealfs publish on host 0 (the rename: fsyncs, validators, manifest): {fmt(rename_costs)}")
        report(f"sealfs publish on host 0 visible on host 1 after its rename returned "
               f"(cache_timeout={CACHE_TIMEOUT_S}): {fmt(publish_delays)}")
        report(f"damage through host 1's client hidden on host 0: {fmt(damage_delays)}")
        fs_entry, fs_attr = max(entry_delays), max(attr_delays)
        self.assertLessEqual(statistics.median(publish_delays), CACHE_TIMEOUT_S + fs_entry + MARGIN_S)
        self.assertLessEqual(max(publish_delays), CACHE_TIMEOUT_S + fs_entry + 2 * MARGIN_S)
        self.assertLessEqual(max(damage_delays), CACHE_TIMEOUT_S + fs_attr + 2 * MARGIN_S)

    def test_r8_stamps_and_r1_fsync_on_gluster(self) -> None:
        """What R8's stamp is made of, as two clients of one volume see one
        file; and fsync of files and directories (R1) on a client mount."""
        assert CLUSTER is not None
        d0, d1 = os.path.join(CLUSTER.client(0), "stamps"), os.path.join(CLUSTER.client(1), "stamps")
        os.makedirs(d0, exist_ok=True)
        nsecs = []
        for i in range(10):
            p = os.path.join(d0, f"f{i}")
            with open(p, "wb") as f:
                f.write(b"s" * (i + 1))
                os.fsync(f.fileno())  # R1: a file's fsync works on the client mount
            time.sleep(0.01)
        dirfd = os.open(d0, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dirfd)  # R1: and a directory's
        finally:
            os.close(dirfd)
        time.sleep(1.2)  # past the attribute caches
        for i in range(10):
            a, b = os.stat(os.path.join(d0, f"f{i}")), os.stat(os.path.join(d1, f"f{i}"))
            self.assertEqual(a.st_ino, b.st_ino, "inode numbers differ between clients")
            self.assertEqual((a.st_size, a.st_mtime_ns, a.st_ctime_ns), (b.st_size, b.st_mtime_ns, b.st_ctime_ns),
                             "size or times differ between clients")
            nsecs.append(a.st_ctime_ns % 1_000_000_000)
            if i == 0:
                report(f"R8 stamp of one file: client 0 dev={a.st_dev} ino={a.st_ino} ctime={a.st_ctime_ns}; "
                       f"client 1 dev={b.st_dev} ino={b.st_ino} ctime={b.st_ctime_ns}")
                dev_differs = a.st_dev != b.st_dev
        sub = [n % 1000 for n in nsecs]
        report(f"ctime nanoseconds of 10 files: {nsecs} ({'ns' if any(sub) else 'us or coarser'} granularity)")
        report(f"st_dev differs between clients: {dev_differs} (each sealfs daemon compares stamps from its own "
               f"client only, so a per-client st_dev is harmless); inode numbers and times agree across clients")
        self.assertTrue(any(nsecs), "ctime has whole-second granularity: R8's one-second window is needed")
        # Through sealfs: a sealed file's stamp is stable on each host.
        rc, out = self.fleet.save(0, "ns", "stamp")
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", "stamp", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        via = [os.stat(os.path.join(self.fleet.m(h), "ns/kernels/stamp/kernel_lib.so")) for h in (0, 1)]
        report(f"through sealfs: host 0 ino={via[0].st_ino} host 1 ino={via[1].st_ino}")

    def test_rename_flags_on_gluster(self) -> None:
        """RENAME_NOREPLACE and RENAME_EXCHANGE are refused by GlusterFS's FUSE
        client (EINVAL): sealfs's quarantine and its publish over a directory
        of hidden leftovers must not depend on them there."""
        assert CLUSTER is not None
        d = os.path.join(CLUSTER.client(0), "flags")
        os.makedirs(d, exist_ok=True)
        libc = ctypes.CDLL(None, use_errno=True)
        Path(d, "a").write_bytes(b"a")
        Path(d, "b").write_bytes(b"b")

        def rename2(src: str, dst: str, flags: int) -> int:
            r = libc.renameat2(-100, os.path.join(d, src).encode(), -100, os.path.join(d, dst).encode(), flags)
            return 0 if r == 0 else ctypes.get_errno()
        noreplace, exchange = rename2("a", "c", 1), rename2("a", "b", 2)
        report(f"renameat2 on a GlusterFS client: RENAME_NOREPLACE -> {errno.errorcode.get(noreplace, noreplace)}, "
               f"RENAME_EXCHANGE -> {errno.errorcode.get(exchange, exchange)}")

    def test_atomic_replace_across_hosts(self) -> None:
        """R6 across hosts: a file entry replaced over and over on host 0; a
        reader on host 1 sees one complete version each time, never ENOENT
        and never a mix. An open that meets two replaces in a row can fail
        with ESTALE on a network filesystem: counted and printed."""
        m0, m1 = self.fleet.m(0), self.fleet.m(1)
        versions = {i: bytes([65 + i % 26]) * (3000 + 37 * i) for i in range(REPLACES + 1)}
        digests = {hashlib.sha256(v).digest() for v in versions.values()}
        os.makedirs(os.path.join(m0, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(m0, "ns", "files"), exist_ok=True)
        dst0 = os.path.join(m0, "ns", "files", "blob.bin")

        def publish(i: int) -> None:
            tmp = os.path.join(m0, "tmp", f"blob.{i}")
            Path(tmp).write_bytes(versions[i])
            os.replace(tmp, dst0)

        publish(0)
        dst1 = os.path.join(m1, "ns", "files", "blob.bin")
        wait_for("the first version on host 1", lambda: sm.exists_in_mount(dst1), DAMAGE_DEADLINE_S)
        problems, stale, reads, stop = [], [0], [0], threading.Event()

        def reader():
            while not stop.is_set():
                try:
                    data = Path(dst1).read_bytes()
                except OSError as e:
                    # ESTALE, counted, not a failure: the open met two
                    # replaces in a row (the kernel retries a stale open
                    # once), or a READ on the name the kernel still held
                    # reached the daemon after GlusterFS dropped the old
                    # file (as NFS answers). EIO would claim damage where
                    # there is none: a problem. Never a mixed or partial file.
                    if e.errno == errno.ESTALE:
                        stale[0] += 1
                    else:
                        problems.append(f"{errno.errorcode.get(e.errno, e.errno)} after {reads[0]} reads")
                    time.sleep(0.01)
                    continue
                reads[0] += 1
                if hashlib.sha256(data).digest() not in digests:
                    problems.append(f"a mixed or partial file of {len(data)} bytes")

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        for i in range(1, REPLACES + 1):
            publish(i)
            time.sleep(0.05)
        time.sleep(DAMAGE_DEADLINE_S)
        stop.set()
        t.join(30)
        report(f"R6 across hosts: {REPLACES} replaces on host 0, {reads[0]} reads on host 1, "
               f"{stale[0]} opens or reads answered ESTALE, other problems: {problems[:5]}")
        self.assertEqual(problems, [])
        self.assertEqual(Path(dst1).read_bytes(), versions[REPLACES], "host 1 does not end on the last version")

    def test_first_read_after_a_replace_elsewhere(self) -> None:
        """The window the test above meets by chance, made on purpose: host 1
        looks a file entry up (its kernel now holds the name and inode, no
        page of it), host 0 replaces it, and host 1 reads it at once, within
        cache_timeout, so the READ reaches host 1's daemon for a file that
        GlusterFS dropped. The answer is the old bytes, the new ones or
        ESTALE (as NFS says); EIO would claim damage that is not there."""
        m0, m1 = self.fleet.m(0), self.fleet.m(1)
        os.makedirs(os.path.join(m0, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(m0, "ns", "first"), exist_ok=True)
        outcomes: dict[str, int] = {}
        for i in range(12):
            old, new = bytes([65 + i]) * 70000, bytes([97 + i]) * 80000
            dst0 = os.path.join(m0, "ns", "first", f"f{i}.bin")
            dst1 = os.path.join(m1, "ns", "first", f"f{i}.bin")
            for data in (old, new):
                if data is new:
                    wait_for(f"f{i} on host 1", lambda: sm.exists_in_mount(dst1), DAMAGE_DEADLINE_S)
                    os.stat(dst1)  # host 1's kernel holds the old inode, no page of it
                tmp = os.path.join(m0, "tmp", f"f{i}")
                Path(tmp).write_bytes(data)
                os.replace(tmp, dst0)
            try:
                got = Path(dst1).read_bytes()
                outcome = "old" if got == old else "new" if got == new else f"a mix of {len(got)} bytes"
            except OSError as e:
                outcome = errno.errorcode.get(e.errno, str(e.errno))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        report(f"first read on host 1 of a file entry just replaced on host 0: {outcomes}")
        self.assertLessEqual(set(outcomes), {"old", "new", "ESTALE"}, outcomes)



class KeyedHosts(SharedTestCase):
    """Authenticated manifests across hosts (-o key_file): hosts 0 and 1 hold
    the fleet's key, host 2 none, host 3 another one. The keyed hosts never
    show what the others publish, nor a signed manifest copied to another
    place; what one keyed host publishes is a hit on the other."""

    KEYS = {"fleet": "11" * 32, "impostor": "22" * 32, "next": "33" * 32}

    def host_options(self, h: int) -> list[str]:
        if h == 2:
            return OPTIONS
        if not hasattr(self, "_key_dir"):
            self._key_dir = Path(tempfile.mkdtemp(prefix="sealfs-keys."))
            self.addCleanup(shutil.rmtree, self._key_dir, True)
            for name, key in self.KEYS.items():
                f = self._key_dir / f"{name}.keys"
                f.write_text(f"{name} {key}\n")
                f.chmod(0o600)
            # Rotation: the next key signs, the fleet's still verifies.
            f = self._key_dir / "rotated.keys"
            f.write_text(f"next {self.KEYS['next']}\nfleet {self.KEYS['fleet']}\n")
            f.chmod(0o600)
        name = "impostor" if h == 3 else getattr(self, "_key_of", {}).get(h, "fleet")
        return OPTIONS + [f"key_file={self._key_dir / (name + '.keys')}"]

    def assert_never_shown(self, hosts: list[int], ns: str, key: str) -> None:
        deadline = time.monotonic() + DAMAGE_DEADLINE_S
        while time.monotonic() < deadline:
            for h in hosts:
                rc, out = self.fleet.load(h, ns, key)
                self.assertEqual(rc, tp.EXIT_MISS, f"host {h} showed {ns}/{key}: {out}")
            time.sleep(0.2)

    def test_only_the_fleets_key_publishes(self) -> None:
        for h, key in ((2, "unsigned"), (3, "impostor")):
            rc, out = self.fleet.save(h, "ns", key)
            self.assertEqual(rc, 0, out)
            self.assert_hit(h, "ns", key)  # its own host shows it (no key, or its key)
        self.assertIn("mac", json.loads(Path(self.fleet.b(0, "ns/kernels/impostor/.sealfs-manifest")).read_text()))
        for key in ("unsigned", "impostor"):
            self.assert_never_shown([0, 1], "ns", key)
        rc, out = self.fleet.save(0, "ns", "signed")
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", "signed", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        report("keys across hosts: entries of the keyless and the impostor host were never shown on the "
               "keyed hosts; the keyed hosts share theirs")

    def test_key_rotation(self) -> None:
        rc, out = self.fleet.save(0, "ns", "old")
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", "old", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        # Host 1 moves to [next, fleet]: the fleet-signed entry stays a hit,
        # and what it publishes now is signed by next.
        self._key_of = {1: "rotated"}
        self.fleet.stop(1)
        self.fleet.start(1)
        self.assert_hit(1, "ns", "old")
        rc, out = self.fleet.save(1, "ns", "new")
        self.assertEqual(rc, 0, out)
        self.assert_hit(1, "ns", "new")
        mac = json.loads(Path(self.fleet.b(1, "ns/kernels/new/.sealfs-manifest")).read_text())["mac"]
        self.assertEqual(mac["key"], "next")
        # Host 0 does not list next yet: the new entry is foreign to it, until it does.
        self.assert_never_shown([0], "ns", "new")
        self._key_of = {0: "rotated", 1: "rotated"}
        self.fleet.stop(0)
        self.fleet.start(0)
        self.assert_hit(0, "ns", "new")
        self.assert_hit(0, "ns", "old")

    def test_a_signed_manifest_copied_elsewhere_is_hidden(self) -> None:
        rc, out = self.fleet.save(0, "ns", "orig")
        self.assertEqual(rc, 0, out)
        self.wait_load(1, "ns", "orig", tp.EXIT_HIT, DAMAGE_DEADLINE_S)
        # Planted through host 1's client: the same files and the same
        # correctly signed manifest, at another place.
        subprocess.run(["cp", "-a", self.fleet.b(1, "ns/kernels/orig"), self.fleet.b(1, "ns/kernels/copy")],
                       check=True)
        self.assert_never_shown([0, 1], "ns", "copy")
        self.assert_hit(0, "ns", "orig")
        self.assert_hit(1, "ns", "orig")


if __name__ == "__main__":
    gc.require_gluster()
    unittest.main(verbosity=2)
