"""Everyday tools on a sealfs mount: rsync -a, tar, cp -a, find, du, ls.

A tree with odd modes, empty and larger files, spaces and UTF-8 in names and a
symlink is copied into the mount and back out with each tool. Every copy must
equal the source byte for byte, with the same types, modes and file mtimes,
and no tool may ever list a reserved (".sealfs…") name, although the backing
store holds manifests for everything that was copied in.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import unittest
from pathlib import Path

import sealfs_mount as sm

TOOL_TIMEOUT_S = 120


def make_tree(root: Path) -> None:
    """The source tree; modes are set explicitly so the umask does not matter."""
    files = {
        "empty": (b"", 0o644),
        "hello.txt": (b"hello, sealfs\n", 0o644),
        "run.sh": (b"#!/bin/sh\necho ok\n", 0o755),
        "read-only.dat": (b"frozen\n" * 100, 0o444),
        "private.key": (b"not really a key\n", 0o600),
        "name with spaces.txt": (b"spaces\n", 0o640),
        "unicod\u00e9-\u00fc.txt": ("caf\u00e9\n".encode(), 0o644),
        "sub/big.bin": (bytes((i * 7919 + (i >> 8)) & 0xFF for i in range(1 << 20)), 0o644),
        "sub/deeper/a/b/c/leaf.txt": (b"leaf\n", 0o664),
        "sub/deeper/.hidden-dotfile": (b"dot\n", 0o644),
        "locked/inside.txt": (b"inside\n", 0o644),
    }
    for rel, (data, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, mode)
    os.mkdir(root / "empty-dir")
    os.symlink("hello.txt", root / "link-to-hello")
    os.chmod(root / "locked", 0o700)
    os.chmod(root / "sub" / "deeper", 0o750)
    # Distinct, whole-second mtimes so preservation is visible.
    for i, rel in enumerate(sorted(files)):
        os.utime(root / rel, (1_600_000_000 + i * 3600, 1_600_000_000 + i * 3600))


def snapshot(root: Path) -> dict[str, tuple]:
    """rel path → (kind, mode bits, content digest or link target, file mtime)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in dirs + files:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            st = os.lstat(path)
            perm = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", oct(perm))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = ("file", oct(perm), st.st_size, digest, int(st.st_mtime))
            else:
                out[rel] = ("other", oct(st.st_mode))
    return out


def manifests_in(backing: str) -> list[str]:
    found = []
    for dirpath, dirs, files in os.walk(backing):
        dirs[:] = [d for d in dirs if d != ".sealfs"]  # the state dir itself
        found += [os.path.join(dirpath, f) for f in files if f.startswith(sm.RESERVED_PREFIX)]
    return found


