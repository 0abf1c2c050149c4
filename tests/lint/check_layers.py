#!/usr/bin/env python3
"""The layering rule (README "Architecture"), checked on the sources:

  core/base < core/layout < core/manifest < core/verify < core/cuda
            < core/store < core/writers < fs/fuse < fs/cli

A file may include its own folder and the folders below it, never one above.
Outside core/store (tests aside), only the store's public headers may be
included: the rest are its parts, private to it. Prints each violation as
FILE:LINE and exits 1 if there is any.

    tests/lint/check_layers.py [ROOT]     (default: the repository root)
"""

from __future__ import annotations

import os
import re
import sys

import lint_main

LAYERS = ["core/base", "core/layout", "core/manifest", "core/verify", "core/cuda", "core/store",
          "core/writers", "fs/fuse", "fs/cli"]
STORE_PUBLIC = {
    "core/store/store.hpp",
    "core/store/offline.hpp",
    "core/store/progress.hpp",
    "core/store/quarantine_report.hpp",  # fsck prints what the quarantine holds
    "core/store/validators.hpp",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".cpp", ".hpp", ".h")


def layer_of(path: str) -> int | None:
    for rank, folder in enumerate(LAYERS):
        if path.startswith(folder + "/"):
            return rank
    return None


def violations(root: str) -> list[str]:
    found = []
    for top in ("core", "fs"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                own = layer_of(path)
                if own is None:
                    found.append(f"{path}: in no layer ({', '.join(LAYERS)})")
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        rank = layer_of(target)
                        if rank is not None and rank > own:
                            found.append(f"{path}:{number}: {LAYERS[own]} includes {target}, a layer above it")
                        elif (target.startswith("core/store/") and not path.startswith("core/store/")
                              and target not in STORE_PUBLIC):
                            found.append(f"{path}:{number}: includes {target}, private to core/store")
    return found


if __name__ == "__main__":
    sys.exit(lint_main.run("layers", violations))
