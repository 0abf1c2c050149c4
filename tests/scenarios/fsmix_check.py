#!/usr/bin/env python3
"""Run fsmix seeds on a sealfs mount and judge them; shrink a failure.

    fsmix_check.py check  --seed S [--ops N] [--profile P] [--entry] [--procs P] [--direct]
    fsmix_check.py sweep  --seeds A-B [same options]      # one line per failing seed
    fsmix_check.py shrink --seed S [same options]         # fewest operations that still fail

The daemon is $SEALFS_BIN (or --sealfs). Single process (--procs 0): the
same operations run in a plain directory and on a fresh mount; every
outcome, and the final tree name by name (type, mode, size, link count,
SHA-256 of the content, symlink target, user.* xattrs; not times, not inode
numbers), must be the same. Any number of processes: afterwards nothing is in
B/.sealfs/quarantine, `sealfs fsck` of B after the unmount exits 0 with no
invalid, foreign or unlisted entry, and a fresh mount of B shows the tree
the first mount showed (a file hidden at the next mount is data lost).
Multi-process runs are not compared with a plain directory (their order is
the scheduler's), but no operation may fail with an errno a plain directory
never gives here (EIO, EBADMSG, EBUSY, …).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsmix  # noqa: E402
import sealfs_mount as sm  # noqa: E402

RUN_TIMEOUT_S = 120
# What a plain local directory never answers to these operations (run as root).
NEVER_ON_PLAIN = {"EIO", "EBADMSG", "EBUSY", "ESTALE", "ENODEV", "EOPNOTSUPP", "EACCES",
                  "ENOSYS", "EFAULT", "EAGAIN", "ENFILE", "EMFILE", "ENOSPC", "ENOTRECOVERABLE"}
HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Config:
    seed: int
    ops: int = 300
    profile: str = "generic"
    entry: bool = False
    procs: int = 0
    direct: bool = False

    def flags(self) -> str:
        out = f"--seed {self.seed} --ops {self.ops} --profile {self.profile}"
        out += " --entry" * self.entry + " --direct" * self.direct
        return out + (f" --procs {self.procs}" if self.procs else "")

    def reproduce(self) -> str:
        return (f"SEALFS_BIN=build/release/fs/sealfs python3 tests/scenarios/fsmix_check.py check "
                f"{self.flags()}")


@dataclass
class Verdict:
    problems: list[tuple[str, str]] = field(default_factory=list)  # (category, text)
    seconds: float = 0.0
    errnos: set[str] = field(default_factory=set)  # the "errno" problem's names

    def add(self, category: str, text: str) -> None:
        self.problems.append((category, text))

    @property
    def ok(self) -> bool:
        return not self.problems

    def categories(self) -> list[str]:
        return [c for c, _ in self.problems]

    def symptom(self) -> str:
        """The first problem, short (for KNOWN_FAILURES' comments)."""
        if not self.problems:
            return "ok"
        c, t = self.problems[0]
        first = t.splitlines()[0] if t else ""
        m = re.match(r"op (\d+) (\w+)\(.*?\): (plain .*)", first)
        if m:
            first = f"op {m.group(1)} {m.group(2)}: {m.group(3)}"
        return f"{c}: {first}"[:110]

    def summary(self) -> str:
        return "; ".join(f"{c}: {t.splitlines()[0] if t else ''}" for c, t in self.problems)


# ---- the tree, name by name -------------------------------------------------------------

def _err(e: OSError) -> str:
    return "error:" + errno.errorcode.get(e.errno or 0, str(e.errno))


def _xattrs(path: str) -> tuple:
    try:
        names = sorted(n for n in os.listxattr(path, follow_symlinks=False) if n.startswith("user."))
        return tuple((n, hashlib.sha256(os.getxattr(path, n, follow_symlinks=False)).hexdigest()[:12])
                     for n in names)
    except OSError as e:
        return (_err(e),)


def snapshot(root: str) -> dict[str, tuple]:
    """rel path → what a user can see of it (no times, no inode numbers)."""
    out: dict[str, tuple] = {}

    def walk(rel: str) -> None:
        try:
            names = sorted(os.listdir(os.path.join(root, rel) if rel else root))
        except OSError as e:
            out[rel + "/"] = ("listdir", _err(e))
            return
        for name in names:
            r = f"{rel}/{name}" if rel else name
            p = os.path.join(root, r)
            try:
                st = os.lstat(p)
            except OSError as e:
                out[r] = ("listed-but-lstat", _err(e))
                continue
            perm = oct(stat.S_IMODE(st.st_mode))
            if stat.S_ISLNK(st.st_mode):
                out[r] = ("symlink", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[r] = ("dir", perm, st.st_nlink, _xattrs(p))
                walk(r)
            elif stat.S_ISREG(st.st_mode):
                try:
                    with open(p, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()[:16]
                except OSError as e:
                    digest = _err(e)
                out[r] = ("file", perm, st.st_size, st.st_nlink, digest, _xattrs(p))
            else:
                out[r] = ("other", oct(st.st_mode))
    walk("")
    return out


def diff_trees(a: dict, b: dict, a_name: str, b_name: str, limit: int = 12) -> list[str]:
    lines = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            lines.append(f"{name}: {a_name} {a.get(name, 'absent')} | {b_name} {b.get(name, 'absent')}")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more"]
    return lines


# ---- running operations in a child -------------------------------------------------------

def run_in_child(root: str, lists: list[list[fsmix.Op]], entry: bool,
                 timeout: float = RUN_TIMEOUT_S) -> list[list[str]]:
    """fsmix.run_procs in a forked child (its cwd must not pin the mount),
    bounded in time: a hung mount raises TimeoutError."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        code = 0
        try:
            os.setpgid(0, 0)
            os.umask(0o022)
            raw = json.dumps(fsmix.run_procs(root, lists, entry)).encode()
            with os.fdopen(wfd, "wb") as w:
                w.write(raw)
        except BaseException as e:  # the parent reports it
            os.write(wfd, json.dumps({"error": repr(e)}).encode())
            code = 1
        os._exit(code)
    os.close(wfd)
    chunks, deadline = [], time.monotonic() + timeout
    with os.fdopen(rfd, "rb") as r:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                raise TimeoutError(f"the operations did not finish within {timeout:.0f}s")
            chunk = os.read(r.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks) or b'{"error": "no output"}')
    if isinstance(result, dict):
        raise RuntimeError(result["error"])
    return result


# ---- the mount's side -------------------------------------------------------------------

def quarantine(backing: str) -> list[str]:
    qdir = os.path.join(backing, ".sealfs", "quarantine")
    try:
        slots = sorted(os.listdir(qdir))
    except FileNotFoundError:
        return []
    out = []
    for slot in slots:
        try:
            with open(os.path.join(qdir, slot, "reason.json")) as f:
                info = json.load(f)
            out.append(f"{info.get('path')}: {info.get('reason')}")
        except (OSError, ValueError):
            out.append(f"{slot}: (no readable reason.json)")
    return out


FSCK_SUMMARY = re.compile(r"entries (\d+), valid (\d+), invalid (\d+), foreign (\d+), unlisted (\d+)")


def fsck(binary: str, backing: str, profile: str) -> Optional[str]:
    """None when `sealfs fsck` finds B clean, else what it said."""
    r = subprocess.run([binary, "fsck", "-o", f"profile={profile}", backing], capture_output=True,
                       text=True, timeout=300)
    out = r.stdout + r.stderr
    m = FSCK_SUMMARY.search(out)
    if r.returncode == 0 and m and m.group(3) == m.group(4) == m.group(5) == "0":
        return None
    keep = [line for line in out.splitlines() if line.strip()][-8:]
    return f"exit {r.returncode}: " + " / ".join(keep)


def interesting_log(text: str, limit: int = 6) -> list[str]:
    lines = [line for line in text.splitlines()
             if re.search(r"quarantin|abandon|fail|error|hidden|damage", line, re.I)]
    return lines[:limit]


def check(cfg: Config, binary: str, lists: Optional[list[list[fsmix.Op]]] = None,
          only: str = "") -> Verdict:
    """Run cfg's operations (or the given lists) and judge them; with only
    (a category), skip the later stages that cannot show it (shrinking)."""
    started = time.monotonic()
    v = Verdict()
    if lists is None:
        lists = fsmix.generate(cfg.seed, cfg.ops, cfg.procs, cfg.direct, cfg.entry)
    with tempfile.TemporaryDirectory(prefix="fsmix.") as tmp:
        plain, backing, mnt = (os.path.join(tmp, n) for n in ("plain", "backing", "mnt"))
        for d in (plain, backing, mnt):
            os.mkdir(d)
        expected: Optional[tuple] = None
        if cfg.procs == 0:
            out = run_in_child(plain, lists, cfg.entry)
            expected = (out[0], snapshot(plain))
        _judge_mount(cfg, binary, lists, backing, mnt, expected, v, only)
    v.seconds = time.monotonic() - started
    return v


def _mount(cfg: Config, binary: str, backing: str, mnt: str) -> sm.SealfsMount:
    return sm.SealfsMount(options=[f"profile={cfg.profile}"], backing=backing, mountpoint=mnt,
                          binary=binary)


def _judge_mount(cfg: Config, binary: str, lists: list[list[fsmix.Op]], backing: str, mnt: str,
                 expected: Optional[tuple], v: Verdict, only: str = "") -> None:
    first: dict = {}
    try:
        with _mount(cfg, binary, backing, mnt) as m:
            try:
                outcomes = run_in_child(mnt, lists, cfg.entry)
            except (TimeoutError, RuntimeError) as e:
                v.add("run", str(e))
                return
            first = snapshot(mnt)
            if expected is not None:
                _compare_single(lists[0], expected, outcomes[0], first, v)
            else:
                odd = [f"p{k} op {i} {lists[k][i].python()}: {o}" for k, out in enumerate(outcomes)
                       for i, o in enumerate(out) if o in NEVER_ON_PLAIN]
                if odd:
                    names = sorted({line.rsplit(": ", 1)[1] for line in odd})
                    v.errnos = set(names)
                    v.add("errno", f"errnos a plain directory never gives: {names}\n"
                          + "\n".join(odd[:8]))
            m.unmount()
            log = m.log_text()
    except sm.MountError as e:
        v.add("daemon", str(e)[:2000])
        return
    q = quarantine(backing)
    if q:
        v.add("quarantine", f"{len(q)} slot(s): " + "; ".join(q[:6])
              + ("\n  daemon: " + "\n  daemon: ".join(interesting_log(log)) if log else ""))
    if only in ("outcome", "tree", "errno", "run"):
        return
    bad = fsck(binary, backing, cfg.profile)
    if bad:
        v.add("fsck", bad)
    if only == "fsck":
        return
    try:
        with _mount(cfg, binary, backing, mnt) as m:
            again = snapshot(mnt)
    except sm.MountError as e:
        v.add("daemon", "at the second mount: " + str(e)[:2000])
        return
    lost = diff_trees(first, again, "first mount", "next mount")
    if lost:
        v.add("remount", "the next mount shows another tree:\n" + "\n".join(lost))
    q2 = quarantine(backing)
    if len(q2) > len(q):
        v.add("quarantine", f"at the next mount: {len(q2) - len(q)} more: " + "; ".join(q2[len(q):][:6]))


def _compare_single(ops: list[fsmix.Op], expected: tuple, got: list[str], tree: dict,
                    v: Verdict) -> None:
    want, plain_tree = expected
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            v.add("outcome", f"op {i} {ops[i].python()}: plain {a}, sealfs {b}")
            break
    diff = diff_trees(plain_tree, tree, "plain", "sealfs")
    if diff:
        v.add("tree", "the mount's tree differs from the plain directory's:\n" + "\n".join(diff))


# ---- shrinking --------------------------------------------------------------------------

def shrink(cfg: Config, binary: str, budget_s: float = 600,
           log: Callable[[str], None] = print) -> tuple[list[fsmix.Op], Verdict]:
    """The fewest operations (a subset, in order) whose run still shows the
    same first problem category (a silent tree difference stays silent).
    Single process only."""
    ops = fsmix.generate(cfg.seed, cfg.ops, 0, cfg.direct, cfg.entry)[0]
    base = check(cfg, binary, [ops])
    if base.ok:
        raise ValueError(f"seed {cfg.seed} does not fail")
    want = base.categories()[0]
    deadline = time.monotonic() + budget_s
    best = (ops, base)

    def fails(subset: list[fsmix.Op]) -> bool:
        nonlocal best
        v = check(cfg, binary, [subset], only=want)
        hit = v.categories()[:1] == [want]  # the same first symptom, not just any
        if hit and len(subset) < len(best[0]):
            best = (subset, v)
        return hit

    m = re.match(r"op (\d+) ", dict(base.problems).get("outcome", "")) if want == "outcome" else None
    if m:
        n = int(m.group(1)) + 1
        if fails(ops[:n]):
            ops = ops[:n]
    lo, hi = 0, len(ops)  # binary search for the shortest failing prefix
    while lo + 1 < hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        if fails(ops[:mid]):
            hi = mid
        else:
            lo = mid
    ops = ops[:hi]
    log(f"  prefix of {len(ops)} operations still fails ({want})")
    chunk = max(1, len(ops) // 2)  # then drop runs of operations (ddmin)
    while chunk >= 1 and time.monotonic() < deadline:
        i, dropped = 0, False
        while i < len(ops) and time.monotonic() < deadline:
            trial = ops[:i] + ops[i + chunk:]
            if trial and fails(trial):
                ops, dropped = trial, True
            else:
                i += chunk
        if not dropped:
            chunk //= 2
    log(f"  {len(ops)} operations still fail")
    return best


# ---- command line -----------------------------------------------------------------------

def parse_seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("check", "sweep", "shrink"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default="")
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--profile", default="generic")
    ap.add_argument("--entry", action="store_true")
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--sealfs", default=os.environ.get("SEALFS_BIN", ""))
    ap.add_argument("--budget", type=float, default=600, help="seconds a shrink may take")
    a = ap.parse_args(argv)
    binary = a.sealfs or sm.sealfs_binary()
    seeds = parse_seeds(a.seeds) if a.seeds else [a.seed]
    failed = 0
    for seed in seeds:
        cfg = Config(seed, a.ops, a.profile, a.entry, a.procs, a.direct)
        if a.command == "shrink":
            ops, v = shrink(cfg, binary, a.budget)
            print(f"# seed {seed}: {len(ops)} operations; {v.summary()}")
            print(fsmix.replay_script(ops, cfg.entry), end="")
            for c, t in v.problems:
                print(f"# {c}: " + t.replace("\n", "\n#   "))
            continue
        v = check(cfg, binary)
        failed += not v.ok
        if a.command == "check":
            print(f"seed {seed}: {'ok' if v.ok else 'FAIL'} ({v.seconds:.1f}s)")
            for c, t in v.problems:
                print(f"  {c}: " + t.replace("\n", "\n    "))
        elif not v.ok:
            print(f"seed {seed} FAIL [{','.join(sorted(set(v.categories())))}] {v.summary()[:300]}",
                  flush=True)
    if a.command == "sweep":
        print(f"{failed} of {len(seeds)} seeds failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
