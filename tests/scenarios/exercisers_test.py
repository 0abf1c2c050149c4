"""Third-party exercisers on a sealfs mount (issue 11, label soak).

Programs that no one on the team wrote, from Debian's packages, each run
twice in the same test: first in a plain directory, then on a fresh sealfs
mount (generic profile, cache_timeout=1; fio also in the tilelang profile's
volatile tmp/, the plain passthrough path TileLang's temporary files take).

  stress-ng   --verify, the filesystem stressors, 2 workers, ~10 s each
              (in 4 groups that run their stressors at the same time)
  fio         verify=crc32c on in-place writes: sequential, random, the mmap
              engine, 4 jobs at once (own files, and one shared file); one
              job holding 3,000 files open at once against a daemon limited
              to 1,024 descriptors
  rsync       -a of (part of) /usr/include, an update after touching and
              rewriting a tenth of the sources, 4 rsyncs at once into one
              tree; a small tree (/usr/include/openssl) many times
  cp/tar/unzip  a tree with odd modes, a symlink, UTF-8 names, repeated
  git         clone of a real repository, commits, gc, fsck --full; the
              same against a daemon limited to 1,024 descriptors
  python      -m venv, pip install of a small wheel from PyPI, import;
              compileall of a tree, import from it

For every exerciser:
  - on the plain directory every step must pass; if one does not, the test
    fails at once, saying the environment is broken (not sealfs);
  - on the mount every step that passed on the plain directory must pass too
    (same exit status 0, same trees byte for byte); a stress-ng stressor
    that skips on the plain directory is left out of the mount's run;
  - afterwards the daemon still runs and the mount answers a stat;
  - after the unmount, `sealfs fsck` of the backing store reports no damage:
    exit 0, no invalid entry and nothing foreign outside volatile areas
    (everything an exerciser wrote through the mount must have been sealed),
    and nothing in quarantine. (stress-ng's flock stressor creates a file
    O_RDWR, forks 3 children that share the descriptor, closes its own and
    SIGKILLs them: the final close comes from a killed task, but that handle
    changed nothing, so R10 keeps the file; it used to be quarantined.)

Every count (runs, files, bytes, seconds) is printed, and a summary at the
end. $SEALFS_SOAK_ROUNDS overrides the number of small-tree rounds (20).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
import unittest
import zipfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import scenario_venv
import sealfs_mount as sm
from tools_test import make_tree, snapshot

REPO_ROOT = Path(__file__).resolve().parents[2]

# stress-ng: the stressors issue 11 names, run in groups (the stressors of a
# group run at the same time, each for STRESS_SECONDS); each group mixes
# namespace, metadata and data stressors, at most two or three heavy writers.
STRESS_GROUPS = [
    ["dir", "rename", "link", "chmod", "hdd", "readahead"],
    ["dentry", "symlink", "filename", "utime", "iomix", "seek"],
    ["lockf", "flock", "fcntl", "xattr", "mmap", "sync-file"],
    ["fallocate", "copy-file", "io", "fiemap"],
]
STRESS_WORKERS = 2
STRESS_SECONDS = 10
# Sizes: the defaults (1 GiB per worker for several data stressors) only fill
# the disk; the run is bounded by time anyway.
STRESS_EXTRA = ["--hdd-bytes", "128M", "--iomix-bytes", "128M", "--fallocate-bytes", "128M",
                "--sync-file-bytes", "128M", "--seek-size", "64M", "--readahead-bytes", "64M",
                "--mmap-bytes", "32M", "--mmap-file"]

FIO_SIZE = "16M"
SMALL_ROUNDS = int(os.environ.get("SEALFS_SOAK_ROUNDS", "20"))
BIG_TREE_MAX_FILES = 800       # the part of /usr/include that rsync copies
BIG_TREE_MAX_BYTES = 12 << 20
TOOL_ROUNDS = 5                 # cp -a, tar, unzip each
GIT_ROUNDS = 2
WHEEL = ("six", "1.16.0")       # pure Python, one file, no dependencies
STDLIB_PACKAGES = ["json", "email", "http", "urllib", "xml", "logging", "asyncio",
                   "concurrent", "unittest"]

FAIL_DETAIL_CHARS = 3000


# ---- running programs ------------------------------------------------------------

class Outcome:
    def __init__(self, argv: Sequence[str], rc: Optional[int], output: str, seconds: float,
                 timed_out: bool) -> None:
        self.argv = list(argv)
        self.rc = rc
        self.output = output
        self.seconds = seconds
        self.timed_out = timed_out

    def describe(self) -> str:
        status = "timed out, killed" if self.timed_out else f"exit {self.rc}"
        out = self.output
        if len(out) > FAIL_DETAIL_CHARS:
            out = "[…]\n" + out[-FAIL_DETAIL_CHARS:]
        return f"$ {shlex.join(self.argv)}\n({status} after {self.seconds:.1f}s)\n{out.rstrip()}"


def run_command(argv: Sequence[str], cwd: Optional[Path] = None, env: Optional[dict] = None,
                timeout: float = 120) -> Outcome:
    """Runs argv in its own process group (stdout and stderr together); at the
    timeout the whole group is killed, so no stray worker keeps the mount busy."""
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True, errors="replace")
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out = "(the killed process group did not exit within 30 s)"
    return Outcome(argv, proc.returncode, out or "", time.monotonic() - start, timed_out)


def start_command(argv: Sequence[str], cwd: Optional[Path] = None,
                  env: Optional[dict] = None) -> subprocess.Popen:
    return subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True, errors="replace")


def tree_counts(root: Path) -> tuple[int, int, int]:
    """(regular files, directories, bytes) under root, not following links."""
    files = dirs = size = 0
    for dirpath, dnames, fnames in os.walk(root):
        dirs += len(dnames)
        for name in fnames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                files += 1
                size += st.st_size
    return files, dirs, size


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def diff_snapshots(got: dict, want: dict, limit: int = 8) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    lines = [f"{len(missing)} missing, {len(extra)} extra, {len(changed)} different"]
    lines += [f"  missing {k}" for k in missing[:limit]]
    lines += [f"  extra   {k}" for k in extra[:limit]]
    lines += [f"  differs {k}: {got[k]} != {want[k]}" for k in changed[:limit]]
    return "\n".join(lines)


# ---- one run of an exerciser ----------------------------------------------------

class EnvironmentBroken(AssertionError):
    pass


class Run:
    """One run of one exerciser on one target (the plain directory or a
    mount). On the plain directory any failure raises EnvironmentBroken; on a
    mount failures are collected, so that every one of them is reported."""

    def __init__(self, exerciser: str, label: str, root: Path, scratch: Path, plain: bool) -> None:
        self.exerciser = exerciser
        self.label = label
        self.root = root          # where the exerciser writes (on the target)
        self.scratch = scratch    # the run's own files, never on the mount
        self.plain = plain
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.counts: collections.Counter = collections.Counter()
        self.seconds_by_step: collections.Counter = collections.Counter()
        self.seconds = 0.0
        self.last_output = ""
        # A failure repeated over rounds is described in full only this often.
        self._described: collections.Counter = collections.Counter()

    def fail(self, what: str, detail: str) -> None:
        msg = f"[{self.exerciser} on {self.label}] {what}"
        if self.plain:
            raise EnvironmentBroken(f"{msg} failed on the PLAIN directory, so the environment is "
                                    f"broken (this is not about sealfs):\n{detail}")
        self.counts["failures"] += 1
        self._described[what] += 1
        if self._described[what] <= 2:
            self.failures.append(f"{msg}:\n{detail}")
            print(f"FAIL {msg}:\n{detail}", flush=True)
        elif self._described[what] == 3:
            self.failures.append(f"{msg}: failed again (further ones only counted)")

    def cmd(self, what: str, argv: Sequence[str], cwd: Optional[Path] = None,
            env: Optional[dict] = None, timeout: float = 120) -> Optional[Outcome]:
        out = run_command(argv, cwd=cwd, env=env, timeout=timeout)
        self.last_output = out.output
        self.seconds_by_step[what] += out.seconds
        self.counts["commands"] += 1
        if out.rc == 0 and not out.timed_out:
            return out
        self.counts[f"failed: {what}"] += 1
        self.fail(what, out.describe())
        return None

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        self.counts["checks"] += 1
        if not ok:
            self.counts[f"failed: {what}"] += 1
            self.fail(what, detail)
        return ok

    def same_tree(self, what: str, got: Path, want: dict, project: Optional[Callable] = None) -> bool:
        try:
            snap = snapshot(got)
        except OSError as e:
            return self.check(what, False, f"reading {got}: {e}")
        if project:
            snap = project(snap)
        self.counts["trees compared"] += 1
        return self.check(what, snap == want, f"{got} differs from the source: {diff_snapshots(snap, want)}")


# ---- the test -------------------------------------------------------------------

class Exercisers(sm.ScenarioTestCase):

    summary: list[str] = []

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory(prefix="sealfs-exercisers.")
        cls.work = Path(cls._tmp.name)
        cls.class_start = time.monotonic()
        cls.summary = []

    @classmethod
    def tearDownClass(cls) -> None:
        print("\n==== exercisers: summary (seconds, result) ====", flush=True)
        for line in cls.summary:
            print(line)
        print(f"==== total {time.monotonic() - cls.class_start:.1f}s ====", flush=True)
        cls._tmp.cleanup()

    # -- the frame: plain, then each mount, then daemon, fsck and quarantine checks

    def exercise(self, name: str, body: Callable[[Run], None],
                 profiles: Sequence[tuple[str, str]] = (("generic", ""),),
                 daemon_prefix: Sequence[str] = ()) -> None:
        """Runs body on the plain directory, then on a fresh mount for each
        (profile, subdirectory) in profiles, and checks each mount.
        daemon_prefix: a command the daemon runs under (prlimit …)."""
        print(f"\n=== {name}", flush=True)
        plain_root = self.work / f"{name}.plain"
        plain_root.mkdir()
        run = Run(name, "plain", plain_root, self.scratch_dir(name, "plain"), plain=True)
        start = time.monotonic()
        body(run)
        run.seconds = time.monotonic() - start
        self.report(run)

        failures: list[str] = []
        for profile, subdir in profiles:
            failures += self.on_mount(name, body, profile, subdir, daemon_prefix)
        shutil.rmtree(plain_root, ignore_errors=True)
        if failures:
            self.fail(f"{name}: {len(failures)} failure(s) on sealfs where the plain directory "
                      f"passed:\n\n" + "\n\n".join(failures))

    def scratch_dir(self, name: str, label: str) -> Path:
        tag = re.sub(r"[^\w.-]+", "-", label).strip("-")
        path = self.work / f"{name}.{tag}.scratch"
        path.mkdir(exist_ok=True)
        return path

    def on_mount(self, name: str, body: Callable[[Run], None], profile: str, subdir: str,
                 daemon_prefix: Sequence[str] = ()) -> list[str]:
        label = f"sealfs/{profile}" + (f" in {subdir}/" if subdir else "")
        if daemon_prefix:
            label += f" under {' '.join(daemon_prefix)}"
        base = self.work / f"{name}.{profile}.{subdir or 'root'}"
        backing, mnt = base / "backing", base / "mnt"
        backing.mkdir(parents=True)
        mnt.mkdir()
        options = [f"profile={profile}", "cache_timeout=1"]
        argv = None
        if daemon_prefix:
            def argv(b: str, m: str) -> list[str]:
                return [*daemon_prefix, sm.sealfs_binary(), "-f", "-o", ",".join(options), b, m]
        mount = sm.SealfsMount(options=options, backing=str(backing), mountpoint=str(mnt), argv=argv)
        run: Optional[Run] = None
        log_tail = ""
        try:
            with mount:
                root = mnt / subdir if subdir else mnt
                root.mkdir(parents=True, exist_ok=True)
                run = Run(name, label, root, self.scratch_dir(name, label), plain=False)
                start = time.monotonic()
                try:
                    body(run)
                except Exception:  # an OSError from the mount, a timeout …
                    run.fail("exception", traceback.format_exc(limit=-4))
                run.seconds = time.monotonic() - start
                self.report(run)
                self.check_daemon_alive(run, mount)
                log_tail = "\n".join(mount.log_text().splitlines()[-15:])
        except sm.MountError as e:
            if run is None:
                raise
            run.fail("unmount / daemon exit", str(e)[-FAIL_DETAIL_CHARS:])
        assert run is not None
        self.check_backing(run, backing, profile)
        if run.failures and log_tail:
            print(f"  daemon log (last lines):\n{log_tail}", flush=True)
        self.summary.append(f"{name:10} {label:26} {run.seconds:6.1f}s  "
                            + ("PASS" if not run.failures else f"FAIL ({run.counts['failures']})"))
        shutil.rmtree(base, ignore_errors=True)
        return run.failures

    def report(self, run: Run) -> None:
        files, dirs, size = tree_counts(run.root)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
        print(f"[{run.exerciser} on {run.label}] {run.seconds:.1f}s; left {files} files, {dirs} dirs, "
              f"{mib(size)}; {counts}", flush=True)
        for note in run.notes:
            print(f"  {note}", flush=True)
        slowest = run.seconds_by_step.most_common(5)
        if slowest:
            print("  seconds by step: " + ", ".join(f"{what} {sec:.1f}" for what, sec in slowest), flush=True)
        if run.plain:
            self.summary.append(f"{run.exerciser:10} {'plain':26} {run.seconds:6.1f}s  PASS")

    def check_daemon_alive(self, run: Run, mount: sm.SealfsMount) -> None:
        assert mount.proc is not None
        rc = mount.proc.poll()
        if not run.check("daemon alive", rc is None, f"the daemon exited with {rc}:\n{mount.log_text()[-2000:]}"):
            return
        # In a child, with a timeout: a hung mount must not hang the test.
        out = run_command(["stat", "-c", "%F", mount.mountpoint], timeout=20)
        if not run.check("mount answers a stat", out.rc == 0 and not out.timed_out, out.describe()):
            return
        try:
            status = mount.status()
        except (AssertionError, subprocess.TimeoutExpired, ValueError) as e:
            run.check("sealfs status", False, str(e))
            return
        keys = ["publishes", "seals", "files_hashed", "bytes_hashed", "hidden", "quarantined",
                "abandoned", "rejected"]
        print("  daemon: " + ", ".join(f"{k} {status.get(k)}" for k in keys), flush=True)

    def check_backing(self, run: Run, backing: Path, profile: str) -> None:
        out = run_command([sm.sealfs_binary(), "fsck", "-o", f"profile={profile}", str(backing)],
                          timeout=300)
        summary = re.search(r"entries (\d+), valid (\d+), invalid (\d+), foreign (\d+), unlisted (\d+), "
                            r"quarantined (\d+)", out.output)
        print(f"  fsck: exit {out.rc}; {summary.group(0) if summary else 'no summary line'}", flush=True)
        clean = (out.rc == 0 and summary is not None
                 and summary.group(3) == summary.group(4) == summary.group(5) == "0")
        run.check("sealfs fsck after unmount: no damage, nothing unsealed", clean,
                  "an invalid entry, or a file written through the mount that is not sealed:\n"
                  + out.describe())
        reasons = collections.Counter()
        qdir = backing / ".sealfs" / "quarantine"
        slots = sorted(qdir.iterdir()) if qdir.is_dir() else []
        examples = []
        for slot in slots:
            try:
                info = json.loads((slot / "reason.json").read_text())
            except (OSError, ValueError):
                info = {"path": slot.name, "reason": "(no readable reason.json)"}
            reasons[info.get("reason", "?")] += 1
            if len(examples) < 5:
                examples.append(f"{info.get('path')}: {info.get('reason')}")
        if slots:
            print(f"  quarantine: {len(slots)} slot(s): "
                  + "; ".join(f"{n}× {r}" for r, n in reasons.most_common())
                  + "; e.g. " + ", ".join(e.split(":", 1)[0] for e in examples[:3]), flush=True)
        run.check("nothing quarantined (every program exited 0)", not slots,
                  f"{len(slots)} quarantined, e.g.:\n" + "\n".join(examples))

    # ---- stress-ng ---------------------------------------------------------------

    def test_stress_ng(self) -> None:
        known = set(run_command(["stress-ng", "--stressors"]).output.split())
        self.stress_missing = [s for g in STRESS_GROUPS for s in g if s not in known]
        self.stress_skipped: dict[str, str] = {}   # on the plain directory: name → why
        self.stress_plain_ops: dict[str, str] = {}
        if self.stress_missing:
            print(f"stress-ng {run_command(['stress-ng', '--version']).output.strip()} lacks: "
                  f"{', '.join(self.stress_missing)}", flush=True)
        self.exercise("stress-ng", self._stress_ng)
        print(f"stress-ng: skipped on the plain directory (left out on the mount): "
              f"{self.stress_skipped or 'none'}; missing in this version: {self.stress_missing or 'none'}",
              flush=True)

    def test_stress_ng_daemon_with_1024_descriptors(self) -> None:
        """Issue 24: the namespace stressors (thousands of creates a second in
        one directory, where the kernel forgets inodes slowly) against a
        daemon limited to 1,024 descriptors, soft = hard, as many containers
        are: every run as clean as on the plain directory, no EMFILE or
        ENFILE, nothing quarantined. It failed every run before the daemon
        gave back the descriptors of files the kernel still remembers."""
        group = [s for s in STRESS_GROUPS[1] if s in set(run_command(["stress-ng", "--stressors"]).output.split())]
        self.exercise("stress-ng-1024", lambda run: self._stress_ng_repeated(run, group),
                      daemon_prefix=["prlimit", "--nofile=1024:1024", "--"])

    def _stress_ng_repeated(self, run: Run, group: list[str], runs: int = 3) -> None:
        for i in range(runs):
            temp = run.root / f"run{i}"
            temp.mkdir()
            argv = ["stress-ng", "--temp-path", str(temp), "--verify", "--timeout", "8s"]
            for s in group:
                argv += [f"--{s}", str(STRESS_WORKERS)]
            argv += ["--iomix-bytes", "64M"]
            out = run.cmd(f"stress-ng run {i} ({' '.join(group)})", argv, timeout=120)
            # stress-ng exits 0 after some failures (a dentry stressor's
            # failed open): every fail or error line counts.
            lines = [line for found in self._stress_lines(out.output if out else run.last_output,
                                                          "fail|error").values() for line in found]
            run.check(f"stress-ng run {i}: no fail or error lines", not lines, "\n".join(lines[:5]))
            shutil.rmtree(temp, ignore_errors=True)

    @staticmethod
    def _stress_lines(output: str, kinds: str) -> dict[str, list[str]]:
        """stressor → its output lines of the given kinds ("fail|error", "skip")."""
        found: dict[str, list[str]] = collections.defaultdict(list)
        for line in output.splitlines():
            m = re.match(r"stress-ng: (\w+):\s*\[\d+\] ([\w-]+):? (.*)", line)
            if not m:
                continue
            level, who, text = m.groups()
            if kinds == "skip":
                if re.search(r"skipp(ing|ed)|not (implemented|supported)", text, re.I):
                    found[who].append(line)
            elif level in ("fail", "error"):
                found[who].append(line)
        return found

    def _stress_ng(self, run: Run) -> None:
        for i, group in enumerate(STRESS_GROUPS):
            group = [s for s in group if s not in self.stress_missing and s not in self.stress_skipped]
            if not group:
                continue
            temp = run.root / f"group{i}"
            temp.mkdir()
            yaml = run.scratch / f"group{i}.yaml"
            argv = ["stress-ng", "--temp-path", str(temp), "--verify", "--timeout", f"{STRESS_SECONDS}s",
                    "--metrics-brief", "--yaml", str(yaml)]
            for s in group:
                argv += [f"--{s}", str(STRESS_WORKERS)]
            argv += STRESS_EXTRA
            out = run.cmd(f"stress-ng group {i} ({' '.join(group)})", argv,
                          timeout=STRESS_SECONDS * 6 + 60)
            run.counts["stressors run"] += len(group)
            ops = self._bogo_ops(yaml)
            run.notes.append(f"group {i}: " + ", ".join(f"{s} {ops.get(s, '?')} ops" for s in group))
            if out is None:
                for s, lines in self._stress_lines(run.last_output, "fail|error").items():
                    run.notes.append(f"group {i}: {s} reported: " + " | ".join(lines[:3]))
                continue
            skips = self._stress_lines(out.output, "skip")
            if run.plain:
                self.stress_plain_ops.update(ops)
                for s in group:
                    if s in skips:
                        self.stress_skipped[s] = skips[s][0].split("] ", 1)[-1]
            else:
                for s, lines in skips.items():
                    if s in group:
                        self._mount_only_skip(run, s, lines)
                idle = [s for s in group if ops.get(s) == "0" and self.stress_plain_ops.get(s, "0") != "0"]
                if idle:
                    # Exit 0 but no operation finished in the time (a slow
                    # setup under load): not a failure, but worth knowing.
                    run.notes.append(f"group {i}: no operation completed on the mount (did some on plain): "
                                     f"{', '.join(idle)}")
                    run.counts["stressors with 0 ops"] += len(idle)
            try:
                temp.rmdir()   # stress-ng removes its own files; an empty dir stays
            except OSError as e:
                left = sorted(os.listdir(temp)) if temp.is_dir() else []
                run.notes.append(f"group {i}: {temp} not empty after stress-ng ({e}): {left[:5]}")

    def _mount_only_skip(self, run: Run, stressor: str, lines: list[str]) -> None:
        """A stressor that ran on the plain directory but skipped on the mount:
        a FUSE limitation when it skips on bindfs (FUSE without sealfs) too."""
        reason = lines[0].split("] ", 1)[-1]
        if shutil.which("bindfs") is None:
            run.check(f"stress-ng {stressor} skipped on the mount only", False, reason)
            return
        src = run.scratch / "bindfs-src"
        mnt = run.scratch / "bindfs-mnt"
        src.mkdir(exist_ok=True)
        mnt.mkdir(exist_ok=True)
        if run_command(["bindfs", str(src), str(mnt)]).rc != 0:
            run.check(f"stress-ng {stressor} skipped on the mount only", False, reason + " (bindfs did not mount)")
            return
        try:
            out = run_command(["stress-ng", "--temp-path", str(mnt), "--timeout", "2s", f"--{stressor}", "1"],
                              timeout=60)
        finally:
            run_command(["fusermount3", "-u", str(mnt)])
        if stressor in self._stress_lines(out.output, "skip"):
            run.notes.append(f"{stressor}: skipped on FUSE, bindfs too (a FUSE limitation): {reason}")
            run.counts["skipped on FUSE (bindfs too)"] += 1
        else:
            run.check(f"stress-ng {stressor} skipped on sealfs but runs on plain and bindfs", False,
                      "\n".join(lines))

    @staticmethod
    def _bogo_ops(yaml: Path) -> dict[str, str]:
        ops, who = {}, None
        try:
            text = yaml.read_text()
        except OSError:
            return ops
        for line in text.splitlines():
            m = re.match(r"\s*- stressor: ([\w-]+)", line)
            if m:
                who = m.group(1)
            m = re.match(r"\s*bogo-ops: (\d+)", line)
            if m and who:
                ops[who] = m.group(1)
        return ops

    # ---- fio -----------------------------------------------------------------------

    FIO_JOBS = [
        ("sequential write", ["--name=seq", "--rw=write", "--bs=64k", "--ioengine=psync", f"--size={FIO_SIZE}"]),
        ("random write", ["--name=rand", "--rw=randwrite", "--bs=4k", "--ioengine=psync", f"--size={FIO_SIZE}"]),
        ("mmap engine", ["--name=mmap", "--rw=randwrite", "--bs=16k", "--ioengine=mmap", f"--size={FIO_SIZE}"]),
        ("4 jobs, own files", ["--name=four", "--rw=randwrite", "--bs=8k", "--ioengine=psync", "--size=8M",
                               "--numjobs=4", "--group_reporting"]),
        ("4 jobs, one file", ["--name=shared", "--rw=randwrite", "--bs=8k", "--ioengine=psync", "--size=8M",
                              "--numjobs=4", "--filename=shared.dat", "--offset_increment=8M",
                              "--group_reporting"]),
    ]

    def test_fio(self) -> None:
        # tilelang's tmp/ is a volatile area: plain passthrough, a path of its own.
        self.exercise("fio", self._fio, profiles=(("generic", ""), ("tilelang", "tmp")))

    def _fio(self, run: Run) -> None:
        common = ["--verify=crc32c", "--verify_fatal=1", "--runtime=60", f"--directory={run.root}"]
        for what, job in self.FIO_JOBS:
            # Write and verify (do_verify), then verify again in a new process:
            # fio drops the page cache of the file first, so the second pass
            # reads what the daemon stored.
            if run.cmd(f"fio {what}", ["fio", *job, *common], cwd=run.root):
                run.cmd(f"fio {what} (verify_only, new process)", ["fio", *job, *common, "--verify_only"],
                        cwd=run.root)
            run.counts["fio jobs"] += 1

    FIO_OPEN_FILES = 3000

    def test_fio_many_open_files_daemon_with_1024_descriptors(self) -> None:
        """Issue 24: one fio job that keeps 3,000 files open for writing at once
        (nrfiles = openfiles, round robin, verify=crc32c), as a framework
        holding thousands of descriptors does, against a daemon limited to
        1,024 descriptors: as on the plain directory. The daemon used to
        answer ENFILE from about the 400th open on (fio then waited on its
        opens for as long as it was let run); now idle write handles give
        their descriptors back and open their files again at their next
        write (fs/fuse/parked_handles.hpp)."""
        self.exercise("fio-3000-open", self._fio_many_open_files,
                      daemon_prefix=["prlimit", "--nofile=1024:1024", "--"])

    def _fio_many_open_files(self, run: Run) -> None:
        n = self.FIO_OPEN_FILES
        job = ["--name=many", "--rw=randwrite", "--bs=4k", "--ioengine=psync", f"--nrfiles={n}",
               f"--openfiles={n}", "--filesize=8k", "--file_service_type=roundrobin", "--verify=crc32c",
               "--verify_fatal=1", "--runtime=120", f"--directory={run.root}"]
        # fio itself needs more than the usual 1,024 descriptors.
        fio = ["prlimit", f"--nofile={2 * n}:{2 * n}", "--", "fio"]
        if run.cmd(f"fio {n} files open at once", [*fio, *job], cwd=run.root, timeout=300):
            run.cmd(f"fio {n} files (verify_only, new process)", [*fio, *job, "--verify_only"], cwd=run.root,
                    timeout=300)
        run.counts["fio jobs"] += 1

    # ---- rsync -----------------------------------------------------------------------

    @classmethod
    def sources(cls) -> dict[str, Path]:
        """Pristine source trees, made once: 'small' (/usr/include/openssl or the
        like), 'big' (part of /usr/include), 'tools' (odd modes, symlink, UTF-8)."""
        if getattr(cls, "_sources", None):
            return cls._sources
        src = cls.work / "sources"
        src.mkdir()
        small = src / "small"
        for cand in ["/usr/include/openssl", "/usr/include/linux", "/usr/include/python3.11"]:
            if os.path.isdir(cand):
                shutil.copytree(cand, small, symlinks=True)
                break
        else:
            raise unittest.SkipTest("no small header tree in /usr/include")
        big = src / "big"
        big.mkdir()
        taken, files_total, bytes_total = [], 0, 0
        for name in sorted(os.listdir("/usr/include")):
            path = Path("/usr/include", name)
            f, _, b = tree_counts(path) if path.is_dir() and not path.is_symlink() else (1, 0, path.lstat().st_size)
            if files_total + f > BIG_TREE_MAX_FILES or bytes_total + b > BIG_TREE_MAX_BYTES:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.copytree(path, big / name, symlinks=True)
            else:
                shutil.copy2(path, big / name, follow_symlinks=False)
            taken.append(name)
            files_total += f
            bytes_total += b
        tools = src / "tools"
        tools.mkdir()
        make_tree(tools)
        shutil.copytree(small, tools / "headers", symlinks=True)
        for name, path in [("small", small), ("big", big), ("tools", tools)]:
            f, d, b = tree_counts(path)
            print(f"source tree {name}: {f} files, {d} dirs, {mib(b)}", flush=True)
        print(f"  big = {len(taken)} of the entries of /usr/include", flush=True)
        cls._sources = {"small": small, "big": big, "tools": tools}
        return cls._sources

    @staticmethod
    def rewrite_tenth(tree: Path, round_no: int) -> int:
        """Touches or rewrites every tenth regular file: a third only get a new
        mtime, a third the same size with other bytes, a third grow."""
        files = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
        changed = 0
        stamp = 1_700_000_000 + round_no * 1000
        for i, path in enumerate(files[round_no % 10::10]):
            kind = i % 3
            if kind == 1:
                data = path.read_bytes()
                path.write_bytes(data.swapcase() if data.swapcase() != data else data + b"\n")
            elif kind == 2:
                with open(path, "ab") as f:
                    f.write(f"/* rewritten in round {round_no} */\n".encode())
            os.utime(path, (stamp + i, stamp + i))
            changed += 1
        return changed

    def test_rsync(self) -> None:
        self.sources()
        self.exercise("rsync", self._rsync)

    def _rsync_into(self, run: Run, what: str, src: Path, dst: Path) -> bool:
        return run.cmd(what, ["rsync", "-a", f"{src}/", f"{dst}/"], timeout=300) is not None

    def _rsync(self, run: Run) -> None:
        srcs = self.sources()
        # Each run mutates its own copy of the sources, outside the target.
        big = run.scratch / "big"
        shutil.copytree(srcs["big"], big, symlinks=True)
        small = run.scratch / "small"
        shutil.copytree(srcs["small"], small, symlinks=True)

        # The big tree: a fresh copy, an update, 4 rsyncs at once into one tree.
        t = time.monotonic()
        ok = self._rsync_into(run, "rsync -a big tree", big, run.root / "big")
        run.notes.append(f"big tree, fresh copy: {time.monotonic() - t:.1f}s")
        if ok:
            run.same_tree("big tree equals its source", run.root / "big", snapshot(big))
        n = self.rewrite_tenth(big, 0)
        removed = sorted(p for p in big.rglob("*.h") if p.is_file())[::97]
        for p in removed:
            p.unlink()
        run.notes.append(f"big tree update: {n} files touched or rewritten, {len(removed)} removed")
        if run.cmd("rsync -a --delete big tree, update", ["rsync", "-a", "--delete", f"{big}/",
                                                           f"{run.root / 'big'}/"], timeout=300):
            run.same_tree("big tree equals its source after the update", run.root / "big", snapshot(big))
        run.notes.append(f"big tree, fresh and update: {time.monotonic() - t:.1f}s")
        # 4 rsyncs at once into one tree. Two races belong to rsync itself and
        # show on any filesystem slow enough (bindfs too): mkdir of the
        # destination's root, and lstat-then-symlink. So the root exists
        # first and symlinks are left out here (--no-links); regular files
        # (temporary name, then rename) and directories race freely.
        par = run.root / "big-parallel"
        par.mkdir()
        procs = [start_command(["rsync", "-a", "--no-links", f"{big}/", f"{par}/"]) for _ in range(4)]
        for k, proc in enumerate(procs):
            try:
                out, _ = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            run.counts["commands"] += 1
            out = "\n".join(line for line in out.splitlines() if not line.startswith("skipping non-regular"))
            run.check("4 rsyncs at once into one tree", proc.returncode == 0,
                      f"$ rsync -a --no-links {big}/ {par}/  (one of 4 at once, #{k})\n"
                      f"(exit {proc.returncode})\n{out[-FAIL_DETAIL_CHARS:]}")
        no_links = {k: v for k, v in snapshot(big).items() if v[0] != "link"}
        run.same_tree("tree of 4 parallel rsyncs equals its source (without symlinks)", par, no_links)
        run.notes.append(f"big tree, all with 4 at once: {time.monotonic() - t:.1f}s")

        # The small tree, SMALL_ROUNDS times: fresh copy, update, compare.
        t = time.monotonic()
        fresh_ok = update_ok = 0
        (run.root / "small").mkdir()
        for r in range(SMALL_ROUNDS):
            dst = run.root / "small" / f"r{r:02d}"
            want = snapshot(small)
            if self._rsync_into(run, "rsync -a small tree", small, dst) and \
                    run.same_tree("small tree equals its source", dst, want):
                fresh_ok += 1
            self.rewrite_tenth(small, r + 1)
            if self._rsync_into(run, "rsync -a small tree, update", small, dst) and \
                    run.same_tree("small tree equals its source after the update", dst, snapshot(small)):
                update_ok += 1
        run.notes.append(f"small tree: {SMALL_ROUNDS} rounds in {time.monotonic() - t:.1f}s; fresh copies "
                         f"passing {fresh_ok}/{SMALL_ROUNDS}, updates passing {update_ok}/{SMALL_ROUNDS}")

    # ---- cp -a, tar, unzip ---------------------------------------------------------

    @classmethod
    def archives(cls) -> dict[str, Path]:
        if getattr(cls, "_archives", None):
            return cls._archives
        tools = cls.sources()["tools"]
        arch = cls.work / "archives"
        arch.mkdir()
        tar = arch / "tree.tar"
        out = run_command(["tar", "-C", str(tools), "-cf", str(tar), "."])
        if out.rc != 0:
            raise AssertionError(out.describe())
        zpath = arch / "tree.zip"
        if shutil.which("zip"):
            out = run_command(["zip", "-q", "-r", "-y", str(zpath), "."], cwd=tools)
            if out.rc != 0:
                raise AssertionError(out.describe())
        else:
            with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
                for p in sorted(tools.rglob("*")):
                    z.write(p, p.relative_to(tools))
        # What unzip makes of it in a plain directory is the reference: zip
        # keeps times to 2 s and Python's zipfile keeps no symlinks.
        ref = arch / "unzip-ref"
        out = run_command(["unzip", "-q", str(zpath), "-d", str(ref)])
        if out.rc != 0:
            raise AssertionError(out.describe())
        cls._archives = {"tar": tar, "zip": zpath, "unzip-ref": ref}
        return cls._archives

    def test_cp_tar_unzip(self) -> None:
        self.archives()
        self.exercise("cp-tar-zip", self._cp_tar_unzip)

    def _cp_tar_unzip(self, run: Run) -> None:
        tools = self.sources()["tools"]
        arch = self.archives()
        want = snapshot(tools)
        want_unzip = snapshot(arch["unzip-ref"])
        for r in range(TOOL_ROUNDS):
            dst = run.root / f"cp{r}"
            if run.cmd("cp -a", ["cp", "-a", str(tools), str(dst)]):
                run.same_tree("cp -a copy equals the source", dst, want)
            dst = run.root / f"tar{r}"
            dst.mkdir()
            if run.cmd("tar -xpf", ["tar", "-C", str(dst), "-xpf", str(arch["tar"])]):
                run.same_tree("tar extraction equals the source", dst, want)
            dst = run.root / f"unzip{r}"
            if run.cmd("unzip", ["unzip", "-q", str(arch["zip"]), "-d", str(dst)]):
                run.same_tree("unzip extraction equals the same extraction in a plain directory", dst, want_unzip)
            run.counts["rounds"] += 1

    # ---- git -------------------------------------------------------------------------

    @classmethod
    def git_source(cls) -> Path:
        """A bare clone of this project's own repository (a real one), or, in
        an export without .git, a repository made from tests/."""
        bare = cls.work / "src.git"
        if bare.exists():
            return bare
        env = cls.git_env()
        if run_command(["git", "-C", str(REPO_ROOT), "rev-parse", "--git-dir"], env=env).rc == 0:
            out = run_command(["git", "clone", "-q", "--bare", "--no-local", str(REPO_ROOT), str(bare)],
                              env=env, timeout=300)
        else:
            init = cls.work / "src-init"
            shutil.copytree(REPO_ROOT / "tests", init)
            for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "tests"]):
                out = run_command(argv, cwd=init, env=env)
                if out.rc != 0:
                    raise AssertionError(out.describe())
            out = run_command(["git", "clone", "-q", "--bare", str(init), str(bare)], env=env)
        if out.rc != 0:
            raise AssertionError(out.describe())
        n = run_command(["git", "-C", str(bare), "rev-list", "--all", "--count"], env=env).output.strip()
        print(f"git source: {n} commits, {mib(tree_counts(bare)[2])} of objects", flush=True)
        return bare

    @classmethod
    def git_env(cls) -> dict:
        home = cls.work / "home"
        home.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="soak", GIT_AUTHOR_EMAIL="soak@example.org",
                   GIT_COMMITTER_NAME="soak", GIT_COMMITTER_EMAIL="soak@example.org",
                   GIT_AUTHOR_DATE="2025-01-01T00:00:00Z", GIT_COMMITTER_DATE="2025-01-01T00:00:00Z")
        return env

    def test_git(self) -> None:
        self.git_source()
        self.git_heads: dict[int, str] = {}
        self.exercise("git", self._git)

    def test_git_daemon_with_1024_descriptors(self) -> None:
        """Issue 24: the same rounds against a daemon limited to 1,024
        descriptors, so that each checkout takes the inode table past its
        bound (277) while git works in the clone: 'git fsck' failed 2 runs in
        5 with getcwd() ENOENT when the daemon asked the kernel to forget the
        directory git was working in."""
        self.git_source()
        self.git_heads = {}
        self.exercise("git-1024", self._git, daemon_prefix=["prlimit", "--nofile=1024:1024", "--"])

    def _git(self, run: Run) -> None:
        env = self.git_env()
        src = self.git_source()
        for r in range(GIT_ROUNDS):
            repo = run.root / f"clone{r}"
            if not run.cmd("git clone --no-local", ["git", "clone", "-q", "--no-local", str(src), str(repo)],
                           env=env, timeout=300):
                continue
            tracked = run_command(["git", "-C", str(repo), "ls-files"], env=env).output.split()
            ok = True
            for c in range(4):
                for path in tracked[c::max(1, len(tracked) // 5)][:5]:
                    p = repo / path
                    if p.is_file() and not p.is_symlink():
                        with open(p, "a") as f:
                            f.write(f"\n# soak round {r} commit {c}\n")
                (repo / f"soak-{r}-{c}.txt").write_text(f"new file {r} {c}\n" * (c + 1))
                if c == 2 and tracked:
                    run_command(["git", "-C", str(repo), "rm", "-q", tracked[-1]], env=env)
                ok = bool(run.cmd("git add -A", ["git", "-C", str(repo), "add", "-A"], env=env)) and ok
                ok = bool(run.cmd("git commit", ["git", "-C", str(repo), "commit", "-q", "-m",
                                                 f"soak {r}.{c}"], env=env)) and ok
            run.cmd("git gc --prune=now", ["git", "-C", str(repo), "gc", "-q", "--prune=now"], env=env, timeout=300)
            run.cmd("git fsck --full --strict", ["git", "-C", str(repo), "fsck", "--full", "--strict"],
                    env=env, timeout=300)
            status = run.cmd("git status --porcelain", ["git", "-C", str(repo), "status", "--porcelain"], env=env)
            if status:
                run.check("git status clean after the commits", status.output.strip() == "", status.output)
            head = run.cmd("git rev-parse HEAD", ["git", "-C", str(repo), "rev-parse", "HEAD"], env=env)
            if head and ok:
                # Fixed dates: the commits must be the very ones made on the plain directory.
                got = head.output.strip()
                if run.plain:
                    self.git_heads[r] = got
                else:
                    run.check("HEAD equals the plain directory's", got == self.git_heads.get(r),
                              f"{got} != {self.git_heads.get(r)}")
            back = run.scratch / f"back{r}"
            if run.cmd("git clone from the copy", ["git", "clone", "-q", "--no-local", str(repo), str(back)],
                       env=env, timeout=300):
                run.cmd("git fsck of the clone back", ["git", "-C", str(back), "fsck", "--full"], env=env)
            run.counts["rounds"] += 1

    # ---- python: venv + pip, compileall -------------------------------------------

    def test_python(self) -> None:
        self.exercise("python", self._python, profiles=(("generic", ""),))

    def ensure_wheel(self, pip_python: Path) -> Path:
        """The wheel, downloaded from PyPI once into the scenario venvs' folder
        and reused; both runs install that same file."""
        name, version = WHEEL
        wheels = scenario_venv.venv_root() / "wheels"
        found = sorted(wheels.glob(f"{name}-{version}-*.whl")) if wheels.is_dir() else []
        if found:
            return found[0]
        wheels.mkdir(parents=True, exist_ok=True)
        out = run_command([str(pip_python), "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
                           "--no-deps", "--only-binary=:all:", "-d", str(wheels), f"{name}=={version}"],
                          timeout=300)
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
        if out.rc != 0 or not found:
            msg = f"cannot download {name}=={version} from PyPI:\n{out.describe()}"
            if sm.in_ci():
                raise AssertionError(msg)
            raise unittest.SkipTest(msg)
        return found[0]

    def _python(self, run: Run) -> None:
        venv = run.root / "venv"
        if run.cmd("python3 -m venv", [sys.executable, "-m", "venv", str(venv)], timeout=300):
            py = venv / "bin" / "python"
            wheel = self.ensure_wheel(py)
            name, version = WHEEL
            run.notes.append(f"wheel {wheel.name}, {wheel.stat().st_size} bytes")
            if run.cmd("pip install", [str(py), "-m", "pip", "install", "--disable-pip-version-check",
                                       "--no-input", "--no-index", str(wheel)], timeout=300):
                run.cmd(f"import {name} from the venv",
                        [str(py), "-c", f"import {name}, sys; assert {name}.__file__.startswith(sys.prefix), "
                         f"{name}.__file__; assert {name}.__version__ == {version!r}; print({name}.__file__)"])
            run.cmd("pip check", [str(py), "-m", "pip", "check", "--disable-pip-version-check"])

        # compileall of a tree of stdlib packages, then imports from it.
        lib = run.root / "pylib"
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        lib.mkdir()
        for pkg in STDLIB_PACKAGES:
            shutil.copytree(stdlib / pkg, lib / pkg, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        n_py = sum(1 for _ in lib.rglob("*.py"))
        if not run.cmd("python3 -m compileall", [sys.executable, "-m", "compileall", "-q", "-j", "2", str(lib)],
                       timeout=300):
            return
        n_pyc = sum(1 for _ in lib.rglob("*.pyc"))
        run.notes.append(f"compileall: {n_py} .py, {n_pyc} .pyc")
        run.check("compileall wrote a .pyc for every .py", n_pyc >= n_py, f"{n_pyc} .pyc for {n_py} .py")
        mods = ["json", "email.mime.multipart", "http.client", "urllib.request", "xml.dom.minidom",
                "logging.handlers", "asyncio", "concurrent.futures", "unittest.mock"]
        script = ("import importlib, importlib.util, os, sys\n"
                  f"sys.path.insert(0, {str(lib)!r})\n"
                  f"for name in {mods!r}:\n"
                  "    m = importlib.import_module(name)\n"
                  f"    assert m.__file__.startswith({str(lib)!r}), m.__file__\n"
                  "    assert os.path.exists(importlib.util.cache_from_source(m.__file__)), m.__file__\n"
                  "import json; assert json.loads(json.dumps({'a': [1, 2]})) == {'a': [1, 2]}\n"
                  "print(len(sys.modules))\n")
        checker = run.scratch / "import_from_compiled_tree.py"
        checker.write_text(script)
        run.cmd("import from the compiled tree", [sys.executable, "-I", "-S", "-B", str(checker)])


def split_part(argv: list[str]) -> list[str]:
    """--part stress-ng | rest: ctest runs the stress-ng tests alone (they keep
    every mount busy) and the rest beside other tests. Returns unittest's argv,
    with -k patterns that select the part ("rest": every test but stress-ng's,
    so a new test lands in one part or the other, never in neither)."""
    if "--part" not in argv:
        return argv
    i = argv.index("--part")
    part = argv[i + 1]
    rest = argv[:i] + argv[i + 2:]
    names = unittest.TestLoader().getTestCaseNames(Exercisers)
    if part == "stress-ng":
        chosen = [n for n in names if n.startswith("test_stress_ng")]
    elif part == "rest":
        chosen = [n for n in names if not n.startswith("test_stress_ng")]
    else:
        raise SystemExit(f"--part {part}: expected stress-ng or rest")
    return rest + [f"Exercisers.{n}" for n in chosen]


if __name__ == "__main__":
    sm.require_environment(tools=["stress-ng", "fio", "rsync", "tar", "cp", "unzip",
                                  "git", "stat", "fusermount3"])
    unittest.main(verbosity=2, argv=split_part(sys.argv))
