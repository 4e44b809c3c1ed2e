"""Every command's options, parsed and checked before the command does anything.

Each command of the CLI first turns its raw arguments into one frozen options object here (`*_options`
functions); only then does it generate, build, run or write. A bad option is a UsageError (exit 2) raised
while nothing has been written, built or run. Reading (a spec, a project's manifest.json, nvidia-smi) is
allowed here, writing never.

Names, one per concept (docs in README's Walkthrough):
- a *target* is the GPU a project is built for (`sm_90`): spec `target:`, CLI `--target` (`--arch` is the
  older spelling on build/run/tune/trace);
- a *backend* is the kernel family a spec is generated with (`sm90`): spec `arch:`, CLI `--backend`;
- `-o/--output` is what the command produces (init: a spec file, generate: a project folder, trace: a
  picture); `--project DIR` is where run and trace generate a spec's project; `run --results FILE` the
  rows as JSON. Either concept takes any usual spelling (sm90, sm_90, sm_90a, 90), normalized by
  `spec.model.canonical_target` / `canonical_backend`.
"""

from __future__ import annotations

import os

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cusync_gen import paths
from cusync_gen.errors import UsageError
from cusync_gen.spec.archs import facts_of
from cusync_gen.spec.model import BACKEND_TARGETS, TARGETS, canonical_backend, canonical_target

MAX_COUNT = 1 << 24  # --repeats, --warmup, --rounds: the largest integer the bench takes (cusync/bench/common.cuh, parse_int)
MAX_JOBS = 1024      # --jobs: parallel nvcc processes (each takes up to a few GB)
MAX_AUTOTUNE = 200   # run --autotune: rounds (the sm90 bench's limit)
PICTURE_SUFFIXES = ("", ".png", ".svg", ".pdf")  # trace -o
DEFAULT_RUN_MS = "1,256,1024"
DEFAULT_ATTENTION_MS = "512,1024,2048"  # prompt lengths (batch 1, no cache)
MAX_LAYER_SHAPES = 64        # run of the sm90 attention layer: --m x --batch x --cache shapes at most
MAX_LAYER_TOKENS = 1 << 24   # ... and per shape at most this many cached + new tokens over all sequences
MAX_SHAPES_TEXT = 1 << 16    # --shapes: characters at most
#: run --policies: what the bench of each kind of chain takes (templates/runtime/include/cusync/bench/).
BENCH_POLICIES: dict[str, tuple[str, ...]] = {"chain": ("spec", "row", "tile"), "attention": ("spec", "row")}
_BUILD_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


# --------------------------------------------------------------------------------------------------
# Values


def shown(text: str) -> str:
    """A user string in an error line: quoted, escaped (a newline shows as \\n), cut short."""
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


def _parse_size(item: str, option: str, minimum: int, hint: str, maximum: int | None = None,
                limit_hint: str | None = None) -> int:
    """One integer from minimum to `maximum` (default spec.MAX_M, the largest M the generated library is
    built for): ASCII digits only, spaces around it allowed; anything else is one UsageError."""
    from cusync_gen.spec.limits import MAX_M

    if maximum is None:
        maximum = MAX_M
        limit_hint = f"pass values of at most {MAX_M} (2^20, `cusync-gen docs spec-format`, Limits)"
    item = item.strip()
    kind = "a positive integer" if minimum > 0 else "a non-negative integer"
    bad = UsageError(f"{option}: {item[:40]!r} is not {kind}", hint=hint)
    if not (item.isascii() and item.isdigit()):  # str.isdigit alone takes '²' and other Unicode digits
        raise bad
    digits = item.lstrip("0") or "0"
    if len(digits) > len(str(maximum)) or int(digits) > maximum:  # int() refuses more than 4300 digits
        shown_value = digits if len(digits) <= 20 else f"a {len(digits)}-digit number"
        raise UsageError(f"{option}: {shown_value} is above the limit of {maximum}", hint=limit_hint or hint)
    if int(digits) < minimum:
        raise bad
    return int(digits)


def parse_ms(text: str, option: str = "--m", minimum: int = 1) -> list[int]:
    """`--m 1,256,1024` -> [1, 256, 1024]; anything else, or a value above spec.MAX_M, is a UsageError."""
    hint = f"pass a comma-separated list of integers >= {minimum}, e.g. {option} 256,1024"
    return [_parse_size(item, option, minimum, hint) for item in text.split(",")]


def parse_count(text: str, option: str, minimum: int = 1, example: int = 1024) -> int:
    """The one value of --batch, --cache (validate) or trace's --m: parse_ms's rules and limit."""
    hint = f"pass one integer >= {minimum}, e.g. {option} {example}"
    if "," in text:
        raise UsageError(f"{option} takes one value, got {shown(text)}", hint=hint)
    return _parse_size(text, option, minimum, hint)


