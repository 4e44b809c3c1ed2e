"""Fetch CUTLASS's C++ headers from the pinned PyPI wheel, without importing its Python package.

The `nvidia-cutlass` wheel carries the full CUTLASS source tree under `cutlass_library/source/`. We only
need two header trees from it:

    cutlass_library/source/include/**             -> <dest>/include/
    cutlass_library/source/tools/util/include/**  -> <dest>/tools/util/include/

`<dest>` (default `<repo>/third_party/cutlass`, git-ignored) then works as `CUTLASS_DIR`. The tree is
extracted into a sibling folder and moved into place at the end, so an interrupted fetch never leaves a
half-written `<dest>`; `<dest>/VERSION` records the pin and makes a second fetch a no-op.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from cusync_gen.errors import ToolError
from cusync_gen.paths import default_cutlass_dir

CUTLASS_PIN = "nvidia-cutlass==4.2.0.0"

# (prefix inside the wheel, folder under <dest>)
_TREES: tuple[tuple[str, str], ...] = (
    ("cutlass_library/source/include/", "include"),
    ("cutlass_library/source/tools/util/include/", "tools/util/include"),
)
_DIST_INFO = "nvidia_cutlass-" + CUTLASS_PIN.split("==")[1] + ".dist-info/"
_LICENSE_SUFFIX = ".dist-info/licenses/LICENSE.txt"
_HINT = (
    "set CUTLASS_DIR (or pass --cutlass-dir) to an existing CUTLASS 4.2 checkout, "
    "or download the wheel elsewhere and pass it with `cusync-gen fetch-cutlass --wheel PATH`"
)


def is_fetched(dest: Path) -> bool:
    """True when `dest` holds the pinned headers (VERSION matches and cutlass.h exists)."""
    version = dest / "VERSION"
    return (
        version.is_file()
        and version.read_text().strip() == CUTLASS_PIN
        and (dest / "include" / "cutlass" / "cutlass.h").is_file()
    )


def download_wheel(into: Path) -> Path:
    """`pip download` the pinned wheel into `into`; returns the wheel's path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               CUTLASS_PIN, "-d", str(into)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True)
    except OSError as err:
        raise ToolError(f"cannot run pip to download {CUTLASS_PIN}: {err}", hint=_HINT, command=command) from err
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise ToolError(f"pip could not download {CUTLASS_PIN} (exit {proc.returncode})",
                        hint=_HINT, command=command, stderr_tail=tail)
    wheels = sorted(into.glob("nvidia_cutlass-*.whl"))
    if not wheels:
        raise ToolError(f"pip reported success but left no nvidia_cutlass wheel in {into}",
                        hint=_HINT, command=command, stderr_tail=proc.stdout[-2000:])
    return wheels[0]


def _member_target(name: str, root: Path) -> Path | None:
    """Where wheel member `name` goes under `root`, or None if it is not one of the header trees."""
    for prefix, folder in _TREES:
        if name.startswith(prefix) and not name.endswith("/"):
            rel = PurePosixPath(name[len(prefix):])
            if rel.is_absolute() or ".." in rel.parts:
                raise ToolError(f"refusing to extract suspicious wheel member {name!r}", hint=_HINT)
            return root.joinpath(folder, *rel.parts)
    if name.endswith(_LICENSE_SUFFIX):
        return root / "LICENSE.txt"
    return None


def extract_headers(wheel: Path, dest: Path) -> int:
    """Extract the header trees of `wheel` into `dest` (replacing it); returns the number of files."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise ToolError(f"cannot open {wheel} as a wheel: {err}", hint=_HINT) from err
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        count = 0
        with archive:
            if not any(name.startswith(_DIST_INFO) for name in archive.namelist()):
                raise ToolError(f"{wheel.name} is not the {CUTLASS_PIN} wheel (no {_DIST_INFO} inside)",
                                hint=_HINT)
            for info in archive.infolist():
                target = _member_target(info.filename, staging)
                if target is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                count += 1
        if not (staging / "include" / "cutlass" / "cutlass.h").is_file():
            raise ToolError(f"{wheel.name} has no cutlass_library/source/include/cutlass/cutlass.h",
                            hint=f"use the {CUTLASS_PIN} wheel; " + _HINT)
        (staging / "VERSION").write_text(CUTLASS_PIN + "\n")
        _replace_dir(staging, dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return count


def _replace_dir(new: Path, dest: Path) -> None:
    """Move `new` to `dest`; an existing `dest` is moved aside first and removed after."""
    old = None
    if dest.exists() or dest.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        dest.rename(old / dest.name)
    new.rename(dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def fetch_cutlass(dest: Path | None = None, wheel: Path | None = None, force: bool = False) -> Path:
    """Make `dest` (default `paths.default_cutlass_dir()`) hold the pinned CUTLASS headers; returns it.

    A no-op when they are already there (unless `force`). `wheel` uses an already-downloaded
    nvidia-cutlass wheel instead of running `pip download`.
    """
    dest = (dest or default_cutlass_dir()).resolve()
    if not force and is_fetched(dest):
        return dest
    if wheel is not None:
        wheel = Path(wheel)
        if not wheel.is_file():
            raise ToolError(f"wheel not found: {wheel}", hint=_HINT)
        extract_headers(wheel, dest)
        return dest
    with tempfile.TemporaryDirectory(prefix="cusync-gen-wheel-") as tmp:
        extract_headers(download_wheel(Path(tmp)), dest)
    return dest
