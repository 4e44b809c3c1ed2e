"""Reading a file we did not write (a spec, a manifest, a trace, a file found in a target folder).

Every such read goes through here, so that no file can hang or crash a command:

- it opens with O_NONBLOCK (a FIFO with no writer opens at once instead of blocking) and O_CLOEXEC, then
  `fstat`s what it opened and refuses anything but a regular file (FIFO, socket, device, folder), naming it;
  with `follow_symlinks=False` (paths found on disk) a symbolic link is refused too (O_NOFOLLOW);
- it caps the size: the file's size before reading, and the bytes read (a file may grow, /proc reports 0);
- text must be UTF-8; JSON nesting is measured on the text before `json.loads` could hit RecursionError;
- every failure (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) is a `UserFileError`:
  one line naming the file and what is wrong, and a hint.

It imports nothing of cusync_gen but `errors`, so every layer (the spec package included) may use it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from cusync_gen.errors import UsageError

#: A manifest.json we read (ours are a few KiB; a target may hold anything).
MAX_MANIFEST_BYTES = 4 << 20
MAX_MANIFEST_DEPTH = 32  # ours nest 4 levels

_READ_CHUNK = 1 << 20
_REGULAR_HINT = "pass the path of a regular file (not a pipe, socket, device or folder)"


class UserFileError(UsageError):
    """A file we did not write cannot be read or is not what it should be. `reason` says which:
    "missing", "bad_path" (too long, a NUL), "directory", "not_regular", "symlink", "unreadable", "too_large",
    "not_utf8", "too_deep", "invalid_json"."""

    def __init__(self, message: str, hint: str, path: str, reason: str) -> None:
        super().__init__(message, hint)
        self.path = path
        self.reason = reason


def size_text(n: int) -> str:
    """1048576 -> "1 MiB", 4096 -> "4 KiB", 1000 -> "1000 bytes"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _open_error(err: OSError, path: Path, what: str, follow_symlinks: bool) -> UserFileError:
    shown = str(path)
    if err.errno == errno.ENOENT:
        return UserFileError(f"{what} {shown} not found", "check the path (relative to the current directory)",
                             shown, "missing")
    if err.errno == errno.EISDIR:
        return UserFileError(f"{what} {shown} is a directory, not a file", _REGULAR_HINT, shown, "directory")
    if err.errno == errno.ELOOP and not follow_symlinks:
        return UserFileError(f"{what} {shown} is a symbolic link, which is not followed here",
                             "replace the link by the file itself", shown, "symlink")
    if err.errno == errno.ENXIO:  # open() of a socket
        return UserFileError(f"{what} {shown} is a socket or a device without a reader, not a regular file",
                             _REGULAR_HINT, shown, "not_regular")
    if err.errno == errno.ENAMETOOLONG:
        return UserFileError(f"{what} {shown[:60]}...: file name too long for the file system", "use a shorter path",
                             shown, "bad_path")
    return UserFileError(f"cannot read {what} {shown}: {err.strerror or err}", "check the file and its permissions",
                         shown, "unreadable")


