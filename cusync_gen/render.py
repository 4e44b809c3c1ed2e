"""Render a plan into a standalone CMake project, with nothing but Jinja.

The plan's backend (`cusync_gen/backends`) lists every output file; nothing is discovered by walking folders. Files are
rendered in memory first, written to a sibling staging folder and swapped in with renames
(`fsio.swap_in`), so the target always holds either its old project or the complete new one, never a mix;
`generate(check=True)` compares instead of writing (the golden-file test).

What `generate` may touch: only the target folder. It writes into a missing or empty folder, or one
that holds our project (a `manifest.json` whose "generator" is cusync-gen); anything else needs
`force`. Of the old project it drops only the files its manifest lists *and* whose content still has the
sha256 that manifest recorded (or, for manifests without hashes, that carry our banner); build/ and
every other file it finds (the user's notes, a hand-edited file the new project no longer writes) stay.
A generated file that was edited by hand and that the new project writes again is refused without
`force`. Whatever appears in the folder while generate runs is carried over after the swap (`fsio.settle`).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from collections.abc import Callable
from typing import Any

import jinja2

from cusync_gen import __version__, fsio, userfile
from cusync_gen.cpp import FILTERS
from cusync_gen.backends import OutputFile, backend_of
from cusync_gen.errors import CusyncError, SpecError, UsageError
from cusync_gen.paths import templates_dir
from cusync_gen.attention_plan import AttentionPlan, make_attention_plan
from cusync_gen.plan import ChainPlan, make_plan
from cusync_gen.spec.archs import ARCHS
from cusync_gen.spec.loading import load_spec
from cusync_gen.spec.messages import show
from cusync_gen.spec.model import AttentionSpec, ChainSpec, ConvChainSpec

class GeneratedDiffers(CusyncError):
    """`generate --check` found files on disk that differ from what the generator emits now."""

    exit_code = 1
    multiline = True  # the report: one line per difference (the CLI prints it as it is)


def output_files(plan: ChainPlan | AttentionPlan) -> list[OutputFile]:
    """Every file of the project; a SpecError when two of them would get one path (see `_check_paths`)."""
    files = backend_of(plan).files(plan)
    _check_paths(files)
    return files


def _origin(f: OutputFile) -> str:
    return f"{f.field} ({f.path})" if f.field else f"the fixed file {f.path}"


def _check_paths(files: list[OutputFile]) -> None:
    """No two files share a path (compared case-insensitively: the project must check out on macOS
    and Windows too), and no file sits where another needs a folder."""
    seen: dict[str, OutputFile] = {}
    for f in [*files, OutputFile("manifest.json", "", False)]:
        key = f.path.casefold()
        other = seen.get(key)
        if other is not None:
            named = f if f.field else other
            field = named.field or "name"
            same = "the same file" if other.path == f.path else "files whose names differ only in case"
            raise SpecError(field, f"{_origin(f)} and {_origin(other)} are {same}: one would overwrite the other",
                            "rename the stage or the chain so that the file names differ "
                            "(e.g. a chain name without the stage_ prefix, a stage name without _stock)")
        seen[key] = f
    for f in files:
        for parent in PurePosixPath(f.path).parents:
            other = seen.get(str(parent).casefold())
            if other is not None:
                raise SpecError(other.field or f.field or "name",
                                f"{_origin(other)} is a file where {f.path} needs a folder",
                                "rename the stage or the chain")


def plan_of_spec(spec: ChainSpec | AttentionSpec, target: str | None = None) -> ChainPlan | AttentionPlan:
    """The plan of either kind of spec (a GEMM chain's `stages:` or an `attention:` block)."""
    if isinstance(spec, ConvChainSpec):
        from cusync_gen.conv_plan import make_conv_plan

        return make_conv_plan(spec, target)
    if isinstance(spec, AttentionSpec) and ARCHS[spec.arch].hosts_fused_attention:
        from cusync_gen.attention_sm90_plan import make_attention_sm90_plan

        return make_attention_sm90_plan(spec, target)
    return make_attention_plan(spec, target) if isinstance(spec, AttentionSpec) else make_plan(spec, target)


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    """One per process: Jinja keeps the compiled templates (most of a generate's time otherwise)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(FILTERS)
    return env


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest(plan: ChainPlan | AttentionPlan, files: list[OutputFile], texts: dict[str, str]) -> str:
    """What `build` and `run` read: names, target, stages, the generated files and their sha256 (what a
    later `generate` checks before it removes a file it no longer writes)."""
    backend = backend_of(plan)
    data = {
        "generator": f"cusync-gen {__version__}",
        "name": plan.name,
        "class_name": plan.class_name,
        "spec_hash": plan.spec_hash,
        "arch": plan.arch.value,
        "target": plan.target,
        "cuda_arch": plan.cuda_arch,
        "dtype": plan.dtype.value,
        "library": plan.name,
        "bench": f"{plan.name}_bench",
        **backend.MANIFEST,
        "stages": backend.manifest_stages(plan),
        "files": [f.path for f in files] + ["manifest.json"],
        "sha256": {f.path: sha256(texts[f.path]) for f in files},
    }
    return json.dumps(data, indent=2) + "\n"


def render_project(plan: ChainPlan | AttentionPlan, torch: bool = False) -> dict[str, str]:
    """Relative path -> file text, for the whole project (`torch`: also the PyTorch extension in torch/,
    cusync_gen/torch_plan.py). Nothing of the generating machine goes in: the project finds CUTLASS when it
    is configured (cmake/cusync_find_cutlass.cmake), so the text depends on the spec and the version only."""
    env = _environment()
    backend = backend_of(plan)
    files = output_files(plan)
    extra: dict[str, Any] = {}
    if torch:
        from cusync_gen.torch_plan import make_torch_plan, torch_files

        extra["torch"] = make_torch_plan(plan)
        files = files + [OutputFile(path, source, True, field="name") for path, source in torch_files(extra["torch"])]
        _check_paths(files)
    root = templates_dir()
    out: dict[str, str] = {}
    for f in files:
        if f.template:
            context = {"plan": plan, "version": __version__, **extra}
            if f.path.startswith("torch/"):  # the PyTorch extension (torch_plan): no stage of its own
                context.update(stage=None, parts=backend.PARTS, path=f.path)
            else:
                context.update(backend.context(plan, f))
            out[f.path] = env.get_template(f.source).render(**context)
        else:
            out[f.path] = (root / f.source).read_text()
    out["manifest.json"] = manifest(plan, files, out)
    return out


# --------------------------------------------------------------------------------------------------
# Reading what is on disk (an old manifest is untrusted input)

_BANNER = "Generated by cusync-gen"
_MAX_GENERATED_BYTES = 16 << 20  # no file we generate is near this: a larger one is not ours


@dataclass(frozen=True)
class OldProject:
    """What an existing target's manifest.json says, after checking every piece of it."""

    files: frozenset[str]  # safe relative paths only
    hashes: dict[str, str]  # path -> sha256, empty for manifests written before hashes were recorded


def _safe_rel(entry: Any) -> str | None:
    """A manifest entry as a plain relative path inside the project, else None (ignored)."""
    if not isinstance(entry, str) or not entry or "\0" in entry or "\\" in entry:
        return None
    rel = PurePosixPath(entry)
    if rel.is_absolute() or any(part in ("", ".", "..") for part in entry.split("/")):
        return None
    return str(rel)


def read_old_project(out_dir: Path) -> OldProject | None:
    """The project cusync-gen wrote at `out_dir`, or None when `manifest.json` is missing, not a regular
    file (a link, a FIFO: never opened for reading), too large, too deeply nested, not JSON, not an object
    or not ours ("generator" must start with "cusync-gen")."""
    try:
        data = userfile.read_json(out_dir / "manifest.json", "manifest", userfile.MAX_MANIFEST_BYTES,
                                  userfile.MAX_MANIFEST_DEPTH, follow_symlinks=False)
    except userfile.UserFileError:
        return None
    if not isinstance(data, dict) or not str(data.get("generator", "")).startswith("cusync-gen"):
        return None
    listed = data.get("files")
    files = {rel for rel in map(_safe_rel, listed if isinstance(listed, list) else []) if rel}
    recorded = data.get("sha256")
    hashes = {k: v for k, v in recorded.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(recorded, dict) else {}
    return OldProject(frozenset(files), hashes)


def _generated_by_us(old: OldProject, rel: str, path: Path) -> bool:
    """`path` (found under the target) is a regular file, not a link, and still what we wrote there. Anything
    else (a FIFO, a socket, a device, a link, a file too large to be ours) is not, and is never opened for
    reading."""
    if rel == "manifest.json":
        return True
    try:
        if old.hashes:
            data = userfile.read_bytes(path, "generated file", _MAX_GENERATED_BYTES, follow_symlinks=False)
            return hashlib.sha256(data).hexdigest() == old.hashes.get(rel)
        return _BANNER.encode() in userfile.read_head(path, "generated file", 4096, follow_symlinks=False)
    except userfile.UserFileError:
        return False


def _files_on_disk(out_dir: Path) -> set[str]:
    """Every file or link under `out_dir` except in build/, without following links."""
    found: set[str] = set()
    for folder, dirs, names in os.walk(out_dir):
        rel_folder = Path(folder).relative_to(out_dir)
        if rel_folder == Path("."):
            dirs[:] = [d for d in dirs if d != "build"]
        found |= {(rel_folder / n).as_posix() for n in names}
        found |= {(rel_folder / d).as_posix() for d in dirs if (Path(folder) / d).is_symlink()}
    return found


# --------------------------------------------------------------------------------------------------
# --check

_DIFF_FILES = 3  # changed files that get a diff
_DIFF_LINES = 20  # lines of diff per file
_DIFF_MAX_BYTES = 1 << 20  # of a changed file on disk, read for its diff


def _label(path: Path) -> str:
    """A user's path in a message line: as given, or quoted and escaped where it holds a newline or another
    unprintable character (the message stays one line)."""
    text = str(path)
    return text if text.isprintable() else show(text)


def _check_report(out_dir: Path, shown: Path, rendered: dict[str, str]) -> str | None:
    """A short report of how `out_dir` differs from `rendered`, or None when it does not."""
    if not out_dir.exists():
        return f"{_label(shown)} does not exist: all {len(rendered)} files of the project are missing"
    old = read_old_project(out_dir)
    missing, changed = [], []
    unreadable: dict[str, str] = {}
    for rel, text in rendered.items():
        expected = text.encode()
        try:  # one byte more than expected: enough to tell a longer file apart, whatever its size
            on_disk = userfile.read_head(out_dir / rel, "generated file", len(expected) + 1, follow_symlinks=False)
        except userfile.UserFileError as err:
            if err.reason in ("missing", "directory", "not_regular", "symlink"):
                missing.append(rel)
            else:
                changed.append(rel)
                unreadable[rel] = err.message
            continue
        if on_disk != expected:
            changed.append(rel)
    extra = sorted(_files_on_disk(out_dir) - set(rendered))
    stale = [rel for rel in extra if old is not None and rel in old.files and _generated_by_us(old, rel, out_dir / rel)]
    if not (missing or changed or stale):
        return None
    lines = [f"{_label(shown)} differs from what the generator emits now: {len(missing)} missing, {len(changed)} changed, "
             f"{len(stale)} no longer generated"]
    lines += [f"missing: {rel}" for rel in missing]
    lines += [f"changed: {rel}" + (f" ({unreadable[rel]})" if rel in unreadable else "") for rel in changed]
    lines += [f"no longer generated (generate removes it): {rel}" for rel in stale]
    lines += [f"not generated (generate keeps it): {rel}" for rel in extra if rel not in stale]
    for rel in [r for r in changed if r not in unreadable][:_DIFF_FILES]:
        try:
            head = userfile.read_head(out_dir / rel, "generated file", _DIFF_MAX_BYTES, follow_symlinks=False)
        except userfile.UserFileError:
            continue
        old_text = head.decode(errors="replace").splitlines()
        diff = list(difflib.unified_diff(old_text, rendered[rel].splitlines(), f"on disk/{rel}", f"generated/{rel}",
                                         lineterm="", n=1))
        lines += diff[:_DIFF_LINES] + ([f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
                                       if len(diff) > _DIFF_LINES else [])
    if len(changed) > _DIFF_FILES:
        lines.append(f"... (no diff shown for {len(changed) - _DIFF_FILES} more changed files)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Writing

def _ours_in(folder: Path) -> fsio.Deletable:
    """For a leftover folder of a killed run: its files that its own manifest says we wrote, unchanged."""
    old = read_old_project(folder) if fsio.seen(folder / "manifest.json") else None
    if old is None:
        return lambda rel, info, fd: False
    return lambda rel, info, fd: rel in old.files and _generated_by_us(old, rel, folder / rel)


def _edited(out_dir: Path, old: OldProject | None, rendered: dict[str, str]) -> list[str]:
    """Files the new project writes that are there now but are not what we wrote (edited by hand, or the
    user's own file of the same name), unless they already hold the new content."""
    found = []
    for rel, text in rendered.items():
        path = out_dir / rel
        if rel == "manifest.json" or fsio.seen(path) is None:
            continue  # ours; or nothing there, a link or a folder (foreign_entries and the swap deal with those)
        if old is not None and rel in old.files and _generated_by_us(old, rel, path):
            continue
        if path.stat().st_size == len(text.encode()) and _holds(out_dir, rel, text):
            continue
        found.append(rel)
    return found


def _write(out_dir: Path, shown: Path, rendered: dict[str, str], force: bool,
           notify: Callable[[str], None] | None) -> None:
    """Swap the rendered project into `out_dir` (absolute) under its lock; see the module docstring."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with fsio.lock(out_dir):
        leftovers = fsio.recover(out_dir, _ours_in)
        old = read_old_project(out_dir)
        if old is None and not force and out_dir.is_dir() and any(out_dir.iterdir()):
            raise UsageError(f"-o {_label(shown)} is not empty and holds no project of cusync-gen (no manifest.json of ours)",
                             hint="pick a new or empty folder, or pass --force to write the project into it "
                                  "(files of the same name are replaced, the others kept)")
        edited = _edited(out_dir, old, rendered) if old is not None and not force else []
        if edited:
            listed = ", ".join(edited[:5]) + (f" and {len(edited) - 5} more" if len(edited) > 5 else "")
            raise UsageError(f"-o {_label(shown)}: {len(edited)} generated file(s) were edited since cusync-gen wrote them "
                             f"and would be replaced: {listed}",
                             hint="move your changes into files of your own (generate keeps those), or pass --force "
                                  "to replace the edited files")
        old = old or OldProject(frozenset(), {})
        seen = fsio.inventory(out_dir)  # before deciding: a file that appears later is never one we drop
        keep = fsio.foreign_entries(out_dir, set(rendered), lambda rel, path: _generated_by_us(old, rel, path),
                                    set(old.files))
        kept = set(keep)
        replaced = {rel: s for rel, s in seen.items()  # what we drop, as it was: deleted only if still so
                    if not any(rel == k or rel.startswith(k + "/") for k in kept)}
        staging = fsio.new_staging(out_dir)
        try:
            for rel, text in rendered.items():
                # the bytes the manifest's sha256 describes, whatever the locale; never through a link
                fsio.write_new(staging / rel, text.encode())
        except BaseException:
            fsio.discard_staging(staging)
            raise
        folder = fsio.swap_in(staging, out_dir, keep, replaced)
        leftovers += [folder] if folder is not None else []
    for folder in leftovers:
        message = (f"warning: some entries of -o {_label(shown)} appeared or changed while generate wrote it, or conflict "
                   f"with generated files; nothing was deleted: they are kept in {folder}")
        if notify is not None:
            notify(message)


def proved_plan(spec_path: Path, target: str | None = None) -> ChainPlan | AttentionPlan:
    """The plan of a spec file, once its synchronization is proved sound (no code for one that is not)."""
    plan = plan_of_spec(load_spec(Path(spec_path)), target)
    backend_of(plan).prove(plan)
    return plan


def generate(spec_path: Path, out_dir: Path, target: str | None = None, check: bool = False,
             cutlass_dir: Path | None = None, force: bool = False, torch: bool = False,
             notify: Callable[[str], None] | None = None) -> Path:
    """Spec file -> project folder (or, with check, raise if the folder differs from what we emit).
    `torch`: also emit the PyTorch extension (torch/; GEMM chains only, else a UsageError).

    Writes only inside `out_dir`; refuses a non-empty folder that is not our project unless `force`.
    Ctrl-C is an `fsio.Interrupted` (exit 130) that says what the folder holds. `cutlass_dir` is not
    used: no CUTLASS path goes into the project, which finds CUTLASS when it is configured (`build` passes
    its --cutlass-dir as -DCUTLASS_DIR).
    """
    shown = Path(out_dir)
    rendered: dict[str, str] = {}
    try:
        plan = proved_plan(spec_path, target)
        try:
            root = fsio.check_target(shown, "-o")
            rendered = render_project(plan, torch=torch)
            if check:
                report = _check_report(root, shown, rendered)
                if report:
                    raise GeneratedDiffers(report, hint=f"regenerate: cusync-gen generate {spec_path} -o {_label(shown)}")
                return shown
            _write(root, shown, rendered, force, notify)
        except OSError as err:
            raise fsio.write_error(err, shown, "-o") from err
    except KeyboardInterrupt:
        new = bool(rendered) and not check and _holds(shown, "manifest.json", rendered["manifest.json"])
        raise fsio.Interrupted(f"interrupted: -o {_label(shown)} holds "
                               + ("the complete new project" if new else "what it held before, unchanged"),
                               hint="run the same command again") from None
    return shown


def _holds(root: Path, rel: str, text: str) -> bool:
    expected = text.encode()
    try:
        return userfile.read_head(root / rel, "generated file", len(expected) + 1, follow_symlinks=False) == expected
    except userfile.UserFileError:
        return False
