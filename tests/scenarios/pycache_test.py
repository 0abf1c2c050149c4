"""Python's bytecode cache, unchanged, on a sealfs mount (PYTHONPYCACHEPREFIX).

Generated modules are imported in a subprocess; their .pyc files appear
through the mount. Some are then truncated or zero-filled in the backing
store. The next run must print nothing on stderr, give the same answers, and
rewrite those .pyc files, which are then valid bytecode again.

A control run shows the damage is real: the same truncation (header intact,
marshalled code cut short) in a plain directory makes the import fail.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import sealfs_mount as sm

N_MODULES = 12
RUN_TIMEOUT_S = 60
PYC_HEADER_SIZE = 16  # magic, flags, mtime (or hash), source size


def write_modules(src: Path) -> list[str]:
    names = []
    for i in range(N_MODULES):
        name = f"gen_mod{i}"
        funcs = "\n".join(f"def f{j}(x):\n    return [x * {j} + k for k in range({i + j + 3})]\n"
                          for j in range(20))
        (src / f"{name}.py").write_text(f'"""generated module {i}"""\nVALUE = {i * 7}\n{funcs}\n')
        names.append(name)
    return names


def importer_script(names: list[str]) -> str:
    imports = "".join(f"import {n}\n" for n in names)
    total = " + ".join(f"{n}.VALUE + sum({n}.f3(2))" for n in names)
    return f"{imports}print({total})\n"


class PycacheOnSealfs(sm.ScenarioTestCase):

    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sealfs-pycache.")
        self.work = Path(self._tmp.name)
        self.src = self.work / "src"
        self.src.mkdir()
        self.names = write_modules(self.src)
        self.script = importer_script(self.names)

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def run_python(self, prefix: str) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update({"PYTHONPYCACHEPREFIX": prefix, "PYTHONPATH": str(self.src)})
        return subprocess.run([sys.executable, "-c", self.script], env=env, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S, cwd=self.work)

    def pyc_rel_paths(self, prefix: str) -> dict[str, str]:
        """module name → the path of its .pyc relative to the cache prefix."""
        found = {}
        for root, dirs, files in os.walk(prefix):
            dirs[:] = [d for d in dirs if not d.startswith(sm.RESERVED_PREFIX)]
            for f in files:
                mod = f.split(".")[0]
                if mod in self.names and f.endswith(".pyc"):
                    found[mod] = os.path.relpath(os.path.join(root, f), prefix)
        return found

    def assert_valid_pyc(self, path: str) -> None:
        data = Path(path).read_bytes()
        self.assertGreater(len(data), PYC_HEADER_SIZE, f"{path} is too short")
        self.assertEqual(data[:4], importlib.util.MAGIC_NUMBER, f"{path} has a bad magic number")
        import marshal
        code = marshal.loads(data[PYC_HEADER_SIZE:])  # raises on damaged bytecode
        self.assertEqual(type(code).__name__, "code")

    def expected_output(self) -> str:
        r = self.run_python(str(self.work / "reference-cache"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_pyc_files_are_written_through_the_mount(self) -> None:
        expected = self.expected_output()
        with sm.SealfsMount(options=["cache_timeout=0"]) as m:
            prefix = m.path("pycache")
            first = self.run_python(prefix)
            self.assertEqual((first.returncode, first.stderr), (0, ""))
            self.assertEqual(first.stdout, expected)
            pycs = self.pyc_rel_paths(prefix)
            self.assertEqual(sorted(pycs), sorted(self.names), "a .pyc is missing through the mount")
            for rel in pycs.values():
                self.assert_valid_pyc(os.path.join(prefix, rel))
                # Same bytes in the backing store: sealfs shows what is there.
                self.assertEqual(Path(prefix, rel).read_bytes(),
                                 Path(m.backing_path("pycache"), rel).read_bytes())
            second = self.run_python(prefix)
            self.assertEqual((second.returncode, second.stderr, second.stdout), (0, "", expected))

    def test_damaged_pyc_files_are_rewritten(self) -> None:
        expected = self.expected_output()
        with sm.SealfsMount(options=["cache_timeout=0"]) as m:
            prefix = m.path("pycache")
            backing_prefix = m.backing_path("pycache")
            first = self.run_python(prefix)
            self.assertEqual((first.returncode, first.stderr), (0, ""))
            pycs = self.pyc_rel_paths(prefix)
            self.assertEqual(len(pycs), N_MODULES)

            truncated = [pycs[n] for n in self.names[0:4]]
            zeroed = [pycs[n] for n in self.names[4:8]]
            intact = [pycs[n] for n in self.names[8:]]
            for rel in truncated:
                path = os.path.join(backing_prefix, rel)
                # Header intact, code cut short: the worst case for Python.
                sm.truncate_file(path, os.path.getsize(path) - 10)
            for rel in zeroed:
                sm.zero_fill(os.path.join(backing_prefix, rel))
            intact_before = {rel: Path(backing_prefix, rel).stat().st_ino for rel in intact}
            for rel in truncated + zeroed:
                self.assertFalse(sm.exists_in_mount(os.path.join(prefix, rel)),
                                 f"damaged {rel} is visible through the mount")

            again = self.run_python(prefix)
            self.assertEqual(again.stderr, "", "Python saw the damage")
            self.assertEqual(again.returncode, 0)
            self.assertEqual(again.stdout, expected)

            for rel in truncated + zeroed:
                through_mount = os.path.join(prefix, rel)
                self.assertTrue(sm.exists_in_mount(through_mount), f"{rel} was not rewritten")
                self.assert_valid_pyc(through_mount)
                self.assert_valid_pyc(os.path.join(backing_prefix, rel))  # valid in B again
            for rel, ino in intact_before.items():
                # Intact ones were hits: not rewritten.
                self.assertEqual(Path(backing_prefix, rel).stat().st_ino, ino, f"{rel} was rewritten")

            third = self.run_python(prefix)
            self.assertEqual((third.returncode, third.stderr, third.stdout), (0, "", expected))

    def test_control_without_sealfs_python_fails_on_the_damage(self) -> None:
        prefix = str(self.work / "plain-cache")
        first = self.run_python(prefix)
        self.assertEqual(first.returncode, 0, first.stderr)
        rel = self.pyc_rel_paths(prefix)[self.names[0]]
        path = os.path.join(prefix, rel)
        sm.truncate_file(path, os.path.getsize(path) - 10)
        again = self.run_python(prefix)
        self.assertNotEqual(again.returncode, 0, "a truncated .pyc no longer breaks Python: the "
                            "damage used by the sealfs test proves nothing")
        self.assertIn("Error", again.stderr)


if __name__ == "__main__":
    sm.require_environment(tools=["fusermount3"])
    unittest.main(verbosity=2)