def parse_tiles(values: list[str]) -> dict[str, list[tuple[int, int, int]]]:
    """`--tiles gemm1=128x128x32,128x256x32` (repeatable) -> {"gemm1": [(128, 128, 32), (128, 256, 32)]}.
    Each number parses as --m's do (parse_ms), up to spec.MAX_TILE_DIM; a list longer than tune.MAX_VARIANTS
    is refused before its numbers are read."""
    from cusync_gen.spec.limits import MAX_TILE_DIM
    from cusync_gen.tune import MAX_VARIANTS

    example = "e.g. --tiles gemm1=128x128x32,128x256x32"
    out: dict[str, list[tuple[int, int, int]]] = {}
    for value in values:
        name, sep, shapes = value.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--tiles {shown(value)}: expected STAGE=MxNxK[,MxNxK...]", hint=example)
        count = shapes.count(",") + 1
        if count > MAX_VARIANTS:
            raise UsageError(f"--tiles {shown(value)}: {count} tiles for {name}, more than the limit of "
                             f"{MAX_VARIANTS} variants", hint=f"pass at most {MAX_VARIANTS} tiles in all, {example}")
        for shape in shapes.split(","):
            parts = shape.lower().split("x")
            if len(parts) != 3:
                raise UsageError(f"--tiles {shown(value)}: {shown(shape)} is not MxNxK", hint=example)
            m, n, k = (_parse_size(p, "--tiles", 1, f"pass three positive integers per tile, {example}",
                                   MAX_TILE_DIM, f"a tile dimension is at most {MAX_TILE_DIM} "
                                   "(`cusync-gen docs spec-format`, Limits)") for p in parts)
            out.setdefault(name, []).append((m, n, k))
    return out


def parse_target(value: str | None, option: str = "--target") -> str | None:
    """A GPU target in any spelling (sm_90, sm90, sm_90a, 90) -> "sm_90"; one cusync-gen supports."""
    if value is None:
        return None
    target = canonical_target(value)
    if target not in TARGETS:
        raise UsageError(f"{option} {shown(value)} is not a target cusync-gen builds for",
                         hint=f"supported targets: {', '.join(TARGETS)} (also spelled sm90, sm_90a or 90)")
    return str(target)


def parse_backend(value: str, option: str = "--backend", allow_auto: bool = True) -> str:
    """A backend in any spelling (sm90, sm_90, 90) -> "sm90"; "auto" where allowed."""
    if allow_auto and value.strip().lower() == "auto":
        return "auto"
    backend = canonical_backend(value)
    if backend not in BACKEND_TARGETS:
        choices = ("auto, " if allow_auto else "") + ", ".join(BACKEND_TARGETS)
        raise UsageError(f"{option} {shown(value)} is not a backend", hint=f"use one of: {choices}")
    return str(backend)


def check_runs_on(backend: str, target: str, option: str, where: str) -> None:
    """A project of `backend` can be built for `target`: sm80 kernels run on every supported GPU
    (Hopper included), sm90's wgmma/TMA kernels on sm_90 only. `where` names the project."""
    allowed = BACKEND_TARGETS.get(backend, TARGETS)
    if target not in allowed:
        raise UsageError(f"{option} {target} cannot build {where}: its backend is {backend} (arch: {backend}), "
                         f"whose kernels run on {', '.join(allowed)} only",
                         hint=f"pass {option} {allowed[0]}, or generate the spec with arch: sm80 for {target}")


def parse_policies(text: str | None, kind: str | None = None) -> list[str] | None:
    """`--policies row,tile` -> ["row", "tile"]; with `kind` ("chain", "attention"), only names its bench takes."""
    if not text:
        return None
    policies = [item.strip() for item in text.split(",")]
    allowed = BENCH_POLICIES.get(kind or "", None)
    for item in policies:
        if not item.isidentifier() or (allowed is not None and item not in allowed):
            what = "a policy name" if allowed is None else \
                f"a policy the {'attention' if kind == 'attention' else 'GEMM'} chain's bench takes"
            raise UsageError(f"--policies: {shown(item)} is not {what}",
                             hint=f"pass a comma-separated list of {', '.join(allowed or BENCH_POLICIES['chain'])}, "
                                  "e.g. --policies row,tile" if allowed != BENCH_POLICIES["attention"]
                             else "pass spec or row (the attention chain's edges are row edges)")
    return policies


def _project_owning(path: Path) -> Path | None:
    """The generated project whose manifest.json is `path` or lists it among its files, if any."""
    from cusync_gen.render import read_old_project

    path = Path(os.path.abspath(path))
    for parent in path.parents:
        old = read_old_project(parent)
        if old is not None and (path == parent / "manifest.json" or path.relative_to(parent).as_posix() in old.files):
            return parent
    return None