class ToolsOnSealfs(sm.ScenarioTestCase):

    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sealfs-tools.")
        self.work = Path(self._tmp.name)
        self.src = self.work / "src"
        self.src.mkdir()
        make_tree(self.src)
        self.expected = snapshot(self.src)
        # generic hashes every name, and a name the profile hashes must be a
        # regular file (DESIGN.md, Manifests): the tree's symlink (and the
        # temporary names rsync gives it) is size-only in this profile.
        self.profile = self.work / "tools-profile.json"
        self.profile.write_text('{"name":"tools","size_only":["**/*link-to-hello*"]}')
        self.options = ["cache_timeout=0", f"profile={self.profile}"]

    def tearDown(self) -> None:
        # read-only directories in copies must not stop the cleanup
        for dirpath, dirs, _ in os.walk(self.work):
            for d in dirs:
                p = os.path.join(dirpath, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o755)
        self._tmp.cleanup()

    def run_tool(self, argv: list[str], **kwargs) -> str:
        return self.run_checked(argv, timeout=TOOL_TIMEOUT_S, **kwargs).stdout

    def assert_tree_equals_source(self, root: str) -> None:
        self.assertEqual(snapshot(Path(root)), self.expected, f"{root} differs from the source")

    def assert_no_reserved_listing(self, what: str, text: str) -> None:
        lines = text.splitlines()
        self.assertTrue(lines, f"{what} listed nothing")
        self.assertEqual(sm.reserved_names_in(lines), [], f"{what} listed a reserved name")

    def assert_backing_has_manifests(self, m: sm.SealfsMount) -> None:
        # Otherwise "no reserved name listed" would prove nothing.
        self.assertNotEqual(manifests_in(m.backing), [], "no manifest was written in the backing store")

    def test_rsync_in_update_and_out(self) -> None:
        with sm.SealfsMount(options=self.options) as m:
            dst = m.path("rsync")
            out = self.run_tool(["rsync", "-a", "-i", f"{self.src}/", f"{dst}/"])
            self.assert_no_reserved_listing("rsync -i (in)", out)
            self.assert_tree_equals_source(dst)
            self.assert_backing_has_manifests(m)

            # An update replaces a visible file and deletes another.
            (self.src / "hello.txt").write_bytes(b"hello again, sealfs\n")
            os.utime(self.src / "hello.txt", (1_700_000_000, 1_700_000_000))
            (self.src / "private.key").unlink()
            self.expected = snapshot(self.src)
            out = self.run_tool(["rsync", "-a", "-i", "--delete", f"{self.src}/", f"{dst}/"])
            self.assertIn("hello.txt", out)
            self.assertIn("*deleting", out)
            self.assert_tree_equals_source(dst)

            # rsync reads the tree back out: nothing to change, nothing reserved.
            listing = self.run_tool(["rsync", "-a", "-n", "-i", "--delete", f"{dst}/", f"{self.src}/"])
            self.assertEqual(listing.strip(), "", "rsync sees a difference between the copy and the source")
            listing = self.run_tool(["rsync", "-a", "--list-only", f"{dst}/"])
            self.assert_no_reserved_listing("rsync --list-only", listing)
            self.run_tool(["rsync", "-a", f"{dst}/", str(self.work / "out")])
            self.assert_tree_equals_source(str(self.work / "out"))

    def test_tar_in_and_out(self) -> None:
        with sm.SealfsMount(options=self.options) as m:
            dst = m.path("tar")
            os.mkdir(dst)
            archive_in = self.work / "in.tar"
            self.run_tool(["tar", "-C", str(self.src), "-cf", str(archive_in), "."])
            self.run_tool(["tar", "-C", dst, "-xpf", str(archive_in)])
            self.assert_tree_equals_source(dst)
            self.assert_backing_has_manifests(m)

            archive_out = self.work / "out.tar"
            self.run_tool(["tar", "-C", dst, "-cf", str(archive_out), "."])
            self.assert_no_reserved_listing("tar -tvf", self.run_tool(["tar", "-tvf", str(archive_out)]))
            out = self.work / "out"
            out.mkdir()
            self.run_tool(["tar", "-C", str(out), "-xpf", str(archive_out)])
            self.assert_tree_equals_source(str(out))

    def test_cp_in_and_out(self) -> None:
        with sm.SealfsMount(options=self.options) as m:
            dst = m.path("cp")
            self.run_tool(["cp", "-a", str(self.src), dst])
            self.assert_tree_equals_source(dst)
            self.assert_backing_has_manifests(m)
            out = self.work / "out"
            self.run_tool(["cp", "-a", dst, str(out)])
            self.assert_tree_equals_source(str(out))

    def test_mount_over_the_backing_path_and_remount(self) -> None:
        # DESIGN's typical use: `sealfs B B`. What was copied in is still
        # there, verified, after an unmount and a fresh mount.
        over = self.work / "over"
        over.mkdir()
        with sm.SealfsMount(options=self.options, backing=str(over), mountpoint=str(over)) as m:
            self.run_tool(["cp", "-a", str(self.src), m.path("tree")])
            self.assert_tree_equals_source(m.path("tree"))
        self.assertIsNone(sm.fuse_fstype_at(str(over)), "still mounted")
        self.assertNotEqual(manifests_in(str(over)), [], "no manifest reached the backing store")
        with sm.SealfsMount(options=self.options, backing=str(over), mountpoint=str(over)) as m:
            self.assert_tree_equals_source(m.path("tree"))
            self.assert_no_reserved_listing("ls -aR", self.run_tool(["ls", "-aR", m.mountpoint]))

    def test_find_du_ls_list_the_tree_and_no_reserved_name(self) -> None:
        with sm.SealfsMount(options=self.options) as m:
            dst = m.path("tree")
            self.run_tool(["cp", "-a", str(self.src), dst])
            self.assert_backing_has_manifests(m)

            found = self.run_tool(["find", dst, "-mindepth", "1", "-printf", "%P\\n"])
            self.assert_no_reserved_listing("find", found)
            self.assertEqual(sorted(found.splitlines()), sorted(self.expected))

            typed = self.run_tool(["find", dst, "-mindepth", "1", "-type", "f", "-printf", "%P %s %m\\n"])
            expected_typed = sorted(f"{rel} {v[2]} {v[1][2:]}" for rel, v in self.expected.items()
                                    if v[0] == "file")
            self.assertEqual(sorted(typed.splitlines()), expected_typed)

            du = self.run_tool(["du", "-a", "-b", dst])
            self.assert_no_reserved_listing("du -a", du)
            du_sizes = {}
            for line in du.splitlines():
                size, path = line.split("\t", 1)
                du_sizes[os.path.relpath(path, dst)] = int(size)
            for rel, v in self.expected.items():
                self.assertIn(rel, du_sizes, f"du does not list {rel}")
                if v[0] == "file":
                    self.assertEqual(du_sizes[rel], v[2], f"du size of {rel}")

            ls = self.run_tool(["ls", "-aR", m.mountpoint])
            self.assert_no_reserved_listing("ls -aR", ls)
            self.assertIn("leaf.txt", ls)
            for dirpath, dirs, files in os.walk(m.mountpoint):
                self.assertEqual([n for n in dirs + files if n.startswith(sm.RESERVED_PREFIX)], [],
                                 f"readdir of {dirpath} lists a reserved name")


if __name__ == "__main__":
    sm.require_environment(tools=["rsync", "tar", "cp", "find", "du", "ls", "fusermount3"])
    unittest.main(verbosity=2)
