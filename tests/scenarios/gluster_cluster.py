"""A throw-away GlusterFS cluster on this machine, for the cross-host tests:
one glusterd, a replica-2 volume from two bricks, and N client mounts of it.
Each client mount is one "host": its own FUSE connection, its own glusterfs
client process with its own attribute, entry and data caches, reaching the
bricks over TCP as a remote host would.

    with GlusterCluster(hosts=4) as cluster:
        cluster.client(0)            # host 0's mount of the volume
        cluster.kill_brick(1); cluster.start_missing_bricks(); cluster.wait_healed()
    # unmounted, volume stopped and deleted, every process ended, state removed

Isolation: glusterd's state (working-directory), pid files and CLI socket
live in the temporary directory (our own glusterd.vol: working-directory,
run-directory, glusterd-sockfile), and the CLI talks to that socket. glusterd
hard-codes a few paths that cannot be redirected: brick and self-heal daemon
sockets (/var/run/gluster/<hash>.socket) and their logs
(/var/log/glusterfs/bricks/<brick path>.log, glustershd.log). The fixture
removes the sockets and brick logs it made. glusterd listens on TCP 24007,
so only one such cluster runs on a machine at a time (the ctest
RESOURCE_LOCK sees to that; a glusterd already running is reported).

Standard library only. Runs as root (glusterd and FUSE mounts need it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from typing import Optional

import sealfs_mount as sm

GLUSTER_TOOLS = ("glusterd", "gluster", "glusterfs")
GLUSTERD_PORT = 24007
START_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 120.0
HEAL_TIMEOUT_S = 180.0


TMP_PREFIX = "sealfs-gluster."


def reap_orphaned_clusters() -> list[str]:
    """Tear down clusters left by a test process that was killed (SIGKILL at
    a ctest timeout leaves no chance to clean up): their directory is named
    sealfs-gluster.<pid>.* and that pid is gone. Returns what was reaped."""
    reaped = []
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        parts = name.split(".")
        if not name.startswith(TMP_PREFIX) or len(parts) < 3 or not parts[1].isdigit():
            continue
        if _pid_alive(int(parts[1])):
            continue
        root = os.path.join(tmp, name)
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(root + "/")]
        for mnt in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=60)
        for entry in os.listdir("/proc"):
            if entry.isdigit() and root in " ".join(_cmdline(int(entry))):
                os.kill(int(entry), signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        for i in (1, 2):
            with contextlib.suppress(OSError):
                os.unlink(_brick_log(os.path.join(root, "bricks", f"b{i}")))
        reaped.append(root)
    return reaped


def gluster_unusable_reason() -> Optional[str]:
    """None when a cluster can be started here, else a one-line reason."""
    for root in reap_orphaned_clusters():
        print(f"gluster fixture: removed the orphaned cluster {root}", flush=True)
    missing = [t for t in GLUSTER_TOOLS if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install glusterfs-server glusterfs-client)"
    if os.geteuid() != 0:
        return "glusterd and its FUSE client mounts need root"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if s.connect_ex(("127.0.0.1", GLUSTERD_PORT)) == 0:
            return f"something already listens on TCP {GLUSTERD_PORT} (another glusterd?)"
    return None


def require_gluster() -> None:
    """Before unittest.main(): skip the file outside CI (exit 77) or fail in
    CI when FUSE or GlusterFS is unusable."""
    sm.require_environment(tools=("fusermount3",))
    reason = gluster_unusable_reason()
    if reason is None:
        return
    if sm.in_ci():
        print(f"FAIL (CI=true): {reason}", flush=True)
        raise SystemExit(1)
    print(f"SKIP: {reason}", flush=True)
    raise SystemExit(sm.SKIP_EXIT_CODE)


def _wait(what: str, done, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


class GlusterCluster:
    """Context manager: glusterd + replica-2 volume + `hosts` client mounts."""

    def __init__(self, hosts: int = 2, client_options: tuple[str, ...] = (),
                 volume_options: tuple[tuple[str, str], ...] = ()) -> None:
        self.hosts = hosts
        self.client_options = list(client_options)  # extra glusterfs(8) options per mount
        self.volume_options = list(volume_options)  # `gluster volume set` before the start
        self.volume = f"sealfs{os.getpid()}"
        self.server = socket.gethostname()
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self.root = ""
        self._glusterd: Optional[int] = None
        self._created = False
        self._mounted: list[str] = []
        self._sockets: set[str] = set()
        self._brick_logs: list[str] = []
        self.removed_unhealable: list[str] = []
        self._killed: set[int] = set()

    # -- paths
    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def client(self, host: int) -> str:
        """Host `host`'s mount of the volume (0-based)."""
        return self._p("clients", f"h{host}")

    def brick(self, i: int) -> str:
        return self._p("bricks", f"b{i}")

    # -- the CLI
    def cli(self, *args: str, check: bool = True, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        argv = ["gluster", f"--glusterd-sock={self._p('run', 'cli.socket')}", "--mode=script",
                f"--log-file={self._p('log', 'cli.log')}", *args]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
        return r

    # -- life cycle
    def __enter__(self) -> "GlusterCluster":
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}.")
        self.root = self._tmp.name
        for d in ("state", "run", "log", "bricks", "clients"):
            os.makedirs(self._p(d))
        try:
            self._start_glusterd()
            self._create_volume()
            for h in range(self.hosts):
                self._mount_client(h)
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self._teardown()
        return False

    def _start_glusterd(self) -> None:
        vol = self._p("glusterd.vol")
        with open(vol, "w") as f:
            f.write("volume management\n"
                    "    type mgmt/glusterd\n"
                    f"    option working-directory {self._p('state')}\n"
                    f"    option run-directory {self._p('run')}\n"
                    f"    option glusterd-sockfile {self._p('run', 'cli.socket')}\n"
                    "    option transport-type socket\n"
                    f"    option transport.socket.listen-port {GLUSTERD_PORT}\n"
                    "    option ping-timeout 0\n"
                    "    option event-threads 1\n"
                    "end-volume\n")
        pidfile = self._p("run", "glusterd.pid")
        subprocess.run(["glusterd", "-f", vol, "-p", pidfile, "-l", self._p("log", "glusterd.log")],
                       check=True, timeout=START_TIMEOUT_S)
        self._glusterd = int(_wait("glusterd's pid file", lambda: _read_pid(pidfile), START_TIMEOUT_S))
        _wait("glusterd's CLI socket", lambda: self.cli("volume", "list", check=False).returncode == 0,
              START_TIMEOUT_S, 0.2)

    def _create_volume(self) -> None:
        bricks = []
        for i in (1, 2):
            os.makedirs(self.brick(i))
            bricks.append(f"{self.server}:{self.brick(i)}")
            self._brick_logs.append(_brick_log(self.brick(i)))
        # replica 2 asks about split-brain; --mode=script answers. `force`
        # because both bricks are on one host (and under /tmp).
        self.cli("volume", "create", self.volume, "replica", "2", *bricks, "force")
        self._created = True
        for key, value in self.volume_options:
            self.cli("volume", "set", self.volume, key, value)
        self.cli("volume", "start", self.volume)
        _wait("both bricks online", lambda: len(self.brick_pids()) == 2, START_TIMEOUT_S, 0.2)
        self._note_sockets()

    def _mount_client(self, host: int) -> None:
        mnt = self.client(host)
        os.makedirs(mnt)
        subprocess.run(["glusterfs", f"--volfile-server={self.server}", f"--volfile-id={self.volume}",
                        f"--log-file={self._p('log', f'client-h{host}.log')}", *self.client_options, mnt],
                       check=True, timeout=START_TIMEOUT_S)
        self._mounted.append(mnt)
        _wait(f"client mount {mnt}", lambda: sm.fuse_fstype_at(mnt) == "fuse.glusterfs", START_TIMEOUT_S)

    # -- bricks
    def _status_nodes(self) -> list[ET.Element]:
        r = self.cli("volume", "status", self.volume, "--xml", check=False)
        if r.returncode != 0:
            return []
        try:
            return list(ET.fromstring(r.stdout).iter("node"))
        except ET.ParseError:
            return []

    def brick_pids(self) -> dict[int, int]:
        """Brick number (1, 2) → pid of its glusterfsd, for the online ones."""
        out = {}
        for node in self._status_nodes():
            path, status, pid = node.findtext("path"), node.findtext("status"), node.findtext("pid")
            for i in (1, 2):
                if path == self.brick(i) and status == "1" and pid and pid.isdigit() and int(pid) > 0:
                    out[i] = int(pid)
        return out

    def kill_brick(self, i: int) -> None:
        """SIGKILL brick i's server process, as a crashed storage node."""
        pid = self.brick_pids()[i]
        os.kill(pid, signal.SIGKILL)
        self._killed.add(i)
        _wait(f"brick {i} gone", lambda: not _pid_alive(pid) or _is_zombie(pid), 30)
        # glusterd must have noticed, or `start force` sees nothing to start.
        _wait(f"glusterd sees brick {i} offline", lambda: i not in self.brick_pids(), 60, 0.2)

    def start_missing_bricks(self) -> None:
        last = [0.0]

        def online():
            if time.monotonic() - last[0] > 5:
                self.cli("volume", "start", self.volume, "force", check=False)
                last[0] = time.monotonic()
            return len(self.brick_pids()) == 2

        _wait("both bricks online", online, START_TIMEOUT_S, 0.2)
        self._note_sockets()

    def pending_heal_entries(self) -> dict[int, list[str]]:
        """Brick → gfids the self-heal daemon still has to heal: the bricks'
        index of pending changes (what `heal info` reads; its helper glfsheal
        only finds glusterd on the default socket, which this fixture does not
        use)."""
        out = {}
        for i in (1, 2):
            index = os.path.join(self.brick(i), ".glusterfs", "indices", "xattrop")
            try:
                out[i] = sorted(n for n in os.listdir(index) if not n.startswith("xattrop-"))
            except FileNotFoundError:
                out[i] = []
        return out

    def pending_heals(self) -> int:
        return sum(len(v) for v in self.pending_heal_entries().values())

    def bricks_differ(self) -> list[str]:
        """Relative paths whose type, size or bytes differ between the two
        bricks: empty once healed. Gluster's own bookkeeping at a brick's root
        (.glusterfs, and the .glusterfs-anonymous-inode-<uuid> directory that
        entry heal parks stale names in until its cleaner expunges them) is
        not volume content and is left out."""
        def tree(root: str) -> dict[str, tuple]:
            out = {}
            for dirpath, dirs, files in os.walk(root):
                if dirpath == root:
                    dirs[:] = [d for d in dirs if not d.startswith(".glusterfs")]
                for name in dirs + files:
                    p = os.path.join(dirpath, name)
                    try:  # the volume is live: a name may go while we walk
                        st = os.lstat(p)
                        if os.path.isfile(p) and not os.path.islink(p):
                            with open(p, "rb") as f:
                                out[os.path.relpath(p, root)] = ("f", st.st_size, hash(f.read()))
                        else:
                            out[os.path.relpath(p, root)] = ("o", st.st_mode & 0o170000)
                    except FileNotFoundError:
                        out[os.path.relpath(p, root)] = ("gone",)
            return out
        a, b = tree(self.brick(1)), tree(self.brick(2))
        return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))

    def _brick_files(self, i: int):
        """(relative path, brick path) of brick i's regular files, Gluster's
        own bookkeeping at the brick's root left out."""
        root = self.brick(i)
        for dirpath, dirs, files in os.walk(root):
            if dirpath == root:
                dirs[:] = [d for d in dirs if not d.startswith(".glusterfs")]
            for name in files:
                p = os.path.join(dirpath, name)
                yield os.path.relpath(p, root), p

    def _gfid(self, path: str) -> Optional[bytes]:
        try:
            return os.getxattr(path, "trusted.gfid", follow_symlinks=False)
        except OSError as e:
            if e.errno == errno.ENODATA:
                return None
            raise

    def unhealable_files(self) -> list[str]:
        """Brick paths of regular files that GlusterFS's self-heal leaves
        pending for good after a brick was killed:
        - a file without trusted.gfid, which a brick killed between creating
          it and setting its gfid leaves: lookups of a null gfid fail
          (ENODATA or EINVAL) and the heal retries forever (GlusterFS issues
          #848, "null gfid entries can not be healed", and #3608);
        - a name on a brick that was killed which its peer, up throughout,
          no longer has: the peer renamed or removed it while this brick was
          down, and entry heal did not expunge it.
        Called only after the heal has stalled."""
        found = []
        for i in (1, 2):
            peer = 3 - i
            peer_files = {rel for rel, _ in self._brick_files(peer)}
            for rel, p in self._brick_files(i):
                with contextlib.suppress(FileNotFoundError):
                    if self._gfid(p) is None or (i in self._killed and peer not in self._killed
                                                 and rel not in peer_files):
                        found.append(p)
        return found

    def remove_unhealable_files(self) -> list[str]:
        """What GlusterFS's operators do about unhealable_files(): remove
        each from its brick, with its .glusterfs/<gfid> hard link, so that
        entry heal can finish. Returns the paths removed."""
        removed = []
        for p in self.unhealable_files():
            brick = next(self.brick(i) for i in (1, 2) if p.startswith(self.brick(i) + os.sep))
            with contextlib.suppress(FileNotFoundError):
                gfid = self._gfid(p)
                os.unlink(p)
                removed.append(p)
                if gfid is not None and len(gfid) == 16:
                    h = gfid.hex()
                    uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(brick, ".glusterfs", h[:2], h[2:4], uuid))
        return removed

    def _describe_on_bricks(self, rel: str) -> str:
        """One differing path as each brick holds it: size, links and gfid."""
        parts = []
        for i in (1, 2):
            p = os.path.join(self.brick(i), rel)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                parts.append(f"b{i}: absent")
                continue
            try:
                raw = self._gfid(p)
                gfid = raw.hex() if raw is not None else "none"
            except OSError as e:
                gfid = errno.errorcode.get(e.errno, str(e.errno))
            parts.append(f"b{i}: size {st.st_size} nlink {st.st_nlink} gfid {gfid}")
        return f"{rel} ({'; '.join(parts)})"

    def heal(self, *how: str) -> subprocess.CompletedProcess:
        return self.cli("volume", "heal", self.volume, *how, check=False)

    def self_heal_daemon_online(self) -> bool:
        return any(n.findtext("hostname") == "Self-heal Daemon" and n.findtext("status") == "1"
                   for n in self._status_nodes())

    def heal_state(self) -> str:
        """What is left to heal, for a failure message: pending index entries,
        paths that differ, whether the self-heal daemon is up, and its log's
        latest warnings and errors about this volume (the log is shared)."""
        pending = {i: v[:5] + (["…"] if len(v) > 5 else []) for i, v in self.pending_heal_entries().items()}
        differ = self.bricks_differ()
        lines = []
        try:
            with open("/var/log/glusterfs/glustershd.log", errors="replace") as f:
                lines = [ln.rstrip() for ln in f
                         if self.volume in ln and ("] E [" in ln or "] W [" in ln)][-8:]
        except OSError:
            pass
        described = [self._describe_on_bricks(rel) for rel in differ[:8]]
        return (f"pending index entries {pending}; {len(differ)} paths differ {described}; "
                f"self-heal daemon online: {self.self_heal_daemon_online()}; "
                f"glustershd.log, last warnings and errors:\n  " + "\n  ".join(lines))

    def wait_healed(self, timeout: float = HEAL_TIMEOUT_S) -> float:
        """Ask for a heal and wait until nothing is pending; returns seconds.
        An index heal is asked for every 5 s. If that has not healed the
        replica within a third of the timeout, it escalates as an operator
        would: a full heal (a crawl of the whole volume, not only the index),
        `volume start force`, which starts a self-heal daemon that died or
        never came back, and the removal of the files GlusterFS cannot heal
        (unhealable_files), recorded in self.removed_unhealable. The failure
        says what was left."""
        t0 = time.monotonic()
        last = [0.0]
        escalated = [False]

        def healed():
            now = time.monotonic()
            if not escalated[0] and now - t0 > timeout / 3:
                escalated[0] = True
                self.cli("volume", "start", self.volume, "force", check=False)
                self.removed_unhealable += self.remove_unhealable_files()
                self.heal("full")
                last[0] = now
            elif now - last[0] > 5:
                self.heal()
                last[0] = now
            return self.pending_heals() == 0 and not self.bricks_differ()

        try:
            _wait("the replica healed", healed, timeout, 0.5)
        except TimeoutError as e:
            raise TimeoutError(f"{e} (escalated to a full heal after {timeout / 3:.0f}s): {self.heal_state()}") from None
        return time.monotonic() - t0

    # -- teardown, even of a half-built cluster
    def _note_sockets(self) -> None:
        """The /var/run/gluster sockets of our processes (-S), to remove later."""
        for pid in self._our_pids():
            argv = _cmdline(pid)
            for flag, value in zip(argv, argv[1:]):
                if flag == "-S" and value.startswith("/var/run/gluster/"):
                    self._sockets.add(value)

    def _our_pids(self) -> list[int]:
        """glusterfsd/glusterfs processes of this cluster (bricks, self-heal,
        clients): their command lines name a path in our directory."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            argv = _cmdline(int(entry))
            if not argv or not os.path.basename(argv[0]).startswith("gluster"):
                continue
            if self.root in " ".join(argv):  # brick path, pid file or mountpoint
                found.append(int(entry))
        return found

    def _teardown(self) -> None:
        problems = []
        for mnt in reversed(self._mounted):
            if sm.fuse_fstype_at(mnt):
                r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=60)
                if r.returncode != 0:
                    subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=60)
                    problems.append(f"umount {mnt}: {r.stderr.strip()} (lazy unmount used)")
        self._mounted.clear()
        if self._created and self._glusterd and _pid_alive(self._glusterd):
            self._note_sockets()
            self.cli("volume", "stop", self.volume, "force", check=False, timeout=60)
            self.cli("volume", "delete", self.volume, check=False, timeout=60)
        self._created = False
        if self._glusterd:
            _stop(self._glusterd)
            self._glusterd = None
        for pid in self._our_pids():  # bricks or self-heal left running
            _stop(pid)
        for path in list(self._sockets) + self._brick_logs:
            try:
                os.unlink(path)
            except OSError:
                pass
        if self._tmp is not None:
            try:
                self._tmp.cleanup()
            except OSError as e:
                # A brick directory's gluster xattrs and .glusterfs links go
                # with rmtree; anything else left is worth a line.
                problems.append(f"cleanup of {self.root}: {e}")
            self._tmp = None
        if problems:
            print("gluster fixture teardown: " + "; ".join(problems), flush=True)


def _brick_log(brick: str) -> str:
    """Where glusterd has the brick's server log (not redirectable)."""
    return "/var/log/glusterfs/bricks/" + brick.strip("/").replace("/", "-") + ".log"


def _read_pid(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            text = f.read().strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _pid_alive(pid) or _is_zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
        self._killed.add(i)
    except ProcessLookupError:
        pass