def check_output_file(path: Path | None, option: str, example: str, keep: tuple[Path, ...] = ()) -> Path | None:
    """A file the command will write: not a folder, not under a file, not something that is no regular file
    (a FIFO, a device), not one of `keep` (the command's own input and outputs), not an existing file of a
    generated project. Checked before any work."""
    if path is None:
        return None
    if "\0" in str(path):
        raise UsageError(f"{option} {shown(str(path))} has a NUL character", hint=f"pass a plain file name for {option}")
    if str(path) == "" or path.is_dir():
        raise UsageError(f"{option} {path} is a folder", hint=f"pass a file name for {option}, e.g. {option} "
                         f"{path / example}")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{option} {path}: {parent} is a file, not a folder",
                             hint=f"pass a path in a folder for {option}")
    if path.exists() and not path.is_file():
        raise UsageError(f"{option} {path} already exists (not a regular file)", hint=f"pass another file for {option}")
    for other in keep:
        if path.exists() and other.exists() and os.path.samefile(path, other) or \
                os.path.abspath(path) == os.path.abspath(other):
            raise UsageError(f"{option} {path} is {other}, which this command reads or writes itself",
                             hint=f"pass another file for {option}")
    project = _project_owning(path)
    if project is not None:
        raise UsageError(f"{option} {path} is a file of the generated project {project}",
                         hint=f"pass a file the project does not have for {option}, or a path outside it")
    return path


def check_output_dir(path: Path | None, option: str) -> Path | None:
    """A folder the command will write into: not a file, not under a file, not a broken link, not the
    current or home folder (fsio.check_target, which only looks)."""
    if path is None:
        return None
    from cusync_gen import fsio
    paths.check_build_path(path, option)
    fsio.check_target(path, option)
    return path


def check_range(value: int | None, option: str, minimum: int, maximum: int) -> int | None:
    """An integer option (typer checks these too; the importable API goes through here)."""
    if value is not None and not minimum <= value <= maximum:
        raise UsageError(f"{option} {value} is not in {minimum}..{maximum}", hint=f"pass {option} {minimum}..{maximum}")
    return value


def merge_alias(option: str, value: Any, aliases: dict[str, Any]) -> Any:
    """The value of an option given under its canonical name or one of its older (hidden) spellings."""
    given = {name: v for name, v in aliases.items() if v is not None}
    if value is not None:
        given = {option: value, **given}
    if len({str(v) for v in given.values()}) > 1:
        names = " and ".join(given)
        raise UsageError(f"{names} name the same option with different values", hint=f"pass {option} once")
    return next(iter(given.values()), None)


def resolve_spec(arg: str) -> Path:
    """A spec argument: an existing file, else the name of a shipped example. A folder is never a spec: one
    named like an example (`generate gpt3_mlp -o gpt3_mlp` makes ./gpt3_mlp) does not hide the example."""
    path = Path(arg)
    example = paths.example_path(arg)
    if path.exists() and not path.is_dir():
        return path
    if example is not None:
        return example
    if path.is_dir():
        what = "a generated project folder" if (path / "manifest.json").is_file() else "a folder"
        raise UsageError(f"{arg} is {what}, not a spec file",
                         hint="pass the path of a .yaml or .json spec file, or a shipped example name")
    if path.suffix in (".yaml", ".yml", ".json") or "/" in arg:
        raise UsageError(f"spec file not found: {arg}", hint="check the path, or use a shipped example name")
    raise unknown_example(arg)


def _is_input_path(arg: str) -> bool:
    """`arg` is a path run and trace can take as it is: a spec file, or a generated project folder (has
    manifest.json). Any other folder is not: an example of that name is meant (see resolve_spec)."""
    path = Path(arg)
    return path.exists() and (not path.is_dir() or (path / "manifest.json").is_file())


def unknown_example(name: str) -> UsageError:
    return UsageError(f"unknown example {name!r}",
                      hint=f"examples: {', '.join(paths.example_names())} (see `cusync-gen init --list`)")


# --------------------------------------------------------------------------------------------------
# Commands


@dataclass(frozen=True)
class InitOptions:
    source: Path
    dest: Path
    force: bool
    as_json: bool  # dest is a .json file: write the example's data as JSON (the loader reads by suffix)


#: init -o: the spec file types the loader reads (spec.loading.read_spec_data picks the parser by suffix).
INIT_SUFFIXES = (".yaml", ".yml", ".json")


