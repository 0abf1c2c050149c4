"""The counters for scrapers, read by a real Prometheus parser.

A tilelang mount with -o metrics_file publishes and loads an entry, then one
of its files is truncated in the backing store and loaded again (a miss, a
quarantine). Both `sealfs status --format=prometheus` and the metrics file
are then parsed with prometheus_client's own text parser
(prometheus_client.parser.text_string_to_metric_families, from PyPI, in a venv
under build/scenario-venvs): every family must come out with the type sealfs
declares (nothing "unknown"), the histogram's buckets cumulative up to +Inf =
_count, every sample labelled with the mountpoint, and the counters where
the work left them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import scenario_venv
import sealfs_mount as sm

PROTOCOL = str(Path(__file__).with_name("tilelang_protocol.py"))
REQUIREMENT = "prometheus_client"

# Runs in the venv: the families as JSON; a parse error exits non-zero.
PARSE = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = []
for f in text_string_to_metric_families(sys.stdin.read()):
    families.append({"name": f.name, "type": f.type, "help": f.documentation,
                     "samples": [[s.name, s.labels, s.value] for s in f.samples]})
print(json.dumps(families))
"""

EXPECTED_TYPES = {
    "sealfs_lookups": "counter",
    "sealfs_hits": "counter",
    "sealfs_misses": "counter",
    "sealfs_judgements": "counter",
    "sealfs_hidden": "counter",
    "sealfs_quarantined": "counter",
    "sealfs_publish_duration_seconds": "histogram",
    "sealfs_publishes": "counter",
    "sealfs_validator_rejections": "counter",
    "sealfs_seals": "counter",
    "sealfs_abandoned_writes": "counter",
    "sealfs_unseen_writes_refused": "counter",
    "sealfs_hashed_bytes": "counter",
    "sealfs_hashed_files": "counter",
    "sealfs_reads": "counter",
    "sealfs_passthrough_opens": "counter",
    "sealfs_pushed_bytes": "counter",
    "sealfs_in_progress_files": "gauge",
    "sealfs_open_handles": "gauge",
    "sealfs_parked_handles": "gauge",
    "sealfs_inodes": "gauge",
    "sealfs_inode_files": "gauge",
    "sealfs_inode_bound": "gauge",
    "sealfs_descriptors": "gauge",
    "sealfs_descriptor_limit": "gauge",
}


class MetricsFormat(sm.ScenarioTestCase):
    python: Path

    @classmethod
    def setUpClass(cls) -> None:
        cls.python = scenario_venv.ensure_venv("prometheus-client", [REQUIREMENT], "prometheus_client.parser")

    def parse(self, text: str) -> dict:
        r = subprocess.run([str(self.python), "-c", PARSE], input=text, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            self.fail(f"prometheus_client could not parse:\n{r.stderr}\n--- text ---\n{text}")
        return {f["name"]: f for f in json.loads(r.stdout)}

    def tilelang(self, command: str, cache: str, key: str) -> int:
        return subprocess.run([sys.executable, PROTOCOL, command, cache, key], capture_output=True,
                              timeout=60).returncode

    @staticmethod
    def value(family: dict, sample: str, **labels: str) -> float:
        for name, sample_labels, value in family["samples"]:
            if name == sample and all(sample_labels.get(k) == v for k, v in labels.items()):
                return value
        raise AssertionError(f"no sample {sample} {labels} in {family['name']}")

    def check(self, families: dict, mountpoint: str, where: str) -> None:
        with self.subTest(where):
            self.assertEqual({n: f["type"] for n, f in families.items()}, EXPECTED_TYPES)
            for f in families.values():
                self.assertTrue(f["help"], f["name"])
                for name, labels, _ in f["samples"]:
                    self.assertEqual(labels.get("mountpoint"), mountpoint, name)
            self.assertGreaterEqual(self.value(families["sealfs_publishes"], "sealfs_publishes_total"), 1)
            self.assertGreaterEqual(self.value(families["sealfs_hits"], "sealfs_hits_total"), 1)
            self.assertGreaterEqual(self.value(families["sealfs_misses"], "sealfs_misses_total"), 1)
            quarantined = families["sealfs_quarantined"]
            self.assertEqual(self.value(quarantined, "sealfs_quarantined_total", reason="size"), 1)
            self.assertEqual(sum(v for _, _, v in quarantined["samples"]), 1)
            hidden = families["sealfs_hidden"]
            self.assertGreaterEqual(self.value(hidden, "sealfs_hidden_total", reason="size"), 1)
            reasons = {labels["reason"] for _, labels, _ in hidden["samples"]}
            self.assertIn("digest", reasons)
            self.assertIn("foreign", reasons)
            h = families["sealfs_publish_duration_seconds"]
            buckets = [(labels["le"], v) for name, labels, v in h["samples"]
                       if name == "sealfs_publish_duration_seconds_bucket"]
            self.assertEqual(buckets[-1][0], "+Inf")
            bounds = [float(le) for le, _ in buckets]
            self.assertEqual(bounds, sorted(bounds))
            counts = [v for _, v in buckets]
            self.assertEqual(counts, sorted(counts), "buckets are cumulative")
            count = self.value(h, "sealfs_publish_duration_seconds_count")
            self.assertEqual(counts[-1], count)
            self.assertEqual(count, self.value(families["sealfs_publishes"], "sealfs_publishes_total"))
            self.assertGreater(self.value(h, "sealfs_publish_duration_seconds_sum"), 0)

    def test_status_and_metrics_file_parse_with_prometheus_client(self) -> None:
        with tempfile.TemporaryDirectory(prefix="sealfs-prom.") as prom:
            path = os.path.join(prom, "sealfs.prom")
            options = ["profile=tilelang", "cache_timeout=0", f"metrics_file={path}", "metrics_interval=0.2"]
            with sm.SealfsMount(options=options) as m:
                mountpoint = os.path.realpath(m.mountpoint)
                self.assertEqual(self.tilelang("save", m.path(), "k"), 0)
                self.assertEqual(self.tilelang("load", m.path(), "k"), 0)
                self.assertEqual(self.tilelang("load", m.path(), "absent"), 3)
                sm.truncate_file(m.backing_path("ns/kernels/k/kernel_lib.so"))
                self.assertEqual(self.tilelang("load", m.path(), "k"), 3)
                status = self.run_checked([sm.sealfs_binary(), "status", "--format=prometheus", m.path()])
                self.check(self.parse(status.stdout), mountpoint, "sealfs status --format=prometheus")
                deadline = time.monotonic() + 10
                while True:  # rewritten every 0.2 s
                    families = self.parse(Path(path).read_text())
                    q = families["sealfs_quarantined"]
                    if self.value(q, "sealfs_quarantined_total", reason="size") == 1 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                self.check(families, mountpoint, "metrics_file")
            # Written once more at the unmount, and still well formed.
            self.check(self.parse(Path(path).read_text()), mountpoint, "metrics_file after the unmount")
            self.assertFalse(os.path.exists(path + ".tmp"))


if __name__ == "__main__":
    sm.require_environment(tools=["fusermount3"])
    unittest.main(verbosity=2)
