"""fsmix's operations and how they are drawn (see fsmix.py).

Each operation is drawn from the seed alone, before any is run: a Model of
the names that should exist biases the draw towards them (so most
operations hit something), but the model is never checked against the file
system, so the first K operations of a seed are the same whatever N is and
any subset of them is a valid run (which is how a failure is shrunk).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

DIRS = ("d0", "d1", "d2")
FILES = ("f0", "f1", "f2", "f3")
FD_SLOTS = 3
XATTRS = ("user.a", "user.b")
ENTRY_PARENT = "kernels"
ENTRY_NAME = "k"
ENTRY_DIR = f"{ENTRY_PARENT}/{ENTRY_NAME}"
LINKS = "links"
ALIGN = 4096

# kind → weight. Names say what the operation does; args are in Op.
WEIGHTS = {
    "create": 8, "pwrite": 10, "append": 5, "mmap_write": 4, "truncate": 4,
    "ftruncate": 3, "link": 6, "unlink": 6, "rename": 8, "rename_dir": 5,
    "mkdir": 6, "rmdir": 3, "symlink": 2, "setxattr": 3, "removexattr": 2,
    "copy_range": 3, "splice": 3, "fsync": 2, "chmod": 2, "read": 5,
    "hold": 3, "fd_pwrite": 4, "fd_truncate": 2, "release": 3,
}
DIRECT_WEIGHTS = {"dwrite": 3}


@dataclass(frozen=True)
class Op:
    kind: str
    args: tuple

    def python(self) -> str:
        """The operation as one line of the replay script (helpers below)."""
        return f"{self.kind}({', '.join(repr(a) for a in self.args)})"

    def shell(self) -> str:
        """Roughly the same in a shell (other bytes; slots are descriptors 3-5)."""
        a = self.args
        q = [str(x) for x in a]
        forms = {
            "create": lambda: f"set -C; head -c {a[1]} /dev/urandom > {a[0]}; set +C",
            "pwrite": lambda: f"head -c {a[2]} /dev/urandom | dd of={a[0]} bs=1 seek={a[1]} conv=notrunc",
            "append": lambda: f"head -c {a[1]} /dev/urandom >> {a[0]}",
            "mmap_write": lambda: f"(mmap) write {a[2]} bytes at {a[1]} % size of {a[0]}, msync",
            "truncate": lambda: f"truncate -s {a[1]} {a[0]}",
            "ftruncate": lambda: f"truncate -s {a[1]} {a[0]}   # through an fd",
            "link": lambda: f"ln -P {a[0]} {a[1]}", "unlink": lambda: f"rm {a[0]}",
            "rename": lambda: f"mv -T {a[0]} {a[1]}", "rename_dir": lambda: f"mv -T {a[0]} {a[1]}",
            "mkdir": lambda: f"mkdir {a[0]}", "rmdir": lambda: f"rmdir {a[0]}",
            "symlink": lambda: f"mkdir -p {os.path.dirname(a[1])}; ln -s {a[0]} {a[1]}",
            "setxattr": lambda: f"setfattr -h -n {a[1]} -v <{a[2]} bytes> {a[0]}",
            "removexattr": lambda: f"setfattr -h -x {a[1]} {a[0]}",
            "copy_range": lambda: f"copy_file_range {a[0]}@{a[2]} -> {a[1]}@{a[3]}, {a[4]} bytes",
            "splice": lambda: f"splice {a[0]}@{a[2]} -> pipe -> {a[1]}@{a[3]}, {a[4]} bytes",
            "fsync": lambda: f"sync {a[0]}", "chmod": lambda: f"chmod {a[1]:o} {a[0]}",
            "read": lambda: f"cat {a[0]} > /dev/null",
            "hold": lambda: f"exec {a[0] + 3}<>{a[1]}",
            "fd_pwrite": lambda: f"write {a[2]} bytes at {a[1]} through fd {a[0] + 3}",
            "fd_truncate": lambda: f"ftruncate fd {a[0] + 3} to {a[1]}",
            "release": lambda: f"exec {a[0] + 3}>&-",
            "dwrite": lambda: f"dd if=/dev/urandom of={a[0]} bs={a[2]} count=1 seek={a[1]} "
                              "oflag=direct,seek_bytes conv=notrunc",
        }
        return forms[self.kind]() if self.kind in forms else f"{self.kind} {' '.join(q)}"


# ---- generation -----------------------------------------------------------------

class Model:
    """What the generator believes exists: only a bias towards names that
    exist, never consulted at run time (a wrong guess is one more ENOENT)."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.files: set[str] = set()
        self.dirs: set[str] = {r for r in roots if r}

    def has_parent(self, p: str) -> bool:
        parent = os.path.dirname(p)
        return parent == "" or parent in self.dirs

    def free(self, p: str) -> bool:
        return self.has_parent(p) and p not in self.files and p not in self.dirs

    def children(self, d: str) -> list[str]:
        pre = d + "/"
        return [p for p in self.files | self.dirs if p.startswith(pre)]

    def update(self, op: "Op") -> None:
        k, a = op.kind, op.args
        if k in ("create", "symlink", "copy_range", "splice", "link"):
            dst = a[1] if k in ("symlink", "link", "copy_range", "splice") else a[0]
            if self.free(dst) and (k != "link" or a[0] in self.files):
                self.files.add(dst)
        elif k == "unlink":
            self.files.discard(a[0])
        elif k == "mkdir":
            if self.free(a[0]):
                self.dirs.add(a[0])
        elif k == "rmdir":
            if a[0] in self.dirs and not self.children(a[0]):
                self.dirs.discard(a[0])
        elif k in ("rename", "rename_dir"):
            src, dst = a
            if src in self.files and self.has_parent(dst) and dst not in self.dirs:
                self.files.discard(src)
                self.files.add(dst)
            elif (src in self.dirs and self.has_parent(dst) and dst not in self.files
                  and not (dst + "/").startswith(src + "/") and not self.children(dst)):
                moved = [src] + self.children(src)
                for p in moved:
                    new = dst + p[len(src):]
                    for group in (self.files, self.dirs):
                        if p in group:
                            group.discard(p)
                            group.add(new)


