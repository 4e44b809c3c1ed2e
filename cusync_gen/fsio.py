"""Writing a folder tree onto the user's disk without ever leaving a mix: checks, a lock, an atomic swap.

Everything cusync-gen writes as a folder (a generated project, the fetched CUTLASS headers) goes through
here, so one discipline holds for all of it:

- `check_target(path, option)`: the target must be a folder or nothing; a file, a path under a file,
  the current folder, the home folder or one above them is a UsageError naming the option.
- `lock(target)`: an exclusive `flock` on a sibling `.NAME.lock`, so two writers of one target take
  turns (the second waits a while, then fails with a clear error) instead of interleaving.
- `swap_in(staging, target, keep)`: the new tree is complete in a sibling staging folder; entries of the
  old target that must survive (`keep`: build/, the user's own files) are moved into it, then two renames
  swap it with the old target, which is deleted. Any exception (KeyboardInterrupt included) rolls back
  to the old target; a SIGINT during the renames is held until they are done. A SIGKILLed run leaves
  sibling folders whose names say what they are, and `recover(target)` (run by the next writer, under
  the lock) finishes or undoes that swap, so no user file is ever lost and no leftover stays.

Layering: imports only `errors`; `render` and `cutlass_fetch` use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cusync_gen.errors import CusyncError, ToolError, UsageError

STAGING_TAG = ".cusync-new-"  # .NAME.cusync-new-XXXXXXXX: the new tree being written
ASIDE_TAG = ".cusync-old-"  # .NAME.cusync-old-XXXXXXXX: the old tree, moved aside during the swap
JOURNAL = ".cusync-kept"  # in the staging folder: the entries moved in from the old target, as JSON
LOCK_WAIT_S = 20.0


class Interrupted(CusyncError):
    """Ctrl-C while writing: the target holds either its old or its complete new contents (exit 130)."""

    exit_code = 130


def _is_within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_target(path: Path, option: str) -> Path:
    """The absolute, symlink-resolved folder `path` names, after checking that a tree may go there."""
    path = Path(path)
    for part in (path, *path.parents):
        if part.is_symlink() and not part.exists():
            raise UsageError(f"{option} {path}: {part} is a broken symbolic link",
                             hint=f"remove it or pass another folder for {option}")
        if part.exists() and not part.is_dir():
            what = f"{option} {path}" if part == path else f"{option} {path}: {part}"
            raise UsageError(f"{what} is a file, not a folder",
                             hint=f"pass a folder for {option} (a new one, or one cusync-gen wrote)")
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as err:
        raise UsageError(f"{option} {path}: {err}", hint=f"pass a plain folder for {option}") from err
    protected: list[tuple[str, Path]] = []
    with contextlib.suppress(OSError):
        protected.append(("current", Path.cwd().resolve()))
    with contextlib.suppress(OSError, RuntimeError, KeyError):
        protected.append(("home", Path.home().resolve()))
    for name, folder in protected:
        if _is_within(folder, resolved):
            raise UsageError(f"{option} {path} is {'the' if folder == resolved else 'above the'} {name} folder, "
                             "which cusync-gen would replace as a whole",
                             hint=f"pass a folder of its own for {option}, e.g. {option} ./NAME")
    return resolved


def lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def lock(target: Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold the writer's lock of `target` (the parent folder must exist), waiting up to `wait_s`
    (default LOCK_WAIT_S) for another holder; the lock file is removed on release."""
    path = lock_path(target)
    deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise ToolError(f"another cusync-gen is writing {target} (it holds {path})",
                                hint="wait for it to finish and run this again") from None
            time.sleep(0.05)
            continue
        try:  # the holder before us unlinks the file on release: lock the file that is there now
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def new_staging(target: Path) -> Path:
    """An empty sibling folder of `target` to build the new tree in (created with the usual mode)."""
    staging = target.parent / f".{target.name}{STAGING_TAG}{secrets.token_hex(4)}"
    os.mkdir(staging)
    if target.is_dir():
        os.chmod(staging, target.stat().st_mode & 0o7777)
    return staging


def _leftovers(target: Path, tag: str) -> list[Path]:
    prefix = f".{target.name}{tag}"
    return sorted(p for p in target.parent.iterdir() if p.name.startswith(prefix) and p.is_dir()
                  and not p.is_symlink())


