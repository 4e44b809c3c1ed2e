"""Writing onto the user's disk without ever leaving a mix or losing a file: checks, a lock, a swap.

Everything cusync-gen writes goes through here, so one discipline holds for all of it:

- `check_target(path, option)`: a folder target must be a folder or nothing; a file, a path under a
  file, the current folder, the home folder or one above them is a UsageError naming the option.
- `lock(target)`: an exclusive `flock` on a sibling `.NAME.lock`, opened without following links, so
  two writers of one target take turns (the second waits a while, then fails with a clear error).
- `swap_in(staging, target, keep, replaced)`: the new tree is complete in a sibling staging folder;
  the entries of the old target listed in `keep` (build/, the user's own files) are moved into it,
  then two renames swap it with the old target. The old tree, now aside, is then *settled*: a file
  is deleted only if it is still exactly the file `replaced` listed (same inode, size and mtime, seen
  before the swap), everything else (a file that appeared or changed while we wrote) is moved into
  the new target, and what cannot be moved there without overwriting is kept in a visible sibling
  folder `NAME.cusync-kept-XXXXXXXX` that the caller reports. Nothing is ever deleted as a tree.
- Any exception before the second rename (KeyboardInterrupt included) rolls back to the old target; a
  SIGINT during the renames is held until they are done. A SIGKILLed run leaves sibling folders whose
  names say what they are; `recover(target, ours_in)` (run by the next writer, under the lock)
  settles them the same way. It trusts a leftover only if it is a real folder (not a link) owned by
  this user, and it moves entries only through folders it opened without following links.
- `write_file(dest, data, option, overwrite)`: one file (a spec, results, a plot), written to a
  temporary sibling and renamed or linked into place, so a link at `dest` is replaced, never written
  through, and `overwrite=False` can never clobber a file that appeared meanwhile.
- `create_new(path)`: a new file in a folder of ours (O_CREAT | O_EXCL | O_NOFOLLOW).

Layering: imports only `errors`; `render`, `cutlass_fetch` and the CLI use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import secrets
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cusync_gen.errors import CusyncError, ToolError, UsageError

STAGING_TAG = ".cusync-new-"  # .NAME.cusync-new-XXXXXXXX: the new tree being written
ASIDE_TAG = ".cusync-old-"  # .NAME.cusync-old-XXXXXXXX: the old tree, moved aside during the swap
KEPT_TAG = ".cusync-kept-"  # NAME.cusync-kept-XXXXXXXX (visible): entries that could not be placed
TEMP_TAG = ".cusync-tmp-"  # .NAME.cusync-tmp-XXXXXXXX: a single file being written
JOURNAL = ".cusync-kept"  # in the staging folder: marks it complete (the swap has begun)
LOCK_WAIT_S = 20.0
SETTLE_PASSES = 3  # how often settling re-reads a folder that something keeps writing into

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    (default LOCK_WAIT_S) for another holder; the lock file is removed on release. A lock path that
    is a link, or not a regular file of this user, is refused: we never create a file through it."""
    path = lock_path(target)
    deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
                raise UsageError(f"{path} is in the way of cusync-gen's lock file (it is a link, a folder or not "
                                 "a regular file)", hint=f"remove {path}, then run this again") from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            raise UsageError(f"{path} is in the way of cusync-gen's lock file (not a regular file of this user)",
                             hint=f"remove {path}, then run this again")
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
            same = os.stat(path, follow_symlinks=False).st_ino == info.st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_ino == info.st_ino:
                os.unlink(path)
        os.close(fd)


def new_staging(target: Path) -> Path:
    """An empty sibling folder of `target` to build the new tree in (created with the usual mode)."""
    staging = target.parent / f".{target.name}{STAGING_TAG}{secrets.token_hex(4)}"
    os.mkdir(staging)
    if target.is_dir():
        os.chmod(staging, target.stat().st_mode & 0o7777)
    return staging


