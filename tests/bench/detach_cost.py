#!/usr/bin/env python3
"""What files the kernel cannot forget cost a daemon (issue 24).

Usage: detach_cost.py SEALFS FILES LIMIT

Mounts a fresh sealfs (profile generic) whose daemon runs under
`prlimit --nofile=LIMIT:LIMIT`, writes FILES small files into one directory,
pins every inode with an inotify watch (the kernel then keeps them all,
whatever it is asked to forget), and times a pass that reads every file
(open, read, close) and one that stats every file: medians of 5 passes, in
microseconds a file, with the daemon's descriptors and inodes after. Run it
at 1024 (past the inode bound: cold files give their descriptor back and are
opened again by name) and at a limit above FILES (each file keeps one) in
the same session, and compare.
"""
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

IN_CLOEXEC = 0o2000000
IN_ATTRIB = 0x4


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, files, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    libc = ctypes.CDLL(None, use_errno=True)
    work = tempfile.mkdtemp(prefix="sealfs-detach.")
    backing, mnt = os.path.join(work, "b"), os.path.join(work, "m")
    os.mkdir(backing)
    os.mkdir(mnt)
    subprocess.run(["prlimit", f"--nofile={limit}:{limit}", "--", binary, "-o", "profile=generic",
                    backing, mnt], check=True)
    try:
        paths = [os.path.join(mnt, "p", f"f{i}") for i in range(files)]
        os.mkdir(os.path.join(mnt, "p"))
        for i, path in enumerate(paths):
            with open(path, "w") as f:
                f.write(f"file {i}")
        watches = libc.inotify_init1(IN_CLOEXEC)
        if watches < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for path in paths:
            if libc.inotify_add_watch(watches, path.encode(), IN_ATTRIB) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")

        def read_pass() -> float:
            start = time.perf_counter()
            for path in paths:
                with open(path) as f:
                    f.read()
            return time.perf_counter() - start

        def stat_pass() -> float:
            start = time.perf_counter()
            for path in paths:
                os.stat(path)
            return time.perf_counter() - start

        reads = statistics.median(read_pass() for _ in range(5))
        stats = statistics.median(stat_pass() for _ in range(5))
        status = json.loads(subprocess.run([binary, "status", mnt], capture_output=True, text=True,
                                           check=True).stdout)
        print(f"limit {limit}: {files} pinned files: read {reads * 1e6 / files:.1f} us/file, "
              f"stat {stats * 1e6 / files:.1f} us/file; daemon descriptors {status['descriptors']}, "
              f"inodes {status['inodes']} (bound {status['inode_bound']})")
        os.close(watches)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
