"""ccache, unchanged, with its cache directory on a sealfs mount.

A set of C files is built twice (the second build must be all direct hits),
then ccache's result and manifest files are damaged in the backing store. The
next build must treat them as clean misses: no error, objects byte-identical
to a build without ccache, the damaged files quarantined, ccache never shown
the damaged bytes (its log has no "Failed to get result" line), and the build
after that is all direct hits again.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path
from typing import Callable

import sealfs_mount as sm

N_SOURCES = 10
COMPILE_TIMEOUT_S = 60
# How ccache 4.x says it read a damaged cache file (Bad magic value, checksum
# mismatch, …). sealfs should keep it from ever getting that far.
CCACHE_READ_FAILURE = re.compile(r"Failed to get result|Bad magic|[Cc]orrupt|checksum mismatch")


def write_sources(src: Path) -> list[str]:
    (src / "common.h").write_text("#pragma once\n#define SCALE(x) ((x) * 3 + 1)\n")
    names = []
    for i in range(N_SOURCES):
        name = f"unit{i}.c"
        body = ['#include "common.h"', f"static int table{i}[{16 + i}];"]
        body += [f"int f{i}_{j}(int x) {{ table{i}[x % {16 + i}] += SCALE(x + {j}); "
                 f"return table{i}[(x + {j}) % {16 + i}]; }}" for j in range(8)]
        (src / name).write_text("\n".join(body) + "\n")
        names.append(name)
    return names


def parse_print_stats(text: str) -> dict[str, int]:
    """`ccache --print-stats`: one "name<TAB>value" per line (ccache ≥ 4.0)."""
    stats = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            stats[parts[0]] = int(parts[1])
    return stats


def parse_stats_log(text: str) -> dict[str, list[str]]:
    """ccache's stats_log (ccache ≥ 4.0): "# <source>" then one counter name a
    line, for each compilation."""
    per_source: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# "):
            current = os.path.basename(line[2:].strip())
            per_source[current] = []
        elif line.strip() and current is not None:
            per_source[current].append(line.strip())
    return per_source


def outcome(counters: list[str]) -> str:
    for name in ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss"):
        if name in counters:
            return name
    return "other: " + ",".join(counters)


class CcacheRunner:
    """Builds the sources with `ccache cc` into an output directory."""

    def __init__(self, test: unittest.TestCase, src: Path, sources: list[str], cache_dir: str,
                 log_file: str) -> None:
        self.test, self.src, self.sources = test, src, sources
        self.env = dict(os.environ)
        for key in list(self.env):
            if key.startswith("CCACHE_"):
                del self.env[key]  # nothing from the caller's ccache setup
        self.env.update({
            "CCACHE_DIR": cache_dir,
            "CCACHE_TEMPDIR": os.path.join(cache_dir, "tmp"),
            "CCACHE_CONFIGPATH": os.path.join(cache_dir, "ccache.conf"),
            "CCACHE_LOGFILE": log_file,
            "CCACHE_MAXSIZE": "0",  # no cleanup in the middle of a test
        })
        self.builds = 0

    def ccache(self, *args: str) -> str:
        r = subprocess.run(["ccache", *args], env=self.env, capture_output=True, text=True,
                           timeout=COMPILE_TIMEOUT_S)
        self.test.assertEqual(r.returncode, 0, f"ccache {' '.join(args)}: {r.stderr}")
        return r.stdout

    def stats(self) -> dict[str, int]:
        """The cache's totals (`ccache -z` and these read all 256 stats files:
        slow through FUSE, so the per-build outcome comes from the stats log)."""
        stats = parse_print_stats(self.ccache("--print-stats"))
        self.test.assertIn("direct_cache_hit", stats, "ccache --print-stats has no direct_cache_hit")
        return stats

    def build(self, out: Path) -> dict[str, str]:
        """Compiles every source; returns source → direct_cache_hit,
        preprocessed_cache_hit or cache_miss, from this build's stats log."""
        out.mkdir(parents=True, exist_ok=True)
        self.builds += 1
        stats_log = Path(self.env["CCACHE_LOGFILE"]).with_name(f"stats-{self.builds}.log")
        env = dict(self.env, CCACHE_STATSLOG=str(stats_log))
        for name in self.sources:
            r = subprocess.run(["ccache", "cc", "-O2", "-c", name, "-o", str(out / (name[:-2] + ".o"))],
                               cwd=self.src, env=env, capture_output=True, text=True,
                               timeout=COMPILE_TIMEOUT_S)
            self.test.assertEqual(r.returncode, 0, f"ccache cc {name}: {r.stderr}")
            self.test.assertEqual(r.stderr, "", f"ccache cc {name} printed on stderr")
        per_source = parse_stats_log(stats_log.read_text())
        self.test.assertEqual(sorted(per_source), sorted(self.sources), "stats log does not cover the build")
        return {src: outcome(counters) for src, counters in per_source.items()}


def reference_build(src: Path, sources: list[str], out: Path) -> None:
    out.mkdir(parents=True)
    for name in sources:
        subprocess.run(["cc", "-O2", "-c", name, "-o", str(out / (name[:-2] + ".o"))], cwd=src,
                       check=True, timeout=COMPILE_TIMEOUT_S)


def cache_files(cache_dir: str, suffix: str) -> list[str]:
    """ccache 4.x's result ("…R") or manifest ("…M") files, sorted."""
    found = []
    for root, dirs, files in os.walk(cache_dir):
        dirs[:] = [d for d in dirs if not d.startswith(sm.RESERVED_PREFIX) and d != "tmp"]
        found += [os.path.join(root, f) for f in files
                  if f.endswith(suffix) and not f.startswith(sm.RESERVED_PREFIX)]
    return sorted(found)