@contextlib.contextmanager
def create_new(path: Path) -> Iterator[BinaryIO]:
    """A new file at `path` (its folders are created), never through a link and never over a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as out:
        yield out


def write_new(path: Path, data: bytes) -> None:
    """`create_new` with these bytes."""
    with create_new(path) as out:
        out.write(data)


def write_file(dest: Path, data: bytes, option: str, overwrite: bool) -> None:
    """Put a file with `data` at `dest` (creating its folder) atomically: readers see the old file or
    the new one. A link at `dest` is replaced, never written through. Without `overwrite`, anything at
    `dest` (a dangling link too) is a UsageError, checked again at the moment the file appears."""
    dest = Path(dest)
    try:
        info: os.stat_result | None = os.lstat(dest)
    except FileNotFoundError:
        info = None
    if info is not None:
        kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a symbolic link" if stat.S_ISLNK(info.st_mode)
                else "a file" if stat.S_ISREG(info.st_mode) else "not a regular file")
        if not overwrite or kind in ("a folder", "not a regular file"):
            hint = (f"pass a file name for {option}" if kind == "a folder" else
                    f"pass --force to replace it, or {option} another file" if kind != "not a regular file"
                    else f"pass another file for {option}")
            raise UsageError(f"{option} {dest} already exists ({kind})", hint=hint)
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = dest.parent / f".{dest.name}{TEMP_TAG}{secrets.token_hex(4)}"
    try:
        write_new(temp, data)
        if overwrite:
            os.replace(temp, dest)
        else:
            try:
                os.link(temp, dest, follow_symlinks=False)  # fails if anything appeared at dest meanwhile
            except FileExistsError:
                raise UsageError(f"{option} {dest} already exists",
                                 hint=f"pass --force to replace it, or {option} another file") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


# --------------------------------------------------------------------------------------------------
# Moving entries between trees without following links

_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_NOREPLACE = 1


def _rename_noreplace(name: str, src_fd: int, dst_fd: int) -> bool:
    """Move entry `name` of folder `src_fd` into folder `dst_fd`; False if `dst_fd` has one already."""
    renameat2 = getattr(_libc, "renameat2", None)
    if renameat2 is not None:
        raw = os.fsencode(name)
        if renameat2(src_fd, raw, dst_fd, raw, _RENAME_NOREPLACE) == 0:
            return True
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            return False
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), name)
    if _lexists_at(name, dst_fd):  # no renameat2 here: check, then rename (a narrow window)
        return False
    os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
    return True


def _lexists_at(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


@contextlib.contextmanager
def _open_dir(root: Path | int, parts: tuple[str, ...] = (), create: bool = False) -> Iterator[int]:
    """A descriptor of folder `root`/`parts`, reached without following a link at any step (ELOOP or
    ENOTDIR otherwise); missing folders are created with `create`."""
    fd = os.open(root, _DIR_FLAGS) if not isinstance(root, int) else os.dup(root)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _move(src_root: Path, dst_root: Path, rel: str) -> None:
    """Move entry `rel` from one tree to the other (folders on the way created in `dst_root`), between
    trees that only this writer changes (the target and its staging folder, under the lock)."""
    *parents, name = rel.split("/")
    with _open_dir(src_root, tuple(parents)) as src, _open_dir(dst_root, tuple(parents), create=True) as dst:
        if _lexists_at(name, dst):
            raise FileExistsError(errno.EEXIST, "in the way", str(dst_root / rel))
        os.rename(name, name, src_dir_fd=src, dst_dir_fd=dst)


def _move_back(staging: Path, target: Path, entries: list[str]) -> list[str]:
    """Return kept entries from a staging folder to the target; the ones that are still in staging
    because something now stands at their place in the target."""
    stuck = []
    for rel in entries:
        if not os.path.lexists(staging / rel):
            continue  # never moved in (or already back)
        try:
            _move(staging, target, rel)
        except FileNotFoundError:
            pass  # never moved in (or already back)
        except FileExistsError:
            stuck.append(rel)
    return stuck


# --------------------------------------------------------------------------------------------------
# Settling an old tree into the new one

@dataclass(frozen=True)
class Seen:
    """A regular file as it was when we decided to replace it: deleted later only if it still is."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @staticmethod
    def of(info: os.stat_result) -> Seen:
        return Seen(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def seen(path: Path) -> Seen | None:
    """`Seen` of a regular file at `path` (not following a link), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return Seen.of(info) if stat.S_ISREG(info.st_mode) else None


def inventory(root: Path, skip: frozenset[str] = frozenset()) -> dict[str, Seen]:
    """Every regular file under `root` (not following links), by relative path, but for the entries
    (files or whole folders) named in `skip`."""
    found: dict[str, Seen] = {}

    def walk(fd: int, prefix: str) -> None:
        with os.scandir(fd) as it:
            entries = list(it)
        for entry in entries:
            if prefix + entry.name in skip:
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                with _open_dir(fd, (entry.name,)) as sub:
                    walk(sub, prefix + entry.name + "/")
            elif stat.S_ISREG(info.st_mode):
                found[prefix + entry.name] = Seen.of(info)

    if root.is_dir() and not root.is_symlink():
        with _open_dir(root) as fd:
            walk(fd, "")
    return found


Deletable = Callable[[str, os.stat_result, int], bool]  # (relative path, lstat, folder fd): ours to delete?


def _settle_dir(src: int, dst: int | None, dst_root: Path, prefix: str, deletable: Deletable,
                left: list[str]) -> None:
    """Empty folder `src` into `dst` (None: not there yet, made on demand under `dst_root`): delete what
    `deletable` confirms, move the rest, remove emptied folders; what stays is listed in `left`."""
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        rel = prefix + entry.name
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            in_dst = dst is not None and _is_dir_at(entry.name, dst)
            if not in_dst and not _holds_deletable(src, entry.name, rel + "/", deletable):
                if not _place(entry.name, src, dst, dst_root, prefix):  # a folder of the user's: as a whole
                    left.append(rel + "/")
                continue
            with _open_dir(src, (entry.name,)) as sub:
                if in_dst:
                    with _open_dir(dst, (entry.name,)) as sub_dst:  # type: ignore[arg-type]
                        _settle_dir(sub, sub_dst, dst_root, rel + "/", deletable, left)
                else:
                    _settle_dir(sub, None, dst_root, rel + "/", deletable, left)
            try:
                os.rmdir(entry.name, dir_fd=src)
            except OSError:
                left.append(rel + "/")  # something stayed, or appeared meanwhile: the next pass sees it
        elif stat.S_ISREG(info.st_mode) and deletable(rel, info, src):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=src)
        elif not _place(entry.name, src, dst, dst_root, prefix):
            left.append(rel)


def _holds_deletable(parent: int, name: str, prefix: str, deletable: Deletable) -> bool:
    """Whether folder `name` of `parent` holds, at any depth, a file that `deletable` confirms."""
    with _open_dir(parent, (name,)) as fd, os.scandir(fd) as it:
        for entry in it:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and deletable(prefix + entry.name, info, fd):
                return True
            if stat.S_ISDIR(info.st_mode) and _holds_deletable(fd, entry.name, prefix + entry.name + "/", deletable):
                return True
    return False


def _is_dir_at(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _place(name: str, src: int, dst: int | None, dst_root: Path, prefix: str) -> bool:
    """Move entry `name` of `src` to the same place under the new tree, never over anything there."""
    try:
        if dst is not None:
            return _rename_noreplace(name, src, dst)
        parts = tuple(p for p in prefix.split("/") if p)
        with _open_dir(dst_root, parts, create=True) as made:
            return _rename_noreplace(name, src, made)
    except OSError:
        return False


def settle(old_root: Path, target: Path, deletable: Deletable) -> Path | None:
    """Empty the old tree `old_root` into `target`: delete what `deletable` confirms, move the rest over
    (never replacing anything), remove its emptied folders. Re-read up to SETTLE_PASSES times if
    something keeps appearing. Returns the visible folder that keeps what could not be placed, or None."""
    left: list[str] = []
    for _ in range(SETTLE_PASSES):
        left = []
        try:
            with _open_dir(old_root) as src, _open_dir(target) as dst:
                _settle_dir(src, dst, target, "", deletable, left)
        except FileNotFoundError:
            return None
        except OSError:
            break  # the target is not a folder we can reach: keep everything, below
        try:
            os.rmdir(old_root)
            return None
        except FileNotFoundError:
            return None
        except OSError:
            continue
    kept = target.parent / f"{target.name}{KEPT_TAG}{secrets.token_hex(4)}"
    try:
        os.rename(old_root, kept)
    except OSError:
        return old_root
    return kept


# --------------------------------------------------------------------------------------------------
# Leftovers of a killed writer

def _trusted(path: Path) -> bool:
    """A leftover we may act on: a real folder (not a link) owned by this user."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _leftovers(target: Path, tag: str) -> list[Path]:
    prefix = f".{target.name}{tag}"
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    return sorted(target.parent / n for n in names if n.startswith(prefix) and _trusted(target.parent / n))


OursIn = Callable[[Path], Deletable]  # a leftover folder -> which of its files are ours to delete


def recover(target: Path, ours_in: OursIn) -> list[Path]:
    """Finish or undo the swap of a writer that was killed; settle its leftover folders.

    Call under `lock(target)`. If the target is missing (killed between the two renames) the staging
    folder, complete by then, becomes the target (else the old tree comes back). Every other leftover
    is settled into the target (`settle`): `ours_in(folder)` says which of its files are ours, by that
    folder's own record. Returns the folders kept for what could not be placed.
    """
    kept: list[Path] = []
    missing = not os.path.lexists(target)
    for staging in _leftovers(target, STAGING_TAG):
        if missing and _is_file(staging / JOURNAL):
            os.rename(staging, target)
            missing = False
    for aside in _leftovers(target, ASIDE_TAG):
        if missing:
            os.rename(aside, target)  # killed before the new tree arrived: the old one comes back
            missing = False
    if missing or not _trusted(target):
        return kept
    for leftover in _leftovers(target, STAGING_TAG) + _leftovers(target, ASIDE_TAG):
        if leftover.name.startswith(f".{target.name}{STAGING_TAG}") and not _is_file(leftover / JOURNAL):
            _remove_ours(leftover)  # killed while writing it: the swap never began, nothing else is in it
            continue
        ours = ours_in(leftover)
        folder = settle(leftover, target, lambda rel, info, fd, ours=ours: rel == JOURNAL or ours(rel, info, fd))
        if folder is not None:
            kept.append(folder)
    with contextlib.suppress(OSError):
        if _is_file(target / JOURNAL):
            os.unlink(target / JOURNAL)
    return kept


def _is_file(path: Path) -> bool:
    return seen(path) is not None


# --------------------------------------------------------------------------------------------------
# The swap

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


def replaced_by(seen_before: dict[str, Seen]) -> Deletable:
    """Deletable: a file is ours to delete only if it is still the very file seen before the swap."""
    def deletable(rel: str, info: os.stat_result, _fd: int) -> bool:
        return seen_before.get(rel) == Seen.of(info)
    return deletable


def swap_in(staging: Path, target: Path, keep: list[str], replaced: dict[str, Seen]) -> Path | None:
    """Make the complete tree in `staging` the target, carrying over `keep` (paths relative to target)
    and, afterwards, anything else of the old tree that is not a file of `replaced` as it was seen.

    Either the swap happens or, on any exception before it, the target is as it was and `staging` is
    gone. Returns the visible folder that keeps entries that could not be placed (see `settle`), or None.
    """
    aside = target.parent / f".{target.name}{ASIDE_TAG}{secrets.token_hex(4)}"
    with _sigint_held():
        try:
            write_new(staging / JOURNAL, b"")
            for rel in keep:
                _move(target, staging, rel)
            if os.path.lexists(target):
                os.rename(target, aside)
            os.rename(staging, target)
        except BaseException:
            _roll_back(staging, target, aside, keep)
            raise
        # Committed: the new tree is in place. What is left never deletes a file that is not exactly
        # one we meant to replace; a failure here leaves a leftover that the next writer settles.
        with contextlib.suppress(OSError):
            os.unlink(target / JOURNAL)
        if not os.path.lexists(aside):
            return None
        try:
            return settle(aside, target, replaced_by(replaced))
        except OSError:
            return aside


def _roll_back(staging: Path, target: Path, aside: Path, keep: list[str]) -> None:
    """Undo what of `swap_in` happened, judged by what is on disk (not by which call raised)."""
    if not os.path.lexists(staging):  # the new tree had arrived
        os.rename(target, staging)
    if os.path.lexists(aside):
        os.rename(aside, target)
    if _move_back(staging, target, list(reversed(keep))):  # a user entry could not go back: never delete it
        os.rename(staging, target.parent / f"{target.name}{KEPT_TAG}{secrets.token_hex(4)}")
        return
    _remove_ours(staging)


def _remove_ours(staging: Path) -> None:
    """Delete a staging folder of this run (everything in it was written by us, or moved back out)."""
    with contextlib.suppress(OSError):
        with _open_dir(staging) as fd:
            _rmtree_fd(fd)
        os.rmdir(staging)


def _rmtree_fd(fd: int) -> None:
    with os.scandir(fd) as it:
        entries = list(it)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            with _open_dir(fd, (entry.name,)) as sub:
                _rmtree_fd(sub)
            os.rmdir(entry.name, dir_fd=fd)
        else:
            os.unlink(entry.name, dir_fd=fd)


def discard_staging(staging: Path) -> None:
    """Remove a staging folder of this run that never got swapped in."""
    _remove_ours(staging)


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
