"""Mount helper for the scenario tests: run a real `sealfs` daemon on a
temporary backing directory, and damage files behind its back.

Standard library only. Typical use:

    with SealfsMount(options=["profile=generic", "cache_timeout=0"]) as m:
        ...                       # programs use m.mountpoint
        truncate_file(m.backing_path("a/b"))
    # unmounted here; the daemon must have exited 0

The daemon binary comes from $SEALFS_BIN (ctest sets it). `argv` may replace
the whole command line, which is how the helper itself was checked against
another FUSE filesystem (bindfs) before the daemon could mount.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

MOUNT_TIMEOUT_S = 20.0   # from spawn to "the mountpoint is a FUSE mount"
UNMOUNT_TIMEOUT_S = 20.0  # from fusermount3 -u to the daemon's exit
RESERVED_PREFIX = ".sealfs"

# Exit status that ctest's SKIP_RETURN_CODE turns into "skipped".
SKIP_EXIT_CODE = 77


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def sealfs_binary() -> str:
    path = os.environ.get("SEALFS_BIN", "")
    if not path:
        raise RuntimeError("SEALFS_BIN is not set (ctest sets it to the built sealfs binary)")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"SEALFS_BIN={path} is not an executable file")
    return path


def fuse_unusable_reason() -> Optional[str]:
    """None when a FUSE mount can be attempted here, else a one-line reason."""
    try:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return f"/dev/fuse cannot be opened: {e.strerror}"
    os.close(fd)
    if shutil.which("fusermount3") is None and os.geteuid() != 0:
        return "fusermount3 is not installed and we are not root"
    return None


def require_environment(tools: Iterable[str] = ()) -> None:
    """Called before unittest.main(). Outside CI a missing prerequisite skips
    the whole file with a one-line reason (exit 77, which ctest reports as
    skipped); in CI (CI=true) it is a failure, never a silent skip."""
    problems = []
    reason = fuse_unusable_reason()
    if reason:
        problems.append(reason)
    for tool in tools:
        if shutil.which(tool) is None:
            problems.append(f"{tool} is not installed")
    if not problems:
        return
    line = "; ".join(problems)
    if in_ci():
        print(f"FAIL (CI=true): {line}", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: {line}")
    sys.exit(SKIP_EXIT_CODE)


# ---- mount table --------------------------------------------------------------

def _unescape_mountinfo(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def fuse_fstype_at(mountpoint: str) -> Optional[str]:
    """The filesystem type of the topmost mount at `mountpoint` when it is a
    FUSE mount ("fuse", "fuse.sealfs", …), else None."""
    target = os.path.realpath(mountpoint)
    found = None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) < 5 or not right:
                continue
            if _unescape_mountinfo(fields[4]) != target:
                continue
            fstype = right.split()[0]
            found = fstype  # later lines are mounted on top of earlier ones
    if found and (found == "fuse" or found.startswith("fuse.")):
        return found
    return None


# ---- the mount ------------------------------------------------------------------

class MountError(AssertionError):
    """The daemon did not mount, did not unmount, or exited non-zero."""


class SealfsMount:
    """Context manager: a sealfs daemon in the foreground (-f) as a child.

    backing / mountpoint: existing directories to use; by default both are
    made in a fresh temporary directory (removed at exit). They may be the
    same path ("mount over"). options: the -o list, e.g. ["profile=tilelang"].
    """

    def __init__(self, options: Sequence[str] = (), backing: Optional[str] = None,
                 mountpoint: Optional[str] = None, binary: Optional[str] = None,
                 argv: Optional[Callable[[str, str], list[str]]] = None,
                 env: Optional[dict[str, str]] = None, exit_timeout: float = UNMOUNT_TIMEOUT_S) -> None:
        self._options = list(options)
        self._exit_timeout = exit_timeout
        self._backing_arg = backing
        self._mountpoint_arg = mountpoint
        self._binary = binary
        self._argv = argv
        self._env = env
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self.backing = ""
        self.mountpoint = ""
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = ""
        self._log = None
        self._expected_status = 0
        self._stuck = ""

    # -- paths
    def path(self, rel: str = "") -> str:
        """A path through the mount."""
        return os.path.join(self.mountpoint, rel) if rel else self.mountpoint

    def backing_path(self, rel: str = "") -> str:
        """The same relative path in the backing store (behind sealfs's back)."""
        return os.path.join(self.backing, rel) if rel else self.backing

    @property
    def quarantine(self) -> str:
        return os.path.join(self.backing, ".sealfs", "quarantine")

    def quarantined_names(self) -> list[str]:
        try:
            return sorted(os.listdir(self.quarantine))
        except FileNotFoundError:
            return []

    def log_text(self) -> str:
        if not self.log_path:
            return ""
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    # -- life cycle
    def __enter__(self) -> "SealfsMount":
        self._tmp = tempfile.TemporaryDirectory(prefix="sealfs-scenario.")
        root = self._tmp.name
        self.backing = self._backing_arg or os.path.join(root, "backing")
        self.mountpoint = self._mountpoint_arg or os.path.join(root, "mnt")
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        if self._argv is not None:
            argv = self._argv(self.backing, self.mountpoint)
        else:
            argv = [self._binary or sealfs_binary(), "-f"]
            if self._options:
                argv += ["-o", ",".join(self._options)]
            argv += [self.backing, self.mountpoint]
        # The daemon's output goes to a file, not a pipe nobody drains.
        self.log_path = os.path.join(root, "daemon.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ)
        if self._env:
            env.update(self._env)
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env, close_fds=True)
            self._wait_mounted(argv)
        except BaseException:
            self._abort()
            raise
        return self

    def _wait_mounted(self, argv: list[str]) -> None:
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            if fuse_fstype_at(self.mountpoint):
                return
            rc = self.proc.poll()
            if rc is not None:
                raise MountError(f"{argv!r} exited with {rc} before mounting:\n{self.log_text()}")
            time.sleep(0.05)
        raise MountError(f"{argv!r} did not mount within {MOUNT_TIMEOUT_S:.0f}s:\n{self.log_text()}")

    def _unmount(self) -> Optional[str]:
        """Unmount; None on success, else what went wrong."""
        if not fuse_fstype_at(self.mountpoint):
            return None
        last = ""
        # EBUSY right after a program exits is normal for a moment; retry.
        for _ in range(50):
            r = subprocess.run(["fusermount3", "-u", self.mountpoint], capture_output=True,
                               text=True, timeout=UNMOUNT_TIMEOUT_S)
            if r.returncode == 0 or not fuse_fstype_at(self.mountpoint):
                return None
            last = r.stderr.strip()
            time.sleep(0.1)
        subprocess.run(["umount", "-l", self.mountpoint], capture_output=True,
                       timeout=UNMOUNT_TIMEOUT_S)
        return f"fusermount3 -u failed ({last}); used umount -l"

    def _reap(self) -> Optional[int]:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=self._exit_timeout)
        except subprocess.TimeoutExpired:
            self._stuck = _thread_states(self.proc.pid)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=UNMOUNT_TIMEOUT_S)
            return None

    def _abort(self) -> None:
        """Best-effort cleanup after a failed start; keeps the first error."""
        try:
            self._unmount()
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(timeout=UNMOUNT_TIMEOUT_S)
            self._close()

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def expect_exit_status(self, status: int) -> None:
        """The daemon is meant to end with this status (a fault-injection
        exit), which unmount() then accepts instead of 0."""
        self._expected_status = status

    def wait_exit(self, timeout: float) -> Optional[int]:
        """The daemon's exit status once it has ended by itself, None if it
        still runs after timeout seconds."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def unmount(self) -> None:
        """Unmount and reap now (also done by __exit__); raises MountError
        when unmounting needed force or the daemon did not exit 0."""
        problem = self._unmount()
        rc = self._reap()
        log = self.log_text()
        if problem:
            raise MountError(f"{problem}\n{log}")
        if rc is None:
            raise MountError(f"the daemon did not exit within {self._exit_timeout:.0f}s of the unmount; "
                             f"killed; its threads were in {self._stuck}\n{log}")
        if rc != self._expected_status:
            raise MountError(f"the daemon exited with status {rc}, not {self._expected_status}\n{log}")

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.unmount()
        except MountError:
            if exc_type is None:
                raise
            # Keep the test's own failure as the one reported.
        finally:
            self._close()
        return False

    # -- sealfs's own commands
    def status(self) -> dict:
        """`sealfs status MOUNTPOINT` as a dict of counters."""
        r = subprocess.run([self._binary or sealfs_binary(), "status", self.mountpoint],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise AssertionError(f"sealfs status exited {r.returncode}: {r.stderr}")
        return json.loads(r.stdout)


def _thread_states(pid: int) -> str:
    """Where each thread of a process waits (kernel wait channel, syscall)."""
    out = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            try:
                wchan = Path(f"/proc/{pid}/task/{tid}/wchan").read_text().strip()
                call = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()[0]
            except OSError:
                continue
            out.append(f"{wchan or 'running'}/{call}")
    except OSError:
        return "(gone)"
    return ", ".join(out)


# ---- damage done behind the mount ------------------------------------------------

def truncate_file(path: str, size: Optional[int] = None) -> int:
    """Truncate a backing file (to half its size by default); returns the new size."""
    old = os.stat(path, follow_symlinks=False).st_size
    new = old // 2 if size is None else size
    if new >= old:
        raise ValueError(f"{path}: truncating {old} bytes to {new} is no damage")
    os.truncate(path, new)
    return new


def zero_fill(path: str) -> int:
    """Overwrite a backing file in place with zeros of the same size."""
    size = os.stat(path, follow_symlinks=False).st_size
    with open(path, "r+b") as f:
        f.write(b"\0" * size)
    return size


def overwrite_same_size(path: str, byte: bytes = b"x") -> int:
    """Overwrite a backing file in place with other bytes of the same size."""
    size = os.stat(path, follow_symlinks=False).st_size
    with open(path, "r+b") as f:
        f.write(byte * size)
    return size


def reserved_names_in(lines: Iterable[str]) -> list[str]:
    """The lines that mention a reserved (".sealfs…") path component."""
    return [line for line in lines
            if any(tok.startswith(RESERVED_PREFIX) for tok in re.split(r"[\s/]+", line))]


def exists_in_mount(path: str) -> bool:
    """True when lookup answers the name, False on ENOENT; other errors raise."""
    try:
        os.lstat(path)
        return True
    except OSError as e:
        if e.errno == errno.ENOENT:
            return False
        raise


class ScenarioTestCase(unittest.TestCase):
    """Base for scenario tests: subprocess runs with a timeout and a clear
    failure message."""

    maxDiff = None

    def run_checked(self, argv: Sequence[str], timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kwargs)
        if r.returncode != 0:
            self.fail(f"{' '.join(argv)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r