def init_options(name: str | None, output: str | None, force: bool) -> InitOptions:
    if name is None:
        raise UsageError("init needs an example NAME", hint=f"examples: {', '.join(paths.example_names())}")
    source = paths.example_path(name)
    if source is None:
        raise unknown_example(name)
    dest = init_destination(output, f"{name}.yaml")
    suffix = dest.suffix.lower()
    if suffix not in INIT_SUFFIXES:  # a spec the loader could not read back
        what = f": {shown(dest.suffix)} is not a spec file type" if dest.suffix else " has no file type suffix"
        raise UsageError(f"-o {dest}{what}",
                         hint=f"name the file {', '.join('*' + s for s in INIT_SUFFIXES)} (JSON is written for "
                              f".json), e.g. -o {name}.yaml")
    if os.path.lexists(dest) and not force:  # a dangling link too: never written through
        raise UsageError(f"-o {dest} already exists" + (" (a symbolic link)" if dest.is_symlink() else ""),
                         hint="pass --force to replace it, or -o another file")
    return InitOptions(source, dest, force, suffix == ".json")


def init_destination(output: str | None, file_name: str) -> Path:
    """Where `init` writes: ./FILE, -o's file, or FILE inside -o's folder when -o ends with a slash (the
    folder is created if need be); an existing folder without the slash is refused, as a file name."""
    if output is None:
        return Path(file_name)
    path = Path(output)
    if output.endswith(("/", os.sep)):
        return check_output_file(path / file_name, "-o", file_name) or path / file_name
    return check_output_file(path, "-o", file_name) or path


@dataclass(frozen=True)
class GenerateOptions:
    spec: Path
    output: Path
    target: str | None
    check: bool
    force: bool
    torch: bool


def generate_options(spec: str, output: Path, target: str | None, check: bool, force: bool,
                     torch: bool) -> GenerateOptions:
    target = parse_target(target, "--target")
    spec_path = resolve_spec(spec)
    check_output_dir(output, "-o")
    return GenerateOptions(spec_path, output, target, check, force, torch)


@dataclass(frozen=True)
class BuildOptions:
    project: Path
    target: str | None
    jobs: int | None
    cutlass_dir: Path | None
    build_type: str


def project_backend(manifest: dict[str, Any]) -> str:
    return str(manifest.get("arch") or "sm80")


def build_options(project: Path, target: str | None, jobs: int | None, cutlass_dir: Path | None,
                  build_type: str, option: str = "--target") -> BuildOptions:
    from cusync_gen.build import read_manifest

    target = parse_target(target, option)
    check_range(jobs, "--jobs", 1, MAX_JOBS)
    if not _BUILD_TYPE.fullmatch(build_type):
        raise UsageError(f"--build-type {shown(build_type)} is not a CMake build type",
                         hint="use Release, Debug, RelWithDebInfo or MinSizeRel")
    manifest = read_manifest(project)
    if target is not None:
        check_runs_on(project_backend(manifest), target, option, f"project {project}")
    return BuildOptions(project, target, jobs, cutlass_dir, build_type)


@dataclass(frozen=True)
class Subject:
    """What run/trace work on: a generated project as is, or a spec generated into `project` first."""
    project: Path
    spec: Path | None   # None: `project` is a generated project
    kind: str           # "chain", "attention" (sm80 chain) or "attention_sm90" (the sm90 layer)
    backend: str        # "sm80" or "sm90"
    why: str = ""       # run: which example runs, and why (printed before the work)


def _attention_sm90_unsupported(what: str) -> UsageError:
    """trace draws the tiles of tile-synced chains; the sm90 attention layer runs its stages back to back."""
    return UsageError(f"{what} is the sm90 attention layer: trace works on GEMM and conv chains",
                      hint="time its stages with `cusync-gen run NAME --m 1,512 --batch 1,8` (or its bench, "
                           "<name>_bench --time p:1x512+0 g:8+4096; `cusync-gen docs attention`)")


def subject_of(target: str, project: Path | None, option: str = "--project", layer: bool = False) -> Subject:
    """A project folder (has manifest.json) as is; a spec file or example name, read (not generated) to
    learn its kind ("chain", "conv", "attention", "attention_sm90") and backend, with the folder it will be
    generated into (default ./generated/NAME). `layer`: the sm90 attention layer is accepted too (run times its
    stages through its bench); trace refuses it."""
    from cusync_gen.build import read_manifest

    folder = Path(target)
    if (folder / "manifest.json").is_file():
        manifest = read_manifest(folder)
        if manifest.get("kind") == "conv":
            return Subject(folder, None, "conv", project_backend(manifest))
        if manifest.get("kind") == "attention_sm90":
            if not layer:
                raise _attention_sm90_unsupported(str(folder))
            return Subject(folder, None, "attention_sm90", project_backend(manifest))
        kind = "attention" if manifest.get("kind") == "attention" else "chain"
        return Subject(folder, None, kind, project_backend(manifest))
    from cusync_gen.spec.loading import load_spec
    from cusync_gen.spec.model import AttentionSpec

    spec_path = resolve_spec(target)
    loaded = load_spec(spec_path)
    is_conv = type(loaded).__name__ == "ConvChainSpec"
    fused = isinstance(loaded, AttentionSpec) and facts_of(loaded.arch).hosts_fused_attention
    if fused and not layer:
        raise _attention_sm90_unsupported(str(spec_path))
    dest = check_output_dir(project, option) or Path("generated") / loaded.name
    kind = "conv" if is_conv else "attention_sm90" if fused else "attention" if isinstance(loaded, AttentionSpec) else "chain"
    return Subject(dest, spec_path, kind, loaded.arch.value)


