"""Triton's own cache code (triton.runtime.cache.FileCacheManager from the
`triton` wheel on PyPI, unmodified) with TRITON_CACHE_DIR on a sealfs mount
using the built-in `triton` profile. No GPU is needed: the cache module
imports without one.

put / get_file / put_group / get_group across processes; a cached file damaged
in the backing store is a miss (never the damaged bytes) and the next put
repairs it; writers replacing one file while a reader reads it never show the
reader a missing or mixed file. The profile runs the CUDA validator on
*.cubin: a real cubin, made by the ptxas that the Triton wheel ships (as Triton
itself makes them), publishes; a corrupt one is refused with EBADMSG.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import scenario_venv
import sealfs_mount as sm

TRITON_REQUIREMENT = os.environ.get("SEALFS_TRITON_REQUIREMENT", "triton==3.9.0")
DRIVER = str(Path(__file__).with_name("triton_cache_driver.py"))
DRIVER_TIMEOUT_S = 120
KEY = "AAAAKEYFORSEALFSSCENARIOTEST0000000000000000000000000000"


def ptx_module(tag: str, padding_lines: int = 0) -> bytes:
    """A small, valid PTX module (what Triton caches as <name>.ptx)."""
    lines = [".version 8.0", ".target sm_80", ".address_size 64",
             f".visible .entry sealfs_{tag}(.param .u64 p)", "{", "  .reg .b64 %rd<2>;",
             "  ld.param.u64 %rd1, [p];", "  ret;", "}"]
    lines += [f"// padding line {i} for {tag}" for i in range(padding_lines)]
    return ("\n".join(lines) + "\n").encode()


def payload(tag: str, size: int) -> bytes:
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class TritonCacheOnSealfs(sm.ScenarioTestCase):
    python: Path

    cubin: bytes

    @classmethod
    def setUpClass(cls) -> None:
        cls.python = scenario_venv.ensure_venv("triton", [TRITON_REQUIREMENT], "triton.runtime.cache")
        # A real cubin from the wheel's own ptxas (no GPU needed to assemble).
        r = subprocess.run([str(cls.python), "-c", "import os, triton; print(os.path.join(os.path.dirname("
                            "triton.__file__), 'backends', 'nvidia', 'bin', 'ptxas'))"],
                           capture_output=True, text=True, check=True, timeout=DRIVER_TIMEOUT_S)
        ptxas = r.stdout.strip()
        with tempfile.TemporaryDirectory(prefix="sealfs-triton-ptxas.") as d:
            Path(d, "k.ptx").write_bytes(ptx_module("k"))
            subprocess.run([ptxas, "-arch=sm_80", str(Path(d, "k.ptx")), "-o", str(Path(d, "k.cubin"))],
                           check=True, capture_output=True, timeout=DRIVER_TIMEOUT_S)
            cls.cubin = Path(d, "k.cubin").read_bytes()

    def driver(self, m: sm.SealfsMount, ops: list[dict], cache_dir: str | None = None) -> list:
        """Runs ops in a new Python process, as a separate Triton program would."""
        env = dict(os.environ)
        env["TRITON_CACHE_DIR"] = cache_dir or m.path("triton")
        r = subprocess.run([str(self.python), DRIVER], input=json.dumps(ops), env=env,
                           capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, f"Triton driver failed:\n{r.stderr}")
        self.assertEqual(r.stderr, "", "Triton printed on stderr")
        return json.loads(r.stdout)

    def put(self, m: sm.SealfsMount, name: str, data: bytes) -> str:
        path = self.driver(m, [{"op": "put", "key": KEY, "name": name, "data": b64(data)}])[0]
        self.assertIsInstance(path, str, f"put {name} failed: {path}")
        return path

    def get_file(self, m: sm.SealfsMount, name: str) -> dict:
        return self.driver(m, [{"op": "get_file", "key": KEY, "name": name}])[0]

    def backing(self, m: sm.SealfsMount, name: str) -> str:
        return m.backing_path(os.path.join("triton", KEY, name))

    def assert_key_dir_clean(self, m: sm.SealfsMount) -> None:
        # put() removes its tmp.pid_* directory; nothing reserved is listed.
        names = os.listdir(m.path(os.path.join("triton", KEY)))
        self.assertEqual([n for n in names if n.startswith("tmp.pid_")], [], names)
        self.assertEqual(sm.reserved_names_in(names), [], names)

    def test_triton_cache_module_imports_without_a_gpu(self) -> None:
        r = subprocess.run([str(self.python), "-c",
                            "import triton.runtime.cache as c; print(c.FileCacheManager.__name__)"],
                           capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "FileCacheManager"), r.stderr)

    def test_put_then_get_across_processes(self) -> None:
        ptx = ptx_module("kernel", padding_lines=2000)
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            publishes_before = m.status().get("publishes", 0)
            path = self.put(m, "kernel.ptx", ptx)
            self.assertEqual(path, m.path(os.path.join("triton", KEY, "kernel.ptx")))
            self.assertGreater(m.status().get("publishes", 0), publishes_before,
                               "Triton's os.replace was not a publish")
            got = self.get_file(m, "kernel.ptx")
            self.assertEqual(got["path"], path)
            self.assertEqual(base64.b64decode(got["data"]), ptx)
            self.assertEqual(Path(self.backing(m, "kernel.ptx")).read_bytes(), ptx)
            self.assertIsNone(self.get_file(m, "never-put.json")["path"])
            self.assert_key_dir_clean(m)

    def test_put_group_get_group_across_processes(self) -> None:
        children = {"k.ptx": ptx_module("k", 100), "k.llir": payload("llir", 3000), "k.json": b'{"n": 1}'}
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            ops = [{"op": "put", "key": KEY, "name": n, "data": b64(d)} for n, d in children.items()]
            paths = dict(zip(children, self.driver(m, ops)))
            self.driver(m, [{"op": "put_group", "key": KEY, "name": "k.json", "group": paths}])
            group = self.driver(m, [{"op": "get_group", "key": KEY, "name": "k.json"}])[0]
            self.assertEqual(group, paths)

            # A damaged child makes the whole group a miss (Triton checks that
            # every child exists); a new put of the child repairs it.
            sm.truncate_file(self.backing(m, "k.ptx"))
            self.assertIsNone(self.driver(m, [{"op": "get_group", "key": KEY, "name": "k.json"}])[0])
            self.put(m, "k.ptx", children["k.ptx"])
            self.assertEqual(self.driver(m, [{"op": "get_group", "key": KEY, "name": "k.json"}])[0], paths)

            # A damaged group file is a miss too, repaired by put_group.
            sm.zero_fill(self.backing(m, "__grp__k.json"))
            self.assertIsNone(self.driver(m, [{"op": "get_group", "key": KEY, "name": "k.json"}])[0])
            self.driver(m, [{"op": "put_group", "key": KEY, "name": "k.json", "group": paths}])
            self.assertEqual(self.driver(m, [{"op": "get_group", "key": KEY, "name": "k.json"}])[0], paths)
            self.assert_key_dir_clean(m)

    def check_damage_is_a_miss_repaired_by_put(self, damage) -> None:
        ptx = ptx_module("kernel", padding_lines=2000)
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            self.put(m, "kernel.ptx", ptx)
            quarantined_before = m.status().get("quarantined", 0)
            damage(self.backing(m, "kernel.ptx"))
            got = self.get_file(m, "kernel.ptx")
            self.assertIsNone(got["path"], "Triton got a damaged file instead of a miss")
            self.assertIsNone(got["data"])
            self.assertGreater(m.status().get("quarantined", 0), quarantined_before)

            self.put(m, "kernel.ptx", ptx)  # Triton's miss path: compile, put
            got = self.get_file(m, "kernel.ptx")
            self.assertIsNotNone(got["path"], "the new put did not repair the entry")
            self.assertEqual(base64.b64decode(got["data"]), ptx)
            self.assertEqual(Path(self.backing(m, "kernel.ptx")).read_bytes(), ptx)
            self.assert_key_dir_clean(m)

    def test_zero_filled_file_is_a_miss_and_put_repairs_it(self) -> None:
        self.check_damage_is_a_miss_repaired_by_put(sm.zero_fill)

    def test_truncated_file_is_a_miss_and_put_repairs_it(self) -> None:
        self.check_damage_is_a_miss_repaired_by_put(sm.truncate_file)

    def test_control_without_sealfs_triton_returns_the_damaged_file(self) -> None:
        # Without sealfs, Triton hands the truncated file out as a hit: this is
        # what the sealfs tests above must prevent.
        with tempfile.TemporaryDirectory(prefix="sealfs-triton-plain.") as plain:
            env = dict(os.environ, TRITON_CACHE_DIR=plain)
            ptx = ptx_module("kernel", padding_lines=2000)
            ops = [{"op": "put", "key": KEY, "name": "kernel.ptx", "data": b64(ptx)}]
            subprocess.run([str(self.python), DRIVER], input=json.dumps(ops), env=env, check=True,
                           capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
            sm.truncate_file(os.path.join(plain, KEY, "kernel.ptx"))
            ops = [{"op": "get_file", "key": KEY, "name": "kernel.ptx"}]
            r = subprocess.run([str(self.python), DRIVER], input=json.dumps(ops), env=env, check=True,
                               capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
            got = json.loads(r.stdout)[0]
            self.assertIsNotNone(got["path"])
            self.assertEqual(len(base64.b64decode(got["data"])), len(ptx) // 2)

    def test_real_cubin_publishes_and_a_damaged_one_is_a_miss(self) -> None:
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            self.put(m, "kernel.cubin", self.cubin)
            got = self.get_file(m, "kernel.cubin")
            self.assertEqual(base64.b64decode(got["data"]), self.cubin)
            sm.truncate_file(self.backing(m, "kernel.cubin"))
            self.assertIsNone(self.get_file(m, "kernel.cubin")["path"])
            self.put(m, "kernel.cubin", self.cubin)
            self.assertEqual(base64.b64decode(self.get_file(m, "kernel.cubin")["data"]), self.cubin)

    def test_corrupt_cubin_is_refused_and_stays_a_miss(self) -> None:
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            truncated = self.cubin[: len(self.cubin) // 2]
            res = self.driver(m, [{"op": "put", "key": KEY, "name": "kernel.cubin", "data": b64(truncated)}])[0]
            self.assertEqual(res, {"errno": errno.EBADMSG}, "a truncated cubin was published")
            self.assertIsNone(self.get_file(m, "kernel.cubin")["path"])
            self.assertGreater(m.status().get("rejected", 0), 0)

    def test_concurrent_puts_never_show_a_reader_a_partial_file(self) -> None:
        versions = [payload(f"v{i}", 200_000 + i) for i in range(3)]
        with sm.SealfsMount(options=["profile=triton", "cache_timeout=0"]) as m:
            self.put(m, "hot.llir", versions[0])
            env = dict(os.environ, TRITON_CACHE_DIR=m.path("triton"))
            writer_ops = [{"op": "hammer_put", "key": KEY, "name": "hot.llir",
                           "datas": [b64(v) for v in versions], "rounds": 30}]
            reader_ops = [{"op": "hammer_get", "key": KEY, "name": "hot.llir", "rounds": 300}]
            procs = []
            with tempfile.TemporaryDirectory(prefix="sealfs-triton-ops.") as ops_dir:
                for i, ops in enumerate((writer_ops, writer_ops, reader_ops)):
                    ops_file = Path(ops_dir, f"{i}.json")
                    ops_file.write_text(json.dumps(ops))
                    with open(ops_file) as stdin:
                        procs.append(subprocess.Popen([str(self.python), DRIVER], env=env, stdin=stdin,
                                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                      text=True))
                outs = [p.communicate(timeout=DRIVER_TIMEOUT_S * 2) for p in procs]
            for p, (out, err) in zip(procs, outs):
                self.assertEqual(p.returncode, 0, err)
            seen = {base64.b64decode(s) for s in json.loads(outs[2][0])[0]}
            self.assertFalse(b"<missing>" in seen, "the reader found the name missing during a replace")
            self.assertTrue(seen <= set(versions), f"the reader saw a mixed or partial file: sizes "
                            f"{sorted(len(s) for s in seen)}, versions {[len(v) for v in versions]}")
            final = self.get_file(m, "hot.llir")
            self.assertIn(base64.b64decode(final["data"]), versions)
            self.assert_key_dir_clean(m)


if __name__ == "__main__":
    sm.require_environment(tools=["fusermount3"])
    unittest.main(verbosity=2)
