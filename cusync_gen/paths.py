"""Where cusync-gen finds its own files: templates, shipped examples, docs, the fetched CUTLASS headers.

Two layouts are supported:
- a checkout or an editable install (`pip install -e .`): the package sits in `<repo>/cusync_gen`, the
  templates in `<repo>/templates` and the fetched CUTLASS in `<repo>/third_party/cutlass`;
- a wheel install: the templates and docs ship inside the package as `cusync_gen/templates` and
  `cusync_gen/docs` (see pyproject.toml) and CUTLASS is fetched into the user's cache folder.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The checkout this package runs from, or None for a wheel install."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file() and (root / "templates").is_dir():
        return root
    return None


def templates_dir() -> Path:
    """`<repo>/templates` in a checkout, else the copy shipped in the package."""
    root = repo_root()
    if root is not None:
        return root / "templates"
    return PACKAGE_DIR / "templates"


def docs_dir() -> Path:
    """`<repo>/docs` in a checkout, else the copy shipped in the package (`cusync-gen docs`)."""
    root = repo_root()
    if root is not None:
        return root / "docs"
    return PACKAGE_DIR / "docs"


def doc_names() -> list[str]:
    """Names of the docs, sorted: `architecture`, `spec-format`, ..."""
    return sorted(p.stem for p in docs_dir().glob("*.md"))


def doc_path(name: str) -> Path | None:
    """The doc called `name` (without .md), or None."""
    return docs_dir() / f"{name}.md" if name in doc_names() else None


def examples_dir() -> Path:
    """The shipped example specs (`cusync-gen init --list`)."""
    return PACKAGE_DIR / "examples"


def example_names() -> list[str]:
    """Names of the shipped examples, sorted: `two_gemm`, `gpt3_mlp`, ..."""
    return sorted(p.stem for p in examples_dir().glob("*.yaml"))


def example_path(name: str) -> Path | None:
    """The shipped example called `name`, or None."""
    path = examples_dir() / f"{name}.yaml"
    return path if name in example_names() else None


def default_cutlass_dir() -> Path:
    """Where `cusync-gen fetch-cutlass` puts the CUTLASS headers by default.

    `<repo>/third_party/cutlass` in a checkout (git-ignored); for a wheel install the user cache folder
    (`$XDG_CACHE_HOME/cusync-gen/cutlass`, default `~/.cache/cusync-gen/cutlass`).
    """
    root = repo_root()
    if root is not None:
        return root / "third_party" / "cutlass"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cusync-gen" / "cutlass"


# Characters a build cannot take in a path: CMake splits lists at `;` (a project under "a;b" configured into
# a sibling "a"), and the generators pass paths to shells, nvcc and ninja, where quotes, `$`, backquotes,
# backslashes and line breaks are syntax. Spaces and other printable characters are fine.
UNSAFE_BUILD_CHARS = frozenset(';$`"\'\\') | frozenset(chr(c) for c in range(32)) | {"\x7f"}


def check_build_path(path: Path | str, what: str) -> None:
    """A UsageError naming `what` (an option, or "the project folder") if `path`, made absolute, has a
    character that breaks a CMake/nvcc/ninja build."""
    from cusync_gen.errors import UsageError

    for ch in os.path.abspath(os.fspath(path)):
        if ch in UNSAFE_BUILD_CHARS:
            raise UsageError(f"{what} {os.fspath(path)!r} has the character {ch!r}, which CMake, nvcc or ninja would "
                             "read as syntax", hint="use a path without ; $ ` \" ' \\ or line breaks")