def build_target(subject: Subject, target: str | None, gpu: str | None, option: str) -> str | None:
    """What to build for: `target` (checked against the backend), else the local GPU where the backend
    runs on it and cusync-gen supports it, else the project's own target (None)."""
    where = f"{subject.spec or subject.project}"
    if target is not None:
        check_runs_on(subject.backend, target, option, where)
        return target
    local = canonical_target(gpu) if gpu else None
    if local in BACKEND_TARGETS.get(subject.backend, ()):
        return str(local)
    if local is not None and not set(TARGETS) <= set(BACKEND_TARGETS.get(subject.backend, TARGETS)):
        raise UsageError(f"{where} has Hopper kernels (backend sm90) and the local GPU is {gpu}",
                         hint=f"run it on an sm_90 GPU, or pass {option} sm_90 to build only")
    return None


@dataclass(frozen=True)
class RunOptions:
    subject: Subject
    target: str | None     # build for this (None: the project's own target)
    generate_target: str | None  # the spec is generated for this (--target), else its own
    ms: tuple[int, ...]
    policies: tuple[str, ...] | None
    extra: tuple[str, ...]
    repeats: int
    warmup: int
    jobs: int | None
    cutlass_dir: Path | None
    results: Path | None
    force: bool


def run_options(target: str, m: str | None, policies: str | None, batch: str | None, cache: str | None,
                repeats: int, warmup: int, arch: str | None, project: Path | None, force: bool,
                jobs: int | None, cutlass_dir: Path | None, results: Path | None, backend: str,
                autotune: int, gpu: str | None, option: str = "--target", shapes: str | None = None) -> RunOptions:
    from cusync_gen import build as builder

    check_range(repeats, "--repeats", 1, MAX_COUNT)
    check_range(warmup, "--warmup", 1, MAX_COUNT)
    check_range(jobs, "--jobs", 1, MAX_JOBS)
    check_range(autotune, "--autotune", 0, MAX_AUTOTUNE)
    arch = parse_target(arch, option)
    backend = parse_backend(backend)
    spec_file = Path(target)
    check_output_file(results, "--results", "results.json", keep=(spec_file,) if spec_file.is_file() else ())
    if m is not None:
        parse_ms(m)  # the syntax now; which default applies depends on the chain's kind
    for flag, value in (("--batch", batch), ("--cache", cache)):
        if value is not None:
            parse_ms(value, flag, minimum=0 if flag == "--cache" else 1)
    why = ""
    if paths.example_path(target) is not None and not _is_input_path(target):  # a name, not a path
        target, why = builder.pick_example(target, backend, gpu, arch)
        target = str(paths.example_path(target))  # the example itself, whatever folder has its name here
    elif backend != "auto" and _is_input_path(target):
        raise UsageError(f"--backend picks among the shipped examples; {shown(target)} is a path",
                         hint="a spec's backend is its `arch:`; drop --backend, or pass an example name")
    subject = subject_of(target, project, layer=True)
    if why:
        subject = Subject(subject.project, subject.spec, subject.kind, subject.backend, why)
    if subject.spec is None and project is not None:
        raise UsageError(f"--project {project}: {target} is already a generated project",
                         hint="drop --project, or pass a spec file or example name")
    if shapes is not None and subject.kind != "attention_sm90":
        raise UsageError("--shapes applies to the sm90 attention layer only (its bench's shape syntax)",
                         hint="use --m/--batch/--cache, or run an sm90 attention layer (e.g. llama3_attention_sm90)")
    if subject.kind == "conv":
        return _conv_run_options(subject, m, policies, batch, cache, autotune, repeats, warmup, arch, gpu, option,
                                 jobs, cutlass_dir, results, force)
    layer = subject.kind == "attention_sm90"
    attention = subject.kind in ("attention", "attention_sm90")
    if autotune and (attention or not facts_of(subject.backend).run_modes):
        raise UsageError("--autotune applies to sm90 GEMM chains only (it picks among run()'s modes)",
                         hint="remove --autotune, or run an sm90 chain (e.g. gpt3_mlp_sm90)")
    ms = parse_ms(m or (DEFAULT_ATTENTION_MS if attention else DEFAULT_RUN_MS))
    if layer:
        if policies is not None:
            raise UsageError("--policies: the sm90 attention layer runs its stages back to back on one stream "
                             "(programmatic dependent launch); it has no overlap policies", hint="drop --policies")
        build_for = build_target(subject, arch, gpu, option)
        if shapes is not None:
            given = [flag for flag, value in (("--m", m), ("--batch", batch), ("--cache", cache)) if value is not None]
            if given:
                raise UsageError(f"--shapes and {', '.join(given)}: --shapes gives every shape itself",
                                 hint=f"drop {' and '.join(given)}, or drop --shapes")
            shape_list = layer_shape_list(shapes)
        else:
            shape_list = layer_shapes(ms, batch, cache)
        return RunOptions(subject, build_for, arch, tuple(ms), None, tuple(shape_list), repeats,
                          warmup, jobs, cutlass_dir, results, force)
    extra: list[str] = []
    for flag, value in (("--batch", batch), ("--cache", cache)):
        if value is None:
            continue
        if not attention:
            raise UsageError(f"{flag} applies to attention chains only", hint=f"remove {flag}")
        extra += [flag, value]
    if autotune:
        extra += ["--autotune", str(autotune)]
    policy_list = parse_policies(policies, subject.kind)
    build_for = build_target(subject, arch, gpu, option)
    return RunOptions(subject, build_for, arch, tuple(ms), tuple(policy_list) if policy_list else None,
                      tuple(extra), repeats, warmup, jobs, cutlass_dir, results, force)


