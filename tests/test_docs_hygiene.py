"""User-facing text describes the product, not its development: README.md, docs/ (shipped in the wheel),
examples/, templates/ and every generated project (generated/) must not speak of sessions, issue numbers,
lab-notebook entries, people, the machines it was developed on, dated status pages, or files that exist
only in this repository. History belongs in benchmarks/NOTES.md and git.

The README is the repository's page: it may point at benchmarks/results/ and scripts/ (its Results and
GPU-machine sections); nothing that ships (docs, templates, generated projects, examples) may.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

TEXT_SUFFIXES = {".md", ".j2", ".txt", ".h", ".cuh", ".cu", ".cpp", ".py", ".cmake", ".yaml", ".in", ".json"}

# (pattern, why) forbidden everywhere scanned
EVERYWHERE: tuple[tuple[str, str], ...] = (
    (r"(?i)\bsessions?\b", "a development session"),
    (r"(?i)\bissue\s*#?\d+", "an issue number"),
    (r"\bNOTES\b", "the lab notebook (benchmarks/NOTES.md)"),
    (r"\(h\d+(?:[-,] ?h?\d+)*\)", "a lab-notebook entry"),
    (r"(?i)\bthe lead\b", "a person"),
    (r"/opt/gcc", "a development machine's path"),
    (r"(?i)\bour (?:H200|H100|GPU|machine)", "a development machine"),
    (r"benchmarks/NOTES", "the lab notebook"),
    (r"issue\d+-plan", "a dated status page"),
    (r"/work/|/root/|/home/\w", "an absolute path of a development machine"),
)
# forbidden in what ships (docs/, templates/, generated/, examples/), allowed in README.md
SHIPPED: tuple[tuple[str, str], ...] = (
    (r"benchmarks/", "a file only in this repository"),
    (r"(?<![\w.-])scripts/", "a file only in this repository"),
    (r"\.\./(?:README|scripts|benchmarks|tests|cusync_gen)", "a file outside the shipped docs"),
    (r"\b20\d\d-\d\d-\d\d\b", "a date (a status page)"),
)
SHIPPED_ROOTS = ("docs", "templates", "generated", "examples")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                  and "build" not in p.relative_to(root).parts and "__pycache__" not in p.parts)


def _violations(path: Path, rules: tuple[tuple[str, str], ...]) -> list[str]:
    found = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for pattern, why in rules:
            match = re.search(pattern, line)
            if match:
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r} ({why}): {line.strip()[:120]}")
    return found


def test_user_facing_text_reads_as_a_product_not_a_log() -> None:
    problems = _violations(REPO / "README.md", EVERYWHERE)
    for folder in SHIPPED_ROOTS:
        for path in _files(REPO / folder):
            problems += _violations(path, EVERYWHERE + SHIPPED)
    assert not problems, "\n".join(problems)


def test_the_checker_finds_what_it_should(tmp_path: Path) -> None:
    sample = REPO / "docs" / "__hygiene_sample__.md"
    bad = ["as this session found", "see issue 12", "NOTES h13", "(h7)", "ask the lead", "/opt/gcc on our H200",
           "benchmarks/NOTES.md", "scripts/gpu_check.sh", "measured 2026-12-02"]
    try:
        sample.write_text("\n".join(bad) + "\nan ordinary line about the tile order\n")
        found = _violations(sample, EVERYWHERE + SHIPPED)
    finally:
        sample.unlink()
    assert {int(v.split(":")[1]) for v in found} == set(range(1, len(bad) + 1))
