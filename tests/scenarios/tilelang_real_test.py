"""Real TileLang (the `tilelang` wheel from PyPI, unmodified KernelCache) with
TILELANG_CACHE_DIR on a sealfs mount using the built-in `tilelang` profile:
DESIGN.md's seed scenarios, damage done in the backing store.

Heavy: `pip install tilelang` pulls torch and the CUDA wheels (several GB), so
this test is registered only with -DSEALFS_HEAVY_SCENARIOS=ON (ctest label
"heavy"); see tests/scenarios/CMakeLists.txt.

TileLang ≥ 0.1.15 checks its own manifest.json at load and logs a warning
when an entry fails it. Through sealfs a damaged entry is gone before that:
the load is a plain miss and TileLang logs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import scenario_venv
import sealfs_mount as sm

TILELANG_REQUIREMENT = os.environ.get("SEALFS_TILELANG_REQUIREMENT", "tilelang==0.1.15")
DRIVER = str(Path(__file__).with_name("tilelang_cache_driver.py"))
DRIVER_TIMEOUT_S = 300
ENTRY_FILES = ["device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "manifest.json", "params.json"]
SOURCES = ["device_kernel.cu", "host_kernel.cu"]  # size-only in the tilelang profile
DIR_MANIFEST = ".sealfs-manifest"
INTEGRITY_WARNING = "failed integrity verification"


class TileLangOnSealfs(sm.ScenarioTestCase):
    python: Path

    @classmethod
    def setUpClass(cls) -> None:
        cls.python = scenario_venv.ensure_venv("tilelang", [TILELANG_REQUIREMENT], "tilelang.cache.kernel_cache")

    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sealfs-tilelang.")
        self.work = Path(self._tmp.name)
        (self.work / "k.c").write_text("int kernel_entry(int x) { return x * 2 + 1; }\n")
        self.lib = self.work / "kernel_lib.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(self.lib), str(self.work / "k.c")], check=True,
                       timeout=60)
        self.lib_sha = hashlib.sha256(self.lib.read_bytes()).hexdigest()

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def driver(self, cache_dir: str, ops: list[dict]) -> dict:
        env = dict(os.environ, TILELANG_CACHE_DIR=cache_dir)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # let the venv keep its bytecode: faster imports
        r = subprocess.run([str(self.python), DRIVER], input=json.dumps(ops), env=env, capture_output=True,
                           text=True, timeout=DRIVER_TIMEOUT_S, cwd=self.work)
        self.assertEqual(r.returncode, 0, f"TileLang driver failed:\n{r.stderr}")
        # TileLang's own log handler also writes to stdout: the result is the last line.
        return json.loads(r.stdout.strip().splitlines()[-1])

    def save(self, cache_dir: str, key: str) -> dict:
        out = self.driver(cache_dir, [{"op": "save", "key": key, "lib": str(self.lib),
                                       "device_src": f"// device {key}\n", "host_src": f"// host {key}\n"}])
        self.assertEqual(out["log"], [], "TileLang's save logged a problem")
        return out

    def load(self, cache_dir: str, key: str) -> tuple[dict | None, list[str]]:
        out = self.driver(cache_dir, [{"op": "load", "key": key}])
        return out["results"][0], out["log"]

    def assert_hit(self, cache_dir: str, key: str) -> None:
        got, log = self.load(cache_dir, key)
        self.assertIsNotNone(got, f"{key}: expected a hit")
        self.assertEqual(got["lib_sha256"], self.lib_sha)
        self.assertEqual(log, [])

    def assert_clean_miss(self, cache_dir: str, key: str) -> None:
        got, log = self.load(cache_dir, key)
        self.assertIsNone(got, f"{key}: expected a miss")
        self.assertEqual([l for l in log if INTEGRITY_WARNING in l], [],
                         "TileLang itself saw the damaged entry")

    def kernels_rel(self, m: sm.SealfsMount) -> str:
        paths = self.driver(m.path("cache"), [{"op": "paths"}])["results"][0]
        return os.path.relpath(paths["cache_root"], m.mountpoint)

    def mount(self) -> sm.SealfsMount:
        return sm.SealfsMount(options=["profile=tilelang", "cache_timeout=0"])

    # Seed scenario 1
    def test_save_leaves_a_manifest_with_sizes_and_binary_digests(self) -> None:
        with self.mount() as m:
            cache = m.path("cache")
            self.save(cache, "k1")
            self.assert_hit(cache, "k1")
            entry = m.backing_path(os.path.join(self.kernels_rel(m), "k1"))
            manifest = json.loads(Path(entry, DIR_MANIFEST).read_text())
            self.assertEqual(manifest.get("sealfs"), 1)
            files = manifest["files"]
            self.assertEqual(sorted(files), ENTRY_FILES)
            for name in ENTRY_FILES:
                self.assertEqual(files[name]["size"], os.path.getsize(os.path.join(entry, name)), name)
            self.assertEqual(files["kernel_lib.so"]["sha256"], self.lib_sha)
            for name in SOURCES:
                self.assertNotIn("sha256", files[name], f"{name} should be size-only")
            self.assertNotIn(DIR_MANIFEST, os.listdir(m.path(os.path.join(self.kernels_rel(m), "k1"))))

    # Seed scenarios 2 and 3
    def check_damaged_library(self, damage) -> None:
        with self.mount() as m:
            cache = m.path("cache")
            self.save(cache, "k2")
            rel_entry = os.path.join(self.kernels_rel(m), "k2")
            quarantined_before = m.status().get("quarantined", 0)
            damage(m.backing_path(os.path.join(rel_entry, "kernel_lib.so")))
            self.assertFalse(sm.exists_in_mount(m.path(rel_entry)), "the damaged entry is still visible")
            self.assert_clean_miss(cache, "k2")
            self.assertGreater(m.status().get("quarantined", 0), quarantined_before)
            self.assertNotEqual(m.quarantined_names(), [])
            self.save(cache, "k2")  # TileLang's miss path: compile, save
            self.assert_hit(cache, "k2")

    def test_truncated_library_is_a_clean_miss_and_the_next_save_succeeds(self) -> None:
        self.check_damaged_library(sm.truncate_file)

    def test_zero_filled_library_is_a_clean_miss_and_the_next_save_succeeds(self) -> None:
        self.check_damaged_library(sm.zero_fill)

    # Seed scenario 4
    def test_source_overwritten_with_same_size_is_still_a_hit(self) -> None:
        with self.mount() as m:
            cache = m.path("cache")
            self.save(cache, "k4")
            sm.overwrite_same_size(m.backing_path(os.path.join(self.kernels_rel(m), "k4", "device_kernel.cu")))
            self.assert_hit(cache, "k4")

    # Seed scenario 5
    def test_entry_written_behind_the_mount_is_a_miss_until_saved(self) -> None:
        with self.mount() as m:
            cache = m.path("cache")
            self.save(cache, "model")
            kernels = self.kernels_rel(m)
            # A complete-looking entry put straight into B, without a manifest.
            foreign = Path(m.backing_path(os.path.join(kernels, "k5")))
            foreign.mkdir()
            for name in ENTRY_FILES:
                (foreign / name).write_bytes(Path(m.backing_path(os.path.join(kernels, "model", name))).read_bytes())
            self.assert_clean_miss(cache, "k5")
            self.save(cache, "k5")
            self.assert_hit(cache, "k5")

    def test_control_without_sealfs_tilelang_sees_the_damage(self) -> None:
        cache = str(self.work / "plain-cache")
        self.save(cache, "k")
        paths = self.driver(cache, [{"op": "paths"}])["results"][0]
        sm.truncate_file(os.path.join(paths["cache_root"], "k", "kernel_lib.so"))
        got, log = self.load(cache, "k")
        self.assertIsNone(got)
        self.assertTrue(any(INTEGRITY_WARNING in l for l in log), log)


if __name__ == "__main__":
    sm.require_environment(tools=["cc", "fusermount3"])
    unittest.main(verbosity=2)
