#!/usr/bin/env python3
"""tests/lint/check_layers.py on this tree (it must be clean) and on planted
trees (it must flag each kind of violation, and only those)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def plant(root: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


class CheckLayers(unittest.TestCase):
    def test_this_tree_is_clean(self) -> None:
        self.assertEqual(check_layers.violations(ROOT), [])

    def test_each_kind_of_violation_is_flagged(self) -> None:
        with tempfile.TemporaryDirectory() as root:
            plant(root, {
                "core/base/a.hpp": '#include "core/verify/verifier.hpp"\n',       # upward
                "core/verify/b.cpp": '#include "core/cuda/cuda.hpp"\n',          # upward, next layer
                "fs/fuse/c.cpp": '#include "fs/cli/options.hpp"\n',              # adapter on the CLI
                "fs/fuse/d.cpp": '#include "core/store/judge.hpp"\n',            # store-private
                "core/odd/e.cpp": "",                                           # in no layer
            })
            found = check_layers.violations(root)
        self.assertEqual(len(found), 5, found)
        for where in ("core/base/a.hpp:1", "core/verify/b.cpp:1", "fs/fuse/c.cpp:1", "fs/fuse/d.cpp:1",
                      "core/odd/e.cpp"):
            self.assertTrue(any(v.startswith(where) for v in found), f"{where} not flagged: {found}")

    def test_downward_and_public_includes_pass(self) -> None:
        with tempfile.TemporaryDirectory() as root:
            plant(root, {
                "core/store/a.cpp": '#include "core/store/judge.hpp"\n#include "core/cuda/cuda.hpp"\n',
                "fs/fuse/b.cpp": '#include "core/store/store.hpp"\n#include "core/base/result.hpp"\n',
                "fs/cli/c.cpp": '#include "fs/fuse/session.hpp"\n#include <fuse_lowlevel.h>\n',
            })
            self.assertEqual(check_layers.violations(root), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
