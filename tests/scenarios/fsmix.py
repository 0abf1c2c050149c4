#!/usr/bin/env python3
"""fsmix: a seeded, reproducible mix of file-system operations (like
xfstests' fsstress), standard library only.

    fsmix.py run   --seed S --ops N --root DIR [--procs P] [--direct] [--entry]
    fsmix.py print --seed S --ops N [--procs P] [--direct] [--entry]

`run` performs the operations in DIR and prints one JSON line per process:
{"proc": k, "outcomes": ["ok", "ENOENT", …]}, every operation's outcome in
order ("ok", "ok:<digest>" for a read, an errno name, "nofd" for an fd-slot
operation on an empty slot, "empty" for an mmap of an empty file, a signal
name such as SIGBUS for an mmap store that died of it). `print`
writes the operations as a Python script that replays them (the shrunk
reproductions of fsmix_check.py are printed the same way).

The operations are a pure function of the seed: each one is drawn before any
is run and none depends on an earlier outcome, so the first K operations of
a seed are the same whatever N is, and any subset of them is a valid run
(which is how a failure is shrunk). Names come from a small pool (d0..d2
directories, f0..f3 files, created at most three levels deep; renames nest
them deeper) so that operations collide: renames onto existing names, links
across directories, unlinks of names another operation holds open.
Symlinks are made in links/, a container no other operation touches: inside
a directory entry sealfs refuses them by design (a name the profile hashes
must be a regular file; generic hashes every name).

--procs P: P processes with seeds derived from the seed; process k works in
p<k>/ three times out of four and in the shared s/ otherwise.
--entry: first publish a directory (written in .staging/k, renamed to
kernels/k, the TileLang save protocol) and run the mix inside it, so every
operation changes a published entry (and directory renames make entries
inside it).
--direct: also O_DIRECT writes (off by default).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import signal
import sys
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fsmix_gen import ENTRY_DIR, ENTRY_NAME, ENTRY_PARENT, Op, generate  # noqa: E402,F401


# ---- the operations (also the replay script's helpers) ------------------------------

def data(n: int, salt: int) -> bytes:
    return random.Random(salt).randbytes(n)


def _write_all(fd: int, buf: bytes, off: int) -> None:
    view = memoryview(buf)
    while view:
        done = os.pwrite(fd, view, off)
        view, off = view[done:], off + done


_fds: dict[int, int] = {}


class NoFd(Exception):
    pass


def create(p: str, n: int, salt: int) -> None:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, data(n, salt), 0)
    finally:
        os.close(fd)


def pwrite(p: str, off: int, n: int, salt: int) -> None:
    fd = os.open(p, os.O_WRONLY)
    try:
        _write_all(fd, data(n, salt), off)
    finally:
        os.close(fd)


def append(p: str, n: int, salt: int) -> None:
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data(n, salt))
    finally:
        os.close(fd)


def mmap_write(p: str, off: int, n: int, salt: int) -> Optional[str]:
    """The store runs in a forked child: one past the end of a file that
    another process shrank is SIGBUS, an outcome like an errno. This process
    opens and closes the file, and the child keeps no descriptor of it, so a
    child's death is never a writer's death (R4 would rightly abandon the
    file: the child shares the parent's open file, and its FLUSH at a death
    by a signal marked the handle abandoned, fsmix multi seed 3)."""
    fd = os.open(p, os.O_RDWR)
    try:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                code = 100 if _mmap_write(fd, off, n, salt) else 0
            except OSError as e:
                code = e.errno or 99
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    code = os.WEXITSTATUS(status)
    if code == 100:
        return "empty"
    if code:
        raise OSError(code, os.strerror(code))
    return None


def _mmap_write(fd: int, off: int, n: int, salt: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return True
    off %= size
    n = min(n, size - off)
    m = mmap.mmap(fd, size)
    # mmap keeps a dup of fd: every descriptor goes before the pages are
    # touched, and the child dies (if it does) holding only the mapping.
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    m[off:off + n] = data(n, salt)
    m.flush()
    return False


def truncate(p: str, size: int) -> None:
    os.truncate(p, size)


def ftruncate(p: str, size: int) -> None:
    fd = os.open(p, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def link(src: str, dst: str) -> None:
    os.link(src, dst, follow_symlinks=False)


def unlink(p: str) -> None:
    os.unlink(p)


def rename(src: str, dst: str) -> None:
    os.rename(src, dst)


rename_dir = rename


def mkdir(p: str) -> None:
    os.mkdir(p, 0o755)


def rmdir(p: str) -> None:
    os.rmdir(p)


def symlink(target: str, p: str) -> None:
    os.makedirs(os.path.dirname(p), exist_ok=True)  # links/, a container
    os.symlink(target, p)


def setxattr(p: str, name: str, n: int, salt: int) -> None:
    os.setxattr(p, name, data(n, salt), follow_symlinks=False)


def removexattr(p: str, name: str) -> None:
    os.removexattr(p, name, follow_symlinks=False)


def copy_range(src: str, dst: str, off_src: int, off_dst: int, n: int) -> None:
    fi = os.open(src, os.O_RDONLY)
    try:
        fo = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while n > 0:
                done = os.copy_file_range(fi, fo, n, off_src, off_dst)
                if done == 0:
                    break
                n, off_src, off_dst = n - done, off_src + done, off_dst + done
        finally:
            os.close(fo)
    finally:
        os.close(fi)


def splice(src: str, dst: str, off_src: int, off_dst: int, n: int) -> None:
    r, w = os.pipe()
    fi = fo = -1
    try:
        fi = os.open(src, os.O_RDONLY)
        fo = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
        got = os.splice(fi, w, n, offset_src=off_src)
        while got > 0:
            done = os.splice(r, fo, got, offset_dst=off_dst)
            got, off_dst = got - done, off_dst + done
    finally:
        for fd in (fi, fo, r, w):
            if fd >= 0:
                os.close(fd)


def fsync(p: str) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def chmod(p: str, mode: int) -> None:
    os.chmod(p, mode)


def read(p: str) -> str:
    with open(p, "rb") as f:
        return "ok:" + hashlib.sha256(f.read()).hexdigest()[:12]


def hold(slot: int, p: str) -> None:
    release(slot)
    _fds[slot] = os.open(p, os.O_RDWR)


def _slot(slot: int) -> int:
    if slot not in _fds:
        raise NoFd()
    return _fds[slot]


def fd_pwrite(slot: int, off: int, n: int, salt: int) -> None:
    _write_all(_slot(slot), data(n, salt), off)


def fd_truncate(slot: int, size: int) -> None:
    os.ftruncate(_slot(slot), size)


def release(slot: int) -> None:
    fd = _fds.pop(slot, None)
    if fd is not None:
        os.close(fd)


def release_all() -> None:
    for slot in list(_fds):
        release(slot)


def dwrite(p: str, off: int, n: int, salt: int) -> Optional[str]:
    fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, n) as buf:  # page-aligned, as O_DIRECT wants
            buf[:] = data(n, salt)
            if os.pwrite(fd, buf, off) != n:
                return "short"
    finally:
        os.close(fd)
    return None


def apply(op: Op) -> str:
    """Run one operation in the current directory; its outcome."""
    try:
        res = globals()[op.kind](*op.args)
    except NoFd:
        return "nofd"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
    return res if isinstance(res, str) else "ok"


# ---- entry prelude and runs ---------------------------------------------------------

def entry_prelude() -> list[Op]:
    """Publish a directory the TileLang way; the mix then runs inside it."""
    staging = f".staging/{ENTRY_NAME}_1"
    return [Op("mkdir", (".staging",)), Op("mkdir", (ENTRY_PARENT,)), Op("mkdir", (staging,)),
            Op("create", (f"{staging}/f0", 3000, 1)), Op("create", (f"{staging}/f1", 100, 2)),
            Op("mkdir", (f"{staging}/d0",)), Op("create", (f"{staging}/d0/f2", 5000, 3)),
            Op("rename_dir", (staging, ENTRY_DIR))]


def run_ops(root: str, ops: list[Op], entry: bool = False) -> list[str]:
    """Chdir into root (into the published entry with entry) and run ops."""
    os.chdir(root)
    if entry:
        bad = [(op, out) for op in entry_prelude() if (out := apply(op)) != "ok"]
        if bad:
            raise RuntimeError(f"entry prelude failed: {bad}")
        os.chdir(ENTRY_DIR)
    outcomes = [apply(op) for op in ops]
    release_all()
    return outcomes


def run_procs(root: str, lists: list[list[Op]], entry: bool = False) -> list[list[str]]:
    """Each list in a forked process of its own, all at once."""
    if len(lists) == 1:
        return [run_ops(root, lists[0], entry)]
    if entry:
        os.chdir(root)
        for op in entry_prelude():
            apply(op)
        root = os.path.join(root, ENTRY_DIR)
    for k in range(len(lists)):
        os.makedirs(os.path.join(root, f"p{k}"), exist_ok=True)
    os.makedirs(os.path.join(root, "s"), exist_ok=True)
    children = []
    for k, ops in enumerate(lists):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            code = 0
            try:
                out = json.dumps(run_ops(root, ops)).encode()
                with os.fdopen(wfd, "wb") as w:
                    w.write(out)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(wfd)
        children.append((pid, rfd))
    results = []
    for pid, rfd in children:
        with os.fdopen(rfd, "rb") as r:
            raw = r.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not raw:
            raise RuntimeError(f"fsmix process {pid} failed (status {status})")
        results.append(json.loads(raw))
    return results


def replay_script(ops: list[Op], entry: bool = False) -> str:
    """A Python script that replays ops in the directory given as argv[1]."""
    here = os.path.dirname(os.path.abspath(__file__))
    lines = ["import os, sys", f"sys.path.insert(0, {here!r})", "from fsmix import *",
             "os.chdir(sys.argv[1])"]
    if entry:
        lines += [op.python() for op in entry_prelude()] + [f"os.chdir({ENTRY_DIR!r})"]
    width = max((len(op.python()) for op in ops), default=0)
    body = [f"{op.python():<{width}}  # {op.shell()}" for op in ops]
    return "\n".join(lines + body + ["release_all()"]) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("run", "print"))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--root")
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--entry", action="store_true")
    a = ap.parse_args(argv)
    lists = generate(a.seed, a.ops, a.procs, a.direct, a.entry)
    if a.command == "print":
        for k, ops in enumerate(lists):
            if len(lists) > 1:
                print(f"# process {k}: in p{k}/ and s/, all at once")
            sys.stdout.write(replay_script(ops, a.entry))
        return 0
    if not a.root:
        ap.error("run needs --root")
    os.umask(0o022)
    os.makedirs(a.root, exist_ok=True)
    for k, outcomes in enumerate(run_procs(os.path.abspath(a.root), lists, a.entry)):
        print(json.dumps({"proc": k, "outcomes": outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
