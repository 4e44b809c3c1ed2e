"""Fetch CUTLASS's C++ headers from the pinned PyPI wheel, without importing its Python package.

The `nvidia-cutlass` wheel carries the full CUTLASS source tree under `cutlass_library/source/`. We only
need three trees from it:

    cutlass_library/source/include/**                  -> <dest>/include/
    cutlass_library/source/tools/util/include/**       -> <dest>/tools/util/include/
    cutlass_library/source/examples/88_hopper_fmha/**  -> <dest>/examples/88_hopper_fmha/

The third is CUTLASS's Hopper fused attention (collective/, kernel/, device/), which the sm90 attention
stage includes from `CUTLASS_DIR` and derives from.

`<dest>` (default `<repo>/third_party/cutlass`, git-ignored) then works as `CUTLASS_DIR`. The wheel must
have the sha256 recorded here for the pin; the tree is extracted into a sibling folder and swapped in
with renames under a lock (`fsio`), so an interrupted fetch never leaves a half-written `<dest>`.
`<dest>/VERSION` records the pin and makes a second fetch a no-op; it is also how we know `<dest>` is
ours: an existing `<dest>` without it is replaced only with `force`, and a file never.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from cusync_gen import fsio, userfile
from cusync_gen.errors import ToolError, UsageError
from cusync_gen.paths import default_cutlass_dir

CUTLASS_PIN = "nvidia-cutlass==4.2.0.0"
# sha256 of every file PyPI has for the pin: only nvidia_cutlass-4.2.0.0-py3-none-any.whl.
WHEEL_SHA256 = frozenset({"f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6"})
_VERSION_PREFIX = "nvidia-cutlass=="
FETCH_LOCK_WAIT_S = 120.0  # a second fetch waits this long for the first (which may be downloading)

# (prefix inside the wheel, folder under <dest>)
_TREES: tuple[tuple[str, str], ...] = (
    ("cutlass_library/source/include/", "include"),
    ("cutlass_library/source/tools/util/include/", "tools/util/include"),
    ("cutlass_library/source/examples/88_hopper_fmha/", "examples/88_hopper_fmha"),
)
# A file of each tree that a complete fetch has (a tree fetched before the fmha folder was added lacks it,
# so the next fetch extracts again).
_REQUIRED = ("include/cutlass/cutlass.h", "examples/88_hopper_fmha/collective/fmha_fusion.hpp")
_DIST_INFO = "nvidia_cutlass-" + CUTLASS_PIN.split("==")[1] + ".dist-info/"
_LICENSE_SUFFIX = ".dist-info/licenses/LICENSE.txt"
_HINT = (
    "set CUTLASS_DIR (or pass --cutlass-dir) to an existing CUTLASS 4.2 checkout, "
    "or download the wheel elsewhere and pass it with `cusync-gen fetch-cutlass --wheel PATH`"
)


def is_fetched(dest: Path) -> bool:
    """True when `dest` holds the pinned trees (VERSION matches and each tree's required file exists)."""
    return (_version(dest / "VERSION", True).strip() == CUTLASS_PIN
            and all((dest / rel).is_file() for rel in _REQUIRED))


def fetched_by_us(dest: Path) -> bool:
    """`dest` is a tree fetch-cutlass wrote (any pin): its VERSION names an nvidia-cutlass release."""
    return _version(dest / "VERSION", False).startswith(_VERSION_PREFIX)


def _version(path: Path, follow_symlinks: bool) -> str:
    """The start of a VERSION file ("" when it is missing or not a regular file: a FIFO is never opened)."""
    try:
        return userfile.read_head(path, "VERSION file", 256, follow_symlinks=follow_symlinks).decode(errors="replace")
    except userfile.UserFileError:
        return ""


def check_wheel(wheel: Path) -> None:
    """The wheel's sha256 must be one recorded for the pin (a ToolError naming both otherwise)."""
    digest = hashlib.sha256()
    try:
        with userfile.open_regular(wheel, "wheel") as f:  # a FIFO or device is refused, never blocks
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except userfile.UserFileError as err:
        raise ToolError(err.message, hint=_HINT) from None
    except OSError as err:
        raise ToolError(f"cannot read the wheel {wheel}: {err.strerror or err}", hint=_HINT) from err
    if digest.hexdigest() not in WHEEL_SHA256:
        raise ToolError(f"{wheel} is not the {CUTLASS_PIN} wheel from PyPI: its sha256 is {digest.hexdigest()}, "
                        f"expected {' or '.join(sorted(WHEEL_SHA256))}",
                        hint="download it again (python3 -m pip download --no-deps --only-binary=:all: "
                             f"{CUTLASS_PIN}); " + _HINT)


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
    """Extract the header trees of `wheel` into `dest` (replacing it); returns the number of files.

    The caller holds `fsio.lock(dest)` and has checked that `dest` may be replaced.
    """
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise ToolError(f"cannot open {wheel} as a wheel: {err}", hint=_HINT) from err
    replaced = fsio.inventory(dest)  # the old tree as it is now: a file that appears later is carried over
    staging = fsio.new_staging(dest)
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
                with archive.open(info) as src, fsio.create_new(target) as out:
                    shutil.copyfileobj(src, out)
                count += 1
        for rel in _REQUIRED:
            if not (staging / rel).is_file():
                member = next(prefix + rel[len(folder) + 1:] for prefix, folder in _TREES if rel.startswith(folder + "/"))
                raise ToolError(f"{wheel.name} has no {member}",
                                hint=f"use the {CUTLASS_PIN} wheel; " + _HINT)
        fsio.write_new(staging / "VERSION", (CUTLASS_PIN + "\n").encode())
    except BaseException:
        fsio.discard_staging(staging)
        raise
    fsio.swap_in(staging, dest, keep=[], replaced=replaced)
    return count


def _ours_in(folder: Path) -> fsio.Deletable:
    """For a leftover folder of a killed fetch: a tree we extracted (its VERSION names the pin) is ours
    as a whole; anything else is kept."""
    ours = fetched_by_us(folder)
    return lambda rel, info, fd: ours


def _check_dest(dest: Path, force: bool) -> None:
    """`dest` may be (re)filled: missing, an empty folder, a tree we fetched, or any folder with `force`."""
    if not dest.exists() or fetched_by_us(dest) or not any(dest.iterdir()):
        return
    if not force:
        raise UsageError(f"--dest {dest} exists and is not a CUTLASS tree fetched by cusync-gen (no VERSION "
                         f"naming {_VERSION_PREFIX}...)",
                         hint="pass a new or empty folder, or --force to replace that folder and everything in it")


def fetch_cutlass(dest: Path | None = None, wheel: Path | None = None, force: bool = False,
                  lock_wait_s: float = FETCH_LOCK_WAIT_S) -> Path:
    """Make `dest` (default `paths.default_cutlass_dir()`) hold the pinned CUTLASS headers; returns it.

    A no-op when they are already there (unless `force`). `wheel` uses an already-downloaded
    nvidia-cutlass wheel instead of running `pip download`; either must have the pinned sha256.
    An existing `dest` that we did not fetch is replaced only with `force`; a file is never replaced.
    """
    shown = Path(dest or default_cutlass_dir())
    try:
        dest = fsio.check_target(shown, "--dest")
        if not force and is_fetched(dest):
            return dest
        _check_dest(dest, force)
        if wheel is not None and not Path(wheel).is_file():
            raise ToolError(f"wheel not found: {wheel}", hint=_HINT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with fsio.lock(dest, lock_wait_s):
            fsio.recover(dest, _ours_in)
            if not force and is_fetched(dest):  # another fetch finished while we waited
                return dest
            _check_dest(dest, force)
            if wheel is not None:
                check_wheel(Path(wheel))
                extract_headers(Path(wheel), dest)
                return dest
            with tempfile.TemporaryDirectory(prefix="cusync-gen-wheel-") as tmp:
                downloaded = download_wheel(Path(tmp))
                check_wheel(downloaded)
                extract_headers(downloaded, dest)
    except KeyboardInterrupt:
        now = "the complete pinned headers" if is_fetched(Path(os.path.abspath(shown))) else "what it held before"
        raise fsio.Interrupted(f"interrupted: --dest {shown} holds {now}", hint="run the same command again") from None
    except OSError as err:
        raise fsio.write_error(err, shown, "--dest") from err
    return dest
