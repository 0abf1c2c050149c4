#!/usr/bin/env python3
"""tests/lint/check_fs_syscalls.py on this tree (it must be clean) and on
planted trees (it must flag each call on B, and only those)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_fs_syscalls  # noqa: E402
from check_layers_test import ROOT, plant  # noqa: E402


class CheckFsSyscalls(unittest.TestCase):
    def test_this_tree_is_clean(self) -> None:
        self.assertEqual(check_fs_syscalls.violations(ROOT), [])

    def test_calls_on_b_are_flagged(self) -> None:
        with tempfile.TemporaryDirectory() as root:
            plant(root, {
                "fs/fuse/a.cpp": "int x = ::fstatat(dir, name, &st, 0);\n"
                                 "  std::rename(from, to);\n"
                                 "if (fsync(fd) != 0) {}\n",
                "fs/cli/b.cpp": "UniqueFd fd(::open(path, O_RDONLY));\n",  # allowed in cuda_check.cpp only
                # cuda_check.cpp keeps its allowance but no longer calls open().
                "fs/cli/cuda_check.cpp": "int main() { return 0; }\n",
            })
            found = check_fs_syscalls.violations(root)
        self.assertEqual(len(found), 5, found)
        for where in ("fs/fuse/a.cpp:1: fstatat", "fs/fuse/a.cpp:2: rename", "fs/fuse/a.cpp:3: fsync",
                      "fs/cli/b.cpp:1: open", "fs/cli/cuda_check.cpp: allows open()"):
            self.assertTrue(any(v.startswith(where) for v in found), f"{where} not flagged: {found}")

    def test_store_calls_members_comments_and_strings_pass(self) -> None:
        with tempfile.TemporaryDirectory() as root:
            plant(root, {
                "fs/fuse/a.cpp": "auto fd = fs.store->open_file(pfd, O_RDONLY, hint);\n"
                                 "n = reader.read(buf);  // then fstat(2) the stamp\n"
                                 'syslog(LOG_WARNING, "rename( failed");\n'
                                 "Status s = store.truncate_handle(hfd, size);\n",
            })
            self.assertEqual(check_fs_syscalls.violations(root), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
