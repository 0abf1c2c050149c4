#!/usr/bin/env python3
"""How often GlusterFS answers EIO when four clients create the same new
directory at once: ROUNDS rounds of four threads, each on its own client
mount (or its own sealfs over it), racing os.makedirs on ns/.staging and
ns/kernels under a fresh directory. Not a test: a measurement behind the
README's advice to create a shared cache's directories once.

    sudo SEALFS_BIN=build/release/fs/sealfs python3 tests/bench/gluster_mkdir_race.py 200 plain
    sudo SEALFS_BIN=build/release/fs/sealfs python3 tests/bench/gluster_mkdir_race.py 100 sealfs
"""

import collections
import errno
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scenarios"))
import gluster_cluster as gc  # noqa: E402
import sealfs_mount as sm  # noqa: E402

CLIENT_OPTIONS = ("--entry-timeout=0", "--attribute-timeout=0", "--negative-timeout=0")
VOLUME_OPTIONS = (("performance.stat-prefetch", "off"), ("performance.quick-read", "off"),
                  ("performance.open-behind", "off"))
HOSTS = 4


def race(roots: list[str]) -> list[str]:
    """One round: every root makes ns/.staging and ns/kernels at once."""
    results = [""] * len(roots)
    barrier = threading.Barrier(len(roots))

    def go(i: int) -> None:
        barrier.wait()
        try:
            for sub in (".staging", "kernels"):
                os.makedirs(os.path.join(roots[i], "ns", sub), exist_ok=True)
            results[i] = "ok"
        except OSError as e:
            results[i] = f"{errno.errorcode.get(e.errno, e.errno)}:{e.filename}"

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(roots))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    mode = sys.argv[2] if len(sys.argv) > 2 else "plain"
    if mode not in ("plain", "sealfs"):
        print("usage: gluster_mkdir_race.py [ROUNDS] [plain|sealfs]", file=sys.stderr)
        return 2
    counts: collections.Counter[str] = collections.Counter()
    with gc.GlusterCluster(hosts=HOSTS, client_options=CLIENT_OPTIONS, volume_options=VOLUME_OPTIONS) as c:
        for r in range(rounds):
            name = f"round{r}"
            os.makedirs(os.path.join(c.client(0), name))
            backings = [os.path.join(c.client(h), name) for h in range(HOSTS)]
            mounts = []
            if mode == "sealfs":
                for b in backings:
                    m = sm.SealfsMount(options=["profile=tilelang", "cache_timeout=1"], backing=b)
                    m.__enter__()
                    mounts.append(m)
            results = race([m.mountpoint for m in mounts] if mounts else backings)
            for m in mounts:
                m.unmount()
                m._close()
            counts.update(x.split(":")[0] for x in results)
            if any(x != "ok" for x in results):
                print(f"round {r}: {results}", flush=True)
    print(f"{mode}: {rounds} rounds of {HOSTS} clients: {dict(counts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