CONV_RUN_PREHEAT_S = "0.5"  # run of a conv chain: the bench's untimed seconds per variant before timing


def _conv_run_options(subject: Subject, m: str | None, policies: str | None, batch: str | None, cache: str | None,
                      autotune: int, repeats: int, warmup: int, arch: str | None, gpu: str | None, option: str,
                      jobs: int | None, cutlass_dir: Path | None, results: Path | None, force: bool) -> RunOptions:
    """A conv chain: its run-time size is the batch (images); the bench checks it (bitwise against back to
    back, a reference convolution per stage) and times back to back, the overlap and run() after autotune()."""
    for flag, value, why in (("--m", m, "a conv chain's run-time size is the batch: pass --batch 1,8"),
                             ("--cache", cache, "a conv chain has no KV cache"),
                             ("--policies", policies, "a conv chain's stages sync by image rows (Conv2D); run() "
                                                      "picks back to back, chained or the overlap per batch"),
                             ("--autotune", autotune or None, "the conv bench always times run()'s modes first")):
        if value is not None:
            raise UsageError(f"{flag} does not apply to a conv chain: {why}", hint=f"drop {flag}")
    extra = ["--preheat", CONV_RUN_PREHEAT_S]
    if batch is not None:
        extra += ["--batch", ",".join(str(b) for b in parse_ms(batch, "--batch"))]
    build_for = build_target(subject, arch, gpu, option)
    return RunOptions(subject, build_for, arch, (), None, tuple(extra), repeats, warmup, jobs, cutlass_dir, results,
                      force)


def layer_shapes(ms: list[int], batch: str | None, cache: str | None) -> list[str]:
    """The sm90 attention bench's shapes for run: every (--m, --batch, --cache). M new tokens per sequence:
    M = 1 is a generation step (`g:B+L`, the split-KV decode), more a prompt (`p:BxM+L`); the cache is
    each sequence's cached tokens (default 0), the batch the sequences (default 1)."""
    from cusync_gen.spec.limits import MAX_M

    batches = parse_ms(batch or "1", "--batch")
    caches = parse_ms(cache or "0", "--cache", minimum=0)
    count = len(ms) * len(batches) * len(caches)
    if count > MAX_LAYER_SHAPES:
        raise UsageError(f"--m x --batch x --cache make {count} shapes, more than {MAX_LAYER_SHAPES}",
                         hint="run fewer values per option, or run several times")
    shapes = []
    for m in ms:
        for b in batches:
            if b * m > MAX_M:
                raise UsageError(f"--batch {b} x --m {m} is {b * m} rows, more than {MAX_M}",
                                 hint="use a smaller --batch or --m")
            for c in caches:
                if b * (c + m) > MAX_LAYER_TOKENS:
                    raise UsageError(f"--batch {b} x (--cache {c} + --m {m}) is {b * (c + m)} tokens in the KV "
                                     f"cache, more than {MAX_LAYER_TOKENS}",
                                     hint="use a smaller --batch or --cache")
                shapes.append(f"g:{b}+{c}" if m == 1 else f"p:{b}x{m}+{c}")
    return shapes


_LAYER_SHAPE = re.compile(r"^(?:p:(\d+)x(\d+(?:/\d+)*)|g:(\d+))\+(\d+(?:/\d+)*)$")


