"""A seeded random operation mix (fsmix.py) on sealfs mounts, many seeds.

Modes (seeds, operations each; 2 to 3 minutes on 2 busy cores in all):
  single   generic profile, 40 seeds × 300 operations in one process, each
           compared with the same seed in a plain directory: every outcome
           (ok or errno) and the final tree name by name (type, mode, size,
           link count, content digest, symlink target, user.* xattrs);
  entry    tilelang profile, 12 seeds × 300, the same comparison, the mix run
           inside a directory published the TileLang way (so every change
           amends an entry, and directory renames make entries inside it);
  multi    generic profile, 8 seeds, 3 processes × 200 operations each in a
           subtree of its own and one shared subtree;
  multi-entry  tilelang, 4 seeds, the same inside a published entry;
  direct   generic, 10 seeds × 300 with O_DIRECT writes in the mix, compared
           with a plain directory as in single.
Every mode also requires: nothing in B/.sealfs/quarantine, `sealfs fsck B`
clean after the unmount, and a fresh mount of B showing the same tree (a
file hidden at the next mount is data lost). See fsmix_check.py.

KNOWN_FAILURES lists the seeds that fail on the code this test was written
against, by mode, with the first symptom each showed. The test fails when a
seed NOT listed fails; a listed seed that passes is reported (shrink the
list as fixes land). Every run prints the list. Each failure is printed
with its seed and a one-line command that reproduces it; `fsmix_check.py
shrink` with the same options finds the fewest operations that still fail.
"""

from __future__ import annotations

import time
import unittest
from dataclasses import replace

import fsmix_check as fc
import sealfs_mount as sm

# mode → (Config template, seeds)
MODES = {
    "single": (fc.Config(0, 300, "generic"), range(1, 41)),
    "entry": (fc.Config(0, 300, "tilelang", entry=True), range(1, 13)),
    "multi": (fc.Config(0, 200, "generic", procs=3), range(1, 9)),
    "multi-entry": (fc.Config(0, 200, "tilelang", entry=True, procs=3), range(1, 5)),
    # O_DIRECT writes too (issue 38 point 7: sealfs accepts them).
    "direct": (fc.Config(0, 300, "generic", direct=True), range(1, 11)),
}

# Seeds that failed on main (23af38d) in 3 to 8 runs of this test, with the
# first problem each showed ("op N kind: plain X, sealfs Y" is the first
# outcome that differed). Shrunk, they are: a truncate or link
# through one hard link after another name in another directory is gone
# (EBUSY, ENOENT, a stale manifest); a change inside an entry nested in an
# entry (the outer manifest goes stale, the whole outer entry is hidden); a
# rename onto an empty directory entry that quarantines it ("R5: directory
# holding only hidden objects"); with several processes also EBUSY from
# truncate, EIO and ESTALE from a splice or copy_file_range racing a write
# through another name. "(flaky)": it passed in some runs (seals run after
# RELEASE, so timing matters); multi-process seeds all are.
# Remove a seed once it passes; never add one to make a new failure pass.
# A daemon that crashes or a run that hangs fails the test even for a seed
# listed here.
KNOWN_FAILURES: dict[str, dict[int, str]] = {
    # Every single-process seed passes since hard links are followed by
    # inode and a rename may replace an empty entry (3 runs of 3).
    "single": {},
    # Seeds 1 and 7 pass since an rmdir blocks on a child judged in passing
    # (52e8693), and with entries kept listed while a seal amends them
    # (3 release sweeps of the 12, 3 ASan sweeps).
    "entry": {},
    # Every multi-process seed passes since truncates, renames onto listed
    # files, directory moves and renames into entries keep their files in
    # progress or re-recorded (3 release and 4 ASan sweeps each), but for the
    # ESTALE of TOLERATED_ERRNOS below.
    "multi": {},
    "direct": {},
    "multi-entry": {},
}
# Errnos that, alone, fail no multi-process seed: an open (or a read) of a
# file that another process just unlinked or replaced through another name
# is answered ESTALE now and then where a plain directory opens the file
# (1 ASan run in 3 of the 12 multi seeds; issue 38 keeps it open). Any
# other problem with them (a quarantine, fsck, another errno) still fails.
TOLERATED_ERRNOS: dict[str, set[str]] = {"multi": {"ESTALE"}, "multi-entry": {"ESTALE"}}
# Problems no listed seed excuses.
ALWAYS_FATAL = {"daemon", "run"}


class FsmixOnSealfs(sm.ScenarioTestCase):

    @classmethod
    def setUpClass(cls) -> None:
        known = [f"{mode} {seed}" for mode, seeds in KNOWN_FAILURES.items() for seed in sorted(seeds)]
        print(f"{len(known)} known failures: seeds " + (", ".join(known) or "none"), flush=True)

    def run_mode(self, mode: str) -> None:
        template, seeds = MODES[mode]
        known = KNOWN_FAILURES[mode]
        binary = sm.sealfs_binary()
        new, still, fixed = [], [], []
        started = time.monotonic()
        for seed in seeds:
            cfg = replace(template, seed=seed)
            v = fc.check(cfg, binary)
            if v.ok:
                if seed in known:
                    fixed.append(seed)
                continue
            tolerated = set(v.categories()) == {"errno"} and v.errnos <= TOLERATED_ERRNOS.get(mode, set())
            excused = tolerated or (seed in known and not ALWAYS_FATAL & set(v.categories()))
            (still if excused else new).append(seed)
            tag = "tolerated: " + ", ".join(sorted(v.errnos)) if tolerated else "known" if excused else "NEW FAILURE"
            # A new failure says all it found: CI's log is the only trace of a
            # seed that fails once under load and not when rerun.
            detail = "" if excused else "".join(
                f"\n    {c}: " + t[:3000].replace("\n", "\n      ") for c, t in v.problems)
            print(f"[{mode}] seed {seed} fails ({tag}): {v.symptom()}\n    {v.summary()[:400]}{detail}\n"
                  f"    reproduce: {cfg.reproduce()}"
                  + ("" if cfg.procs else
                     f"\n    shrink:    {cfg.reproduce().replace(' check ', ' shrink ')}"), flush=True)
        print(f"[{mode}] {len(seeds)} seeds in {time.monotonic() - started:.0f}s: "
              f"{len(new)} new failure(s) {new}, {len(still)} known still failing, "
              f"{len(fixed)} known now passing {fixed}"
              + (" (remove them from KNOWN_FAILURES once they pass every run)" if fixed else ""),
              flush=True)
        self.assertEqual(new, [], f"[{mode}] seeds outside KNOWN_FAILURES failed (reproduce lines above)")

    def test_single_process_vs_plain(self) -> None:
        self.run_mode("single")

    def test_inside_a_published_entry_vs_plain(self) -> None:
        self.run_mode("entry")

    def test_multi_process(self) -> None:
        self.run_mode("multi")

    def test_multi_process_inside_an_entry(self) -> None:
        self.run_mode("multi-entry")

    def test_direct_writes_vs_plain(self) -> None:
        self.run_mode("direct")


if __name__ == "__main__":
    sm.require_environment(tools=["fusermount3"])
    unittest.main(verbosity=2)