class Gen:
    def __init__(self, seed: int, roots: tuple[str, ...] = ("",), direct: bool = False,
                 entry: bool = False) -> None:
        self.rng = random.Random(seed)
        self.entry = entry
        self.roots = roots
        self.model = Model(roots)
        weights = dict(WEIGHTS)
        if direct:
            weights.update(DIRECT_WEIGHTS)
        self.kinds = list(weights)
        self.weights = [weights[k] for k in self.kinds]

    def _parent(self) -> str:
        shallow = sorted(d for d in self.model.dirs if d.count("/") < 2)
        return self.rng.choice(list(self.roots) + shallow)

    def _join(self, parent: str, name: str) -> str:
        return f"{parent}/{name}" if parent else name

    def new_file(self) -> str:
        return self._join(self._parent(), self.rng.choice(FILES))

    def new_dir(self) -> str:
        return self._join(self._parent(), self.rng.choice(DIRS))

    def file(self) -> str:
        """Mostly a file that exists; else any file name."""
        if self.model.files and self.rng.random() < 0.8:
            return self.rng.choice(sorted(self.model.files))
        return self.new_file()

    def dir(self) -> str:
        if self.model.dirs and self.rng.random() < 0.8:
            return self.rng.choice(sorted(self.model.dirs - set(self.roots)) or [self.new_dir()])
        return self.new_dir()

    def any(self) -> str:
        return self.file() if self.rng.random() < 0.7 else self.dir()

    def symlink(self) -> tuple[str, str]:
        """A symlink in the links/ container of a root, pointing into the
        tree (symlinks inside directory entries are refused by design, so
        they get a container no rename or rmdir of the mix touches)."""
        root = self.rng.choice(self.roots)
        name = self.rng.choice(FILES)
        target = self.any()
        if self.entry:
            return f"../{ENTRY_DIR}/{target}", f"../../{LINKS}/{name}"
        depth = root.count("/") + 1 if root else 0
        return "../" * (depth + 1) + target, self._join(root, f"{LINKS}/{name}")

    def link_name(self) -> str:
        """A name in links/, for the unlinks and reads that go through symlinks."""
        if self.entry:
            return f"../../{LINKS}/{self.rng.choice(FILES)}"
        return self._join(self.rng.choice(self.roots), f"{LINKS}/{self.rng.choice(FILES)}")

    def size(self) -> int:
        r = self.rng.random()
        if r < 0.1:
            return 0
        if r < 0.85:
            return self.rng.randint(1, 8192)
        return self.rng.randint(8193, 200_000)

    def offset(self) -> int:
        return self.rng.choice((0, 0, self.rng.randint(0, 4096), self.rng.randint(0, 70_000)))

    def salt(self) -> int:
        return self.rng.randint(0, 1 << 30)

    def op(self) -> Op:
        op = self._draw()
        self.model.update(op)
        return op

    def _draw(self) -> Op:
        k = self.rng.choices(self.kinds, self.weights)[0]
        g = self
        a: tuple
        if k == "create":
            a = (g.new_file() if g.rng.random() < 0.8 else g.file(), g.size(), g.salt())
        elif k in ("pwrite", "mmap_write"):
            a = (g.file(), g.offset(), g.rng.randint(1, 16384), g.salt())
        elif k == "append":
            a = (g.file(), g.rng.randint(1, 8192), g.salt())
        elif k in ("truncate", "ftruncate"):
            a = (g.file(), g.offset())
        elif k == "link":
            a = (g.file(), g.new_file())
        elif k in ("unlink", "read"):
            a = (g.link_name() if g.rng.random() < 0.1 else g.file(),)
        elif k == "fsync":
            a = (g.any(),)
        elif k == "rename":
            a = (g.file() if g.rng.random() < 0.85 else g.dir(),
                 g.new_file() if g.rng.random() < 0.6 else g.file())
        elif k == "rename_dir":
            a = (g.dir(), g.new_dir() if g.rng.random() < 0.7 else g.dir())
        elif k == "mkdir":
            a = (g.new_dir(),)
        elif k == "rmdir":
            a = (g.dir(),)
        elif k == "symlink":
            a = g.symlink()
        elif k == "setxattr":
            a = (g.any(), g.rng.choice(XATTRS), g.rng.randint(1, 64), g.salt())
        elif k == "removexattr":
            a = (g.any(), g.rng.choice(XATTRS))
        elif k in ("copy_range", "splice"):
            a = (g.file(), g.new_file() if g.rng.random() < 0.3 else g.file(), g.offset(), g.offset(),
                 g.rng.randint(1, 65536))
        elif k == "chmod":
            a = (g.any(), g.rng.choice((0o600, 0o644, 0o640, 0o755, 0o444)))
        elif k == "hold":
            a = (g.rng.randrange(FD_SLOTS), g.file())
        elif k == "fd_pwrite":
            a = (g.rng.randrange(FD_SLOTS), g.offset(), g.rng.randint(1, 16384), g.salt())
        elif k == "fd_truncate":
            a = (g.rng.randrange(FD_SLOTS), g.offset())
        elif k == "release":
            a = (g.rng.randrange(FD_SLOTS),)
        elif k == "dwrite":
            a = (g.file(), ALIGN * g.rng.randint(0, 16), ALIGN * g.rng.randint(1, 4), g.salt())
        else:
            raise AssertionError(k)
        return Op(k, a)


def proc_seed(seed: int, k: int) -> int:
    return seed * 1000 + k + 1


def generate(seed: int, n: int, procs: int = 0, direct: bool = False,
             entry: bool = False) -> list[list[Op]]:
    """One list of n operations per process (one list when procs is 0)."""
    if procs <= 0:
        g = Gen(seed, direct=direct, entry=entry)
        return [[g.op() for _ in range(n)]]
    out = []
    for k in range(procs):
        g = Gen(proc_seed(seed, k), (f"p{k}", f"p{k}", f"p{k}", "s"), direct, entry)
        out.append([g.op() for _ in range(n)])
    return out