def layer_shape_list(text: str) -> list[str]:
    """`--shapes`: the sm90 attention bench's shapes, comma-separated. `p:BxT+L` is a prompt of B sequences of
    T new tokens after L cached ones, `g:B+L` a generation step (one new token per sequence); T and L are one
    value, or B values joined by '/' (sequences with their own prompt lengths and caches):
    p:3x7/200/1000+0/511/4097, g:4+0/9/511/4097. Bounded like --m x --batch x --cache."""
    from cusync_gen.spec.limits import MAX_M

    example = "e.g. --shapes p:1x1024+0,p:3x7/200/1000+0/511/4097,g:8+4096"
    if len(text) > MAX_SHAPES_TEXT:
        raise UsageError(f"--shapes is {len(text)} characters long, more than {MAX_SHAPES_TEXT}", hint=example)
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise UsageError("--shapes is empty", hint=example)
    if len(items) > MAX_LAYER_SHAPES:
        raise UsageError(f"--shapes gives {len(items)} shapes, more than {MAX_LAYER_SHAPES}",
                         hint="run fewer shapes, or run several times")
    for item in items:
        match = _LAYER_SHAPE.match(item)
        if match is None:
            raise UsageError(f"--shapes: {item[:80]!r} is not p:BxT+L or g:B+L (T and L: one number, or one per "
                             "sequence joined by '/')", hint=example)
        batch = int(match.group(1) or match.group(3))
        tokens = [int(v) for v in match.group(2).split("/")] if match.group(2) else [1]
        caches = [int(v) for v in match.group(4).split("/")]
        if batch < 1 or batch > MAX_M:
            raise UsageError(f"--shapes: {item[:80]!r} has batch {batch}", hint=f"use 1 to {MAX_M} sequences")
        for what, values in (("new-token counts", tokens), ("cache lengths", caches)):
            if len(values) not in (1, batch):
                raise UsageError(f"--shapes: {item[:80]!r} gives {len(values)} {what} for {batch} sequences",
                                 hint="give one value, or one per sequence")
        tokens_of = tokens * batch if len(tokens) == 1 else tokens
        caches_of = caches * batch if len(caches) == 1 else caches
        if min(tokens_of) < 1:
            raise UsageError(f"--shapes: {item[:80]!r} has a sequence of 0 new tokens", hint="every sequence needs >= 1")
        if sum(tokens_of) > MAX_M:
            raise UsageError(f"--shapes: {item[:80]!r} is {sum(tokens_of)} rows, more than {MAX_M}",
                             hint="use fewer sequences or new tokens")
        # the caches hold batch x (longest cache + longest prompt) tokens (the bench's capacity)
        held = batch * (max(caches_of) + max(tokens_of))
        if held > MAX_LAYER_TOKENS:
            raise UsageError(f"--shapes: {item[:80]!r} needs {held} tokens of KV cache, more than {MAX_LAYER_TOKENS}",
                             hint="use fewer sequences or shorter caches")
    return items


@dataclass(frozen=True)
class TraceOptions:
    record: Path | None    # a .jsonl recorded earlier: draw it, run nothing
    subject: Subject | None
    target: str | None
    generate_target: str | None
    m: int | None          # the rows (GEMM chains) or images (conv chains) to trace; None: a record's first
    picture: Path
    force: bool
    jobs: int | None
    cutlass_dir: Path | None


def trace_options(target: str, m: str | None, picture: Path, arch: str | None, project: Path | None, force: bool,
                  jobs: int | None, cutlass_dir: Path | None, gpu: str | None,
                  option: str = "--target", batch: str | None = None) -> TraceOptions:
    """`m` (--m: a GEMM chain's rows) or `batch` (--batch: a conv chain's images), at most one of them; a
    subject to run takes its default (M = 1024, batch 8) where neither is given."""
    if m is not None and batch is not None:
        raise UsageError("--m and --batch: give one (--m for a GEMM chain's rows, --batch for a conv chain's images)",
                         hint="e.g. --m 1024, or --batch 8")
    size = parse_count(m, "--m") if m is not None else parse_count(batch, "--batch", example=8) if batch else None
    arch = parse_target(arch, option)
    check_range(jobs, "--jobs", 1, MAX_JOBS)
    check_output_file(picture, "-o", "trace.png")
    if picture.suffix.lower() not in PICTURE_SUFFIXES:  # matplotlib picks the format by the suffix
        raise UsageError(f"-o {picture}: {shown(picture.suffix)} is not a picture format trace writes",
                         hint=f"use one of {', '.join(PICTURE_SUFFIXES[1:])} (none: .png), e.g. -o trace.png")
    for path in (picture.with_suffix(".json"), picture.with_suffix(".jsonl")):  # written beside it
        check_output_file(path, "-o", "trace.png")
    if target.endswith(".jsonl"):  # a trace recorded earlier (load_trace refuses a FIFO, a folder, ...)
        return TraceOptions(Path(target), None, None, None, size, picture, force, jobs, cutlass_dir)
    subject = subject_of(target, project)
    if subject.kind == "attention":
        raise UsageError("tile traces are recorded by GEMM and conv chains, not yet by the attention chain",
                         "trace a GEMM or conv chain spec, e.g. gpt3_mlp_sm90 or resnet_block_sm90")
    if subject.kind == "conv" and m is not None:
        raise UsageError(f"--m does not apply to a conv chain ({subject.spec or subject.project})",
                         hint="pass the images to trace with --batch, e.g. --batch 8")
    if subject.kind != "conv" and batch is not None:
        raise UsageError(f"--batch applies to conv chains; {subject.spec or subject.project} is a GEMM chain",
                         hint="pass its rows with --m, e.g. --m 1024")
    if size is None:
        size = 8 if subject.kind == "conv" else 1024
    return TraceOptions(None, subject, build_target(subject, arch, gpu, option), arch, size, picture, force,
                        jobs, cutlass_dir)