class CcacheOnSealfs(sm.ScenarioTestCase):

    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sealfs-ccache.")
        self.work = Path(self._tmp.name)
        self.src = self.work / "src"
        self.src.mkdir()
        self.sources = write_sources(self.src)
        reference_build(self.src, self.sources, self.work / "ref")

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def assert_objects_match_reference(self, out: Path) -> None:
        for name in self.sources:
            obj = name[:-2] + ".o"
            self.assertEqual((out / obj).read_bytes(), (self.work / "ref" / obj).read_bytes(),
                             f"{out / obj} differs from the build without ccache")

    def log_read_failures(self, log_file: str) -> list[str]:
        try:
            return [l for l in Path(log_file).read_text(errors="replace").splitlines()
                    if CCACHE_READ_FAILURE.search(l)]
        except FileNotFoundError:
            return []

    def test_second_build_is_all_direct_hits(self) -> None:
        with sm.SealfsMount(options=["cache_timeout=0"]) as m:
            cc = CcacheRunner(self, self.src, self.sources, m.path("ccache"), str(self.work / "ccache.log"))
            cold = cc.build(self.work / "cold")
            self.assertEqual(set(cold.values()), {"cache_miss"}, cold)
            warm = cc.build(self.work / "warm")
            self.assertEqual(set(warm.values()), {"direct_cache_hit"}, warm)
            # ccache's own totals agree (both builds: N misses, then N direct hits).
            totals = cc.stats()
            self.assertEqual(totals.get("direct_cache_hit", 0), N_SOURCES, totals)
            self.assertEqual(totals.get("cache_miss", 0), N_SOURCES, totals)
            self.assert_objects_match_reference(self.work / "cold")
            self.assert_objects_match_reference(self.work / "warm")
            self.assertEqual(len(cache_files(m.backing_path("ccache"), "R")), N_SOURCES)

    def check_damage_is_a_clean_miss(self, damage: Callable[[str], int]) -> None:
        log_file = str(self.work / "ccache.log")
        with sm.SealfsMount(options=["cache_timeout=0"]) as m:
            cc = CcacheRunner(self, self.src, self.sources, m.path("ccache"), log_file)
            cc.build(self.work / "cold")
            results = cache_files(m.backing_path("ccache"), "R")
            manifests = cache_files(m.backing_path("ccache"), "M")
            self.assertEqual(len(results), N_SOURCES)
            self.assertEqual(len(manifests), N_SOURCES)
            # Half the results, and one of ccache's own manifests.
            damaged = results[: N_SOURCES // 2] + manifests[-1:]
            for path in damaged:
                damage(path)
            quarantined_before = m.status().get("quarantined", 0)
            for path in damaged:
                rel = os.path.relpath(path, m.backing)
                self.assertFalse(sm.exists_in_mount(m.path(rel)), f"damaged {rel} is still visible")
            Path(log_file).unlink()

            after = cc.build(self.work / "after-damage")
            self.assert_objects_match_reference(self.work / "after-damage")
            self.assertEqual(self.log_read_failures(log_file), [],
                             "ccache read damaged bytes through the mount")
            # A damaged result is a miss; the damaged manifest costs at most a
            # preprocessor run; everything else is still a direct hit.
            outcomes = list(after.values())
            self.assertEqual(outcomes.count("cache_miss"), N_SOURCES // 2, after)
            self.assertEqual(outcomes.count("direct_cache_hit") + outcomes.count("preprocessed_cache_hit")
                             + outcomes.count("cache_miss"), N_SOURCES, after)
            self.assertGreaterEqual(outcomes.count("direct_cache_hit"), N_SOURCES - N_SOURCES // 2 - 1, after)
            self.assertGreaterEqual(m.status().get("quarantined", 0) - quarantined_before, len(damaged),
                                    "the damaged files were not quarantined")
            # The rebuild published the results again: visible and valid.
            for path in results[: N_SOURCES // 2]:
                rel = os.path.relpath(path, m.backing)
                self.assertTrue(sm.exists_in_mount(m.path(rel)), f"{rel} was not rebuilt")

            repaired = cc.build(self.work / "repaired")
            self.assertEqual(set(repaired.values()), {"direct_cache_hit"}, repaired)
            self.assert_objects_match_reference(self.work / "repaired")

    def test_zero_filled_cache_files_are_clean_misses(self) -> None:
        self.check_damage_is_a_clean_miss(sm.zero_fill)

    def test_truncated_cache_files_are_clean_misses(self) -> None:
        self.check_damage_is_a_clean_miss(sm.truncate_file)

    def test_control_without_sealfs_ccache_reads_the_damage(self) -> None:
        # The same damage in a plain directory: ccache does read the zeros and
        # logs it. This keeps the "no read failure in the log" check honest.
        log_file = str(self.work / "plain.log")
        cc = CcacheRunner(self, self.src, self.sources, str(self.work / "plain-cache"), log_file)
        cc.build(self.work / "plain-cold")
        for path in cache_files(str(self.work / "plain-cache"), "R")[:2]:
            sm.zero_fill(path)
        Path(log_file).unlink()
        cc.build(self.work / "plain-after")
        self.assertNotEqual(self.log_read_failures(log_file), [])
        self.assert_objects_match_reference(self.work / "plain-after")


if __name__ == "__main__":
    sm.require_environment(tools=["ccache", "cc", "fusermount3"])
    unittest.main(verbosity=2)