def _read_journal(staging: Path) -> list[str]:
    try:
        entries = json.loads((staging / JOURNAL).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def _move(src_root: Path, dst_root: Path, rel: str) -> None:
    dst = dst_root / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.rename(src_root / rel, dst)


def _move_back(staging: Path, target: Path, entries: list[str]) -> None:
    """Return kept entries from a staging folder to the target (those still in staging, not in target)."""
    for rel in entries:
        if (staging / rel).exists() or (staging / rel).is_symlink():
            if not (target / rel).exists() and not (target / rel).is_symlink():
                _move(staging, target, rel)


def recover(target: Path) -> None:
    """Finish or undo the swap of a writer that was killed; remove its leftover folders.

    Call under `lock(target)`. Staging folders are deleted once the entries their journal names are
    back in the target; if the target is missing (killed between the two renames), the staging
    folder, which is complete by then, becomes the target.
    """
    for staging in _leftovers(target, STAGING_TAG):
        if not target.exists() and not target.is_symlink() and (staging / JOURNAL).is_file():
            os.rename(staging, target)
            continue
        if target.is_dir():
            _move_back(staging, target, _read_journal(staging))
        shutil.rmtree(staging, ignore_errors=True)
    for aside in _leftovers(target, ASIDE_TAG):
        if not target.exists() and not target.is_symlink():
            os.rename(aside, target)  # killed before the new tree arrived: the old one comes back
        else:
            shutil.rmtree(aside, ignore_errors=True)
    if target.is_dir():
        with contextlib.suppress(FileNotFoundError):
            (target / JOURNAL).unlink()


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold a SIGINT until the block ends, then raise it (only the main thread can install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if received:
        raise KeyboardInterrupt


def swap_in(staging: Path, target: Path, keep: list[str]) -> None:
    """Make the complete tree in `staging` the target, carrying over `keep` (paths relative to target).

    Either it all happens or, on any exception, the target is as it was and `staging` is gone.
    """
    aside = target.parent / f".{target.name}{ASIDE_TAG}{secrets.token_hex(4)}"
    with _sigint_held():
        try:
            (staging / JOURNAL).write_text(json.dumps(keep))
            for rel in keep:
                _move(target, staging, rel)
            if target.exists() or target.is_symlink():
                os.rename(target, aside)
            os.rename(staging, target)
        except BaseException:
            _roll_back(staging, target, aside, keep)
            raise
        # Committed: the new tree is in place. What is left is tidying (a failure here costs a leftover
        # that the next writer removes, never a file).
        with contextlib.suppress(OSError):
            (target / JOURNAL).unlink()
        shutil.rmtree(aside, ignore_errors=True)


def _roll_back(staging: Path, target: Path, aside: Path, keep: list[str]) -> None:
    """Undo what of `swap_in` happened, judged by what is on disk (not by which call raised)."""
    if not staging.exists():  # the new tree had arrived
        os.rename(target, staging)
    if aside.exists():
        os.rename(aside, target)
    _move_back(staging, target, list(reversed(keep)))
    shutil.rmtree(staging, ignore_errors=True)


def foreign_entries(root: Path, new_files: set[str], is_ours: Callable[[str, Path], bool],
                    old_files: set[str], keep_whole: frozenset[str] = frozenset({"build"})) -> list[str]:
    """What of the old tree at `root` must survive a swap to a tree of `new_files` (relative paths).

    Walks `root` without following symlinks. A file the new tree writes is replaced; a regular file
    (not a link) of `old_files` that `is_ours(rel, path)` confirms is dropped; everything else is kept, a folder that
    neither tree has files in as a whole (and top-level `keep_whole`, e.g. build/, always). Something
    in the way of a new file (a folder where a file goes, a file or link where a folder goes) is a
    UsageError.
    """
    new_dirs = {str(p) for f in new_files for p in Path(f).parents if str(p) != "."}
    old_dirs = {str(p) for f in old_files for p in Path(f).parents if str(p) != "."}
    keep: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = prefix + entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if rel in new_dirs and not is_dir:
                raise UsageError(f"{root / rel} is in the way: the project needs a folder there",
                                 hint="move it away, then generate again")
            if rel in new_files and is_dir:
                raise UsageError(f"{root / rel} is a folder where the project writes a file",
                                 hint="move it away, then generate again")
            if is_dir and rel not in keep_whole and (rel in new_dirs or rel in old_dirs):
                walk(Path(entry.path), rel + "/")
            elif rel in new_files or (entry.is_file(follow_symlinks=False) and rel in old_files
                                      and is_ours(rel, Path(entry.path))):
                continue
            else:
                keep.append(rel)

    if root.is_dir():
        walk(root, "")
    return keep


def write_error(err: OSError, target: Path, option: str) -> CusyncError:
    """An OSError while writing `target`, as one clean error naming the path (in the target, not in
    the staging folder where it happened)."""
    where = Path(str(err.filename or target))
    for i, part in enumerate(where.parts):
        if part.startswith(f".{target.name}{STAGING_TAG}"):
            where = Path(target, *where.parts[i + 1:])
    if err.errno == errno.ENAMETOOLONG:
        return UsageError(f"{option} {target}: file name too long for the file system: {where}",
                          hint="shorten the folder name, the spec's name or its stage names")
    return ToolError(f"cannot write {where}: {err.strerror or err}",
                     hint=f"check that {option} {target} is writable and the disk is not full")
