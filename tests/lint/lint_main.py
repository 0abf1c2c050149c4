"""The command line the source checks share: ROOT (default: the repository
root), each violation on a line of its own, a summary, exit 1 if any."""

from __future__ import annotations

import os
import sys
from typing import Callable


def run(name: str, violations: Callable[[str], list[str]]) -> int:
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    found = violations(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default))
    for v in found:
        print(v)
    print(f"{name}: {len(found)} violation(s)" if found else f"{name}: clean")
    return 1 if found else 0
