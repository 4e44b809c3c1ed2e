"""The one error hierarchy: every failure the user can cause or fix carries a message and a hint.

The CLI catches `CusyncError` once, prints "error: {message}" and "hint: {hint}", and exits with
`exit_code`, so each subclass exists to pick a documented exit code or to keep extra context.
"""

from __future__ import annotations


class CusyncError(Exception):
    """Base class: a message saying what is wrong and a hint saying what would fix it."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class SpecError(CusyncError):
    """A spec violation; `field` is the path (e.g. "stages[1].tile.warp") so users can find the line."""

    def __init__(self, field: str, message: str, hint: str = "") -> None:
        super().__init__(f"{field}: {message}", hint)
        self.field = field
        self.source: str | None = None  # the file it came from, set by parse_spec


class UsageError(CusyncError):
    """Bad CLI usage: unknown example, missing or unreadable file, bad --m."""

    exit_code = 2


class ToolError(CusyncError):
    """An external tool is missing or failed; keeps the command and the end of stderr for the report."""

    def __init__(
        self,
        message: str,
        hint: str = "",
        command: list[str] | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message, hint)
        self.command = list(command) if command is not None else None
        self.stderr_tail = stderr_tail


class NoGpuError(ToolError):
    """No CUDA device or driver: distinct exit code so CI can skip rather than fail."""

    exit_code = 3


class NotRunError(NoGpuError):
    """`run` generated and built the project but found no CUDA device to run it on: the work that needs no
    GPU is done. Its own exit code, so a script can tell this from a failed build or an early no-GPU stop."""

    exit_code = 6


class SyncTimeoutError(CusyncError):
    """The generated binary gave up spin-waiting on a semaphore (a deadlock or a lost post)."""

    exit_code = 4


class CheckFailedError(CusyncError):
    """Results differ from the reference (bitwise or numerically)."""

    exit_code = 5
