#!/usr/bin/env python3
"""fs/ makes no system call on B (fs/README.md): every access to the backing
store is a Store call, except the data path (READ's bytes and pages pushed,
fs/fuse/fd_bufvec.hpp). This finds the file system calls in fs/'s sources
and flags each one that is not in ALLOWED, where every entry says what the
call is made on, and why that is not B. Prints each violation as FILE:LINE
and exits 1 if there is any.

    tests/lint/check_fs_syscalls.py [ROOT]     (default: the repository root)
"""

from __future__ import annotations

import os
import re
import sys

import lint_main

# Calls that reach a file system: by path, by descriptor, or on a directory.
FILE_CALLS = (
    "open openat openat2 creat close_range fstat fstatat newfstatat stat lstat statx access faccessat "
    "unlink unlinkat rename renameat renameat2 mkdir mkdirat rmdir link linkat symlink symlinkat "
    "mknod mknodat readlink readlinkat chmod fchmod fchmodat chown fchown lchown fchownat "
    "truncate ftruncate fsync fdatasync syncfs sync_file_range fallocate posix_fallocate lseek "
    "read write pread pread64 pwrite pwrite64 preadv pwritev readv writev sendfile splice "
    "copy_file_range mmap statvfs fstatvfs statfs fstatfs getxattr lgetxattr fgetxattr setxattr "
    "lsetxattr fsetxattr listxattr llistxattr flistxattr removexattr lremovexattr fremovexattr "
    "utime utimes utimensat futimens opendir fdopendir readdir getdents64 fcntl flock ioctl "
    "posix_fadvise readahead name_to_handle_at open_by_handle_at fopen realpath"
).split()
CALL = re.compile(r"(?:^|[^\w.>:])(?:(?:std)?::)?(" + "|".join(FILE_CALLS) + r")\s*\(")

# (file, call) → what it is made on. Nothing here is B.
ALLOWED = {
    ("fs/fuse/fd_bufvec.hpp", "pread"): "the data path: a READ's bytes, pages pushed (a handle the store opened)",
    ("fs/fuse/file_handles.cpp", "fcntl"): "F_GETFL of a handle: its open mode, no I/O",
    ("fs/fuse/parked_handles.cpp", "fcntl"): "F_GETFL of a handle about to be parked: its open mode, no I/O",
    ("fs/fuse/writer_tasks.cpp", "open"): "/proc/<tid>/stat and /proc/<pid>/fdinfo of a closer (R4)",
    ("fs/fuse/writer_tasks.cpp", "openat"): "/proc/<pid>/fdinfo/<fd> of a closer (R4)",
    ("fs/fuse/writer_tasks.cpp", "read"): "/proc/<tid>/stat and fdinfo of a closer (R4)",
    ("fs/fuse/writer_tasks.cpp", "fdopendir"): "/proc/<pid>/fdinfo of a closer (R4)",
    ("fs/fuse/writer_tasks.cpp", "readdir"): "/proc/<pid>/fdinfo of a closer (R4)",
    ("fs/fuse/writer_tasks.cpp", "readlink"): "/proc/self: the daemon's own pid in its pid namespace",
    ("fs/fuse/descriptors.cpp", "opendir"): "/proc/self/fd: the daemon's own descriptor count",
    ("fs/fuse/descriptors.cpp", "readdir"): "/proc/self/fd: the daemon's own descriptor count",
    ("fs/fuse/session.cpp", "stat"): "the mount point M, before mounting over it",
    ("fs/fuse/session.cpp", "realpath"): "the mount point M, resolved for its label",
    ("fs/cli/remount.cpp", "realpath"): "sealfs remount: the mount point M the user names",
    ("fs/cli/status.cpp", "realpath"): "sealfs status: the mount point M, for its label",
    ("fs/fuse/session.cpp", "access"): "fusermount3 in /usr/bin or on PATH: whether it can be run",
    ("fs/fuse/writer_tasks.cpp", "faccessat"): "/proc/<tid>/fdinfo: whether a closer can be seen (R4)",
    ("fs/fuse/kernel_notices.hpp", "open"): "KernelNotices::open, a member's definition: no system call",
    ("fs/fuse/metrics_file.cpp", "realpath"): "-o metrics_file=: the user's metrics file's directory",
    ("fs/fuse/metrics_file.cpp", "stat"): "-o metrics_file=: the user's metrics file and its directory",
    ("fs/fuse/metrics_file.cpp", "open"): "-o metrics_file=: the user's metrics file",
    ("fs/fuse/metrics_file.cpp", "write"): "-o metrics_file=: the user's metrics file",
    ("fs/fuse/metrics_file.cpp", "rename"): "-o metrics_file=: the user's metrics file",
    ("fs/fuse/metrics_file.cpp", "unlink"): "-o metrics_file=: the user's metrics file",
    ("fs/cli/status.cpp", "getxattr"): "sealfs status: the mount M's status xattr",
    ("fs/cli/remount.cpp", "getxattr"): "sealfs remount: the mount M's state xattr",
    ("fs/cli/remount.cpp", "setxattr"): "sealfs remount: the mount M's state xattr",
    ("fs/cli/remount.cpp", "statvfs"): "sealfs remount: the mount M",
    ("fs/cli/cuda_check.cpp", "open"): "sealfs cuda-check: the files the user names",
}
SOURCES = (".cpp", ".hpp", ".h")


def code_of(line: str) -> str:
    """The line without its // comment and string literals."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def violations(root: str) -> list[str]:
    """Each call not in ALLOWED, then each ALLOWED entry no call uses (an
    allowance left behind would let the next such call in unseen)."""
    found = []
    used = set()
    for dirpath, _, files in os.walk(os.path.join(root, "fs")):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.relpath(os.path.join(dirpath, name), root)
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    for m in CALL.finditer(code_of(line)):
                        if (path, m.group(1)) in ALLOWED:
                            used.add((path, m.group(1)))
                        else:
                            found.append(f"{path}:{number}: {m.group(1)}() in fs/: a call on B goes through Store")
    for path, call in sorted(set(ALLOWED) - used):
        if os.path.isdir(os.path.join(root, "fs")) and os.path.exists(os.path.join(root, path)):
            found.append(f"{path}: allows {call}(), which it no longer calls: remove the allowance")
    return found


if __name__ == "__main__":
    sys.exit(lint_main.run("fs syscalls", violations))