def open_regular(path: Path | str, what: str, *, follow_symlinks: bool = True) -> BinaryIO:
    """`path` opened for reading (binary, unbuffered), once `fstat` says it is a regular file; a
    UserFileError otherwise. Never blocks on a FIFO."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise _open_error(err, path, what, follow_symlinks) from None
    except ValueError:  # a NUL in the path
        raise UserFileError(f"{what} {str(path)!r}: the path contains a NUL character", "check the path",
                            str(path), "bad_path") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UserFileError(f"{what} {path} is a directory, not a file", _REGULAR_HINT, str(path), "directory")
        if not stat.S_ISREG(mode):
            raise UserFileError(f"{what} {path} is {_kind(mode)}, not a regular file", _REGULAR_HINT, str(path),
                                "not_regular")
        os.set_blocking(fd, True)  # a regular file: reads never block anyway, but say what we mean
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _read(path: Path | str, what: str, max_bytes: int, follow_symlinks: bool, head: bool) -> bytes:
    path = Path(path)
    with open_regular(path, what, follow_symlinks=follow_symlinks) as file:
        try:
            size = os.fstat(file.fileno()).st_size
            if size > max_bytes and not head:
                raise _too_large(path, what, max_bytes)
            chunks: list[bytes] = []
            left = max_bytes if head else max_bytes + 1
            while left > 0:
                chunk = file.read(min(left, _READ_CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as err:
            raise _open_error(err, path, what, follow_symlinks) from None
        except MemoryError:
            raise _too_large(path, what, max_bytes) from None
    data = b"".join(chunks)
    if len(data) > max_bytes:  # grew while we read, or a size fstat does not report
        raise _too_large(path, what, max_bytes)
    return data


def _too_large(path: Path, what: str, max_bytes: int) -> UserFileError:
    return UserFileError(f"{what} {path} is larger than {size_text(max_bytes)}, the limit for a {what}",
                         f"check that this is the {what} (a {what} is much smaller)", str(path), "too_large")


def read_bytes(path: Path | str, what: str, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The whole file, at most `max_bytes` (else a UserFileError, raised before reading when its size says so).
    `what` names the file in errors ("spec file", "manifest", "trace")."""
    return _read(path, what, max_bytes, follow_symlinks, head=False)


def read_head(path: Path | str, what: str, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The first `max_bytes` bytes of the file (fewer when it is shorter): to compare or sniff, never an error
    for size."""
    return _read(path, what, max_bytes, follow_symlinks, head=True)


def decode(data: bytes, shown: str, what: str) -> str:
    """UTF-8 text, or a UserFileError naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise UserFileError(f"{what} {shown} is not UTF-8 text: byte 0x{data[err.start]:02x} at line {line}, "
                            f"column {column}", f"save the {what} as UTF-8", shown, "not_utf8") from None


def read_text(path: Path | str, what: str, max_bytes: int, *, follow_symlinks: bool = True) -> str:
    """The file as UTF-8 text (newlines as they are), within `max_bytes`."""
    return decode(read_bytes(path, what, max_bytes, follow_symlinks=follow_symlinks), str(path), what)


# JSON strings (escapes included) and the brackets outside them
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def json_too_deep(text: str, max_depth: int) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `max_depth` (brackets inside strings do
    not count; an unterminated string's brackets do, which only makes invalid JSON look deeper). Linear
    time, no recursion: call it before json.loads, which recurses once per level."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth = max(0, depth - 1)
    return False


def parse_json(text: str, source: str, max_depth: int, hint: str = "fix the JSON syntax at that line") -> Any:
    """`json.loads(text)`, refusing nesting deeper than `max_depth` first; `source` names it in errors
    ("path" or "path:line")."""
    if json_too_deep(text, max_depth):
        raise UserFileError(f"{source}: JSON nested deeper than {max_depth} levels",
                            f"{hint}; check the brackets", source, "too_deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserFileError(f"{source}: invalid JSON: {err.msg} (line {err.lineno}, column {err.colno})",
                            hint, source, "invalid_json") from None
    except RecursionError:  # not reached within max_depth, kept as a guard
        raise UserFileError(f"{source}: JSON nested too deeply", hint, source, "too_deep") from None
    except MemoryError:
        raise UserFileError(f"{source}: too large to parse", hint, source, "too_large") from None
    except ValueError:  # an integer of more than 4300 digits
        raise UserFileError(f"{source}: invalid JSON: a number with more than 4300 digits", hint, source,
                            "invalid_json") from None


def read_json(path: Path | str, what: str, max_bytes: int, max_depth: int, *, follow_symlinks: bool = True,
              hint: str = "fix the JSON syntax at that line") -> Any:
    """A JSON file within `max_bytes` and `max_depth` levels of nesting."""
    return parse_json(read_text(path, what, max_bytes, follow_symlinks=follow_symlinks), str(path), max_depth, hint)