@dataclass(frozen=True)
class TuneOptions:
    spec: Path
    loaded: Any             # the parsed ChainSpec
    choices: dict[str, list[tuple[int, int, int]]]  # --tiles, counted against tune.MAX_VARIANTS
    ms: tuple[int, ...]
    m_text: str
    orders: tuple[str, ...] | None
    repeats: int
    warmup: int
    rounds: int
    work_dir: Path
    write: Path
    target: str | None
    jobs: int | None
    cutlass_dir: Path | None


def tune_options(spec: str, m: str, tiles: list[str] | None, orders: str | None, repeats: int, warmup: int,
                 rounds: int, work_dir: Path, write: Path | None, arch: str | None, jobs: int | None,
                 cutlass_dir: Path | None, option: str = "--target") -> TuneOptions:
    from cusync_gen import tune
    from cusync_gen.spec.loading import parse_spec, read_spec_data
    from cusync_gen.spec.model import AttentionSpec

    ms = parse_ms(m)
    for value, name, top in ((repeats, "--repeats", MAX_COUNT), (warmup, "--warmup", MAX_COUNT),
                             (rounds, "--rounds", MAX_COUNT), (jobs, "--jobs", MAX_JOBS)):
        check_range(value, name, 1, top)
    arch = parse_target(arch, option)
    choices = parse_tiles(tiles or [])
    check_output_dir(work_dir, "--work-dir")
    spec_path = resolve_spec(spec)
    loaded = parse_spec(read_spec_data(spec_path), source=str(spec_path))  # read once: tuned is what was checked
    if type(loaded).__name__ == "ConvChainSpec":
        raise UsageError("tune works on GEMM chains (stages:) for now", "for a conv chain, time versions of the spec "
                         "with different tiles through its bench (<name>_bench --batch ...)")
    if isinstance(loaded, AttentionSpec):
        raise UsageError("tune works on GEMM chains (stages:) for now", "for attention, time versions of the spec "
                         "with `cusync-gen run` by hand")
    if arch is not None:
        check_runs_on(loaded.arch.value, arch, option, str(spec_path))
    order_list = tuple(o.strip() for o in orders.split(",")) if orders else None
    for o in order_list or ():
        if o not in tune.orders(loaded.arch):
            raise UsageError(f"--orders: {o!r} is not an order of arch {loaded.arch.value}",
                             f"use some of: {','.join(tune.orders(loaded.arch))}")
    # next to the user's spec file; never into the shipped examples (a folder named like one is not the spec)
    dest = write or (spec_path.with_name(spec_path.stem + ".tuned.yaml") if spec_path == Path(spec)
                     else Path(f"{loaded.name}.tuned.yaml"))
    own = (spec_path, work_dir / f"tune-{loaded.name}.png", work_dir / f"tune-{loaded.name}.jsonl")
    check_output_file(dest, "--write", f"{loaded.name}.tuned.yaml", keep=own)
    tune.check_choices(loaded, choices)  # stage names and the number of combinations, before any work
    return TuneOptions(spec_path, loaded, choices, tuple(ms), m, order_list, repeats, warmup, rounds, work_dir,
                       dest, arch, jobs, cutlass_dir)


@dataclass(frozen=True)
class FetchOptions:
    dest: Path
    wheel: Path | None
    force: bool


def fetch_options(wheel: Path | None, dest: Path | None, force: bool) -> FetchOptions:
    if wheel is not None:
        if not wheel.is_file():
            raise UsageError(f"--wheel {wheel}: no such file", hint="pass the nvidia-cutlass .whl you downloaded, "
                             "or drop --wheel to download it")
        if wheel.suffix != ".whl":
            raise UsageError(f"--wheel {wheel} is not a .whl file", hint="pass the downloaded nvidia_cutlass-*.whl")
    target = dest or paths.default_cutlass_dir()
    check_output_dir(target, "--dest")
    return FetchOptions(target, wheel, force)
