"""Virtual environments for scenario tests that drive a real PyPI package
(Triton, TileLang). Made once under $SEALFS_SCENARIO_VENVS (ctest sets it to
<source>/build/scenario-venvs; $SEALFS_TEST_VENV_ROOT or that same folder
otherwise) and reused while the package still imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

INSTALL_TIMEOUT_S = 1500


def venv_root() -> Path:
    root = os.environ.get("SEALFS_SCENARIO_VENVS") or os.environ.get("SEALFS_TEST_VENV_ROOT")
    if root:
        return Path(root)
    return Path(__file__).resolve().parents[2] / "build" / "scenario-venvs"


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _imports(python: Path, module: str) -> bool:
    if not python.exists():
        return False
    r = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, timeout=300)
    return r.returncode == 0


def ensure_venv(name: str, requirements: list[str], import_check: str) -> Path:
    """The python of venv `name` with `requirements` installed; installs when
    `import_check` does not import. Raises RuntimeError with pip's output."""
    venv = venv_root() / name
    python = venv / "bin" / "python"
    if _imports(python, import_check):
        return python
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    r = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                        "--no-input", *requirements], capture_output=True, text=True,
                       timeout=INSTALL_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(requirements)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    if not _imports(python, import_check):
        raise RuntimeError(f"{import_check} does not import after installing {requirements}")
    print(f"[venv] installed {' '.join(requirements)} in {time.monotonic() - start:.0f}s, "
          f"{_dir_size(venv) / 2**20:.0f} MiB on disk", file=sys.stderr)
    return python
