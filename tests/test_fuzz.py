"""Fuzzing specs and the command line (issue 9): every input gives one clean error or a valid project.

For every input the fuzzer builds, the outcome must be one of two things:

- a CusyncError whose message and hint are one line each (the CLI prints them as one `error:` line and a
  hint, with exit code 1 or 2; 3 for "no GPU"), or
- a valid project (`generate --check` finds it complete) in the target folder,

and never a traceback, never a hang (each in-process example runs under a SIGALRM bound, each CLI
subprocess under a timeout), and never a write outside the target: an audit hook records every file
system write of the in-process runs and each must be inside the target (or its lock and staging
siblings), and a snapshot of the tmp folder (sentinel files beside and above the target) must be
unchanged outside it.

Inputs: mutations of the parsed shipped examples (keys dropped, duplicated, renamed; values replaced by
extreme or wrong-typed ones; stage names that collide with file names; more stages than the runtime
holds; shared subtrees, which YAML writes as aliases), raw text mutations of the example files
(truncations, inserted bytes, deep nesting, anchors and aliases, complex keys), and hostile command-line
arguments for validate, generate, run, trace, init and fetch-cutlass.

Deterministic in CI (the `fuzz` profile derandomizes); `CUSYNC_FUZZ=long` draws fresh random inputs and
`CUSYNC_FUZZ_SCALE=N` runs N times as many examples, for hunting bugs locally.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import REPO
from test_write_safety import snapshot
from cusync_gen import build, cli, render
from cusync_gen.attention_plan import AttentionPlan, AttentionShape
from cusync_gen.conv_plan import ConvPlan
from cusync_gen.verify_conv import verify_conv
from cusync_gen.errors import CusyncError
from cusync_gen.spec import MAX_M, MAX_STAGES, load_spec, parse_spec
from cusync_gen.verify import verify
from cusync_gen.verify_attention import verify_attention

with contextlib.suppress(ImportError):  # trace draws with it: imported once here, not inside a time bound
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

EXAMPLES_DIR = REPO / "cusync_gen" / "examples"
EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml"))
TEXTS = {name: (EXAMPLES_DIR / f"{name}.yaml").read_text() for name in EXAMPLES}
PARSED = {name: yaml.safe_load(text) for name, text in TEXTS.items()}

settings.register_profile(
    "fuzz", derandomize=True, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.large_base_example],
)
settings.register_profile("fuzz-long", settings.get_profile("fuzz"), derandomize=False)
PROFILE = settings.get_profile("fuzz-long" if os.environ.get("CUSYNC_FUZZ") == "long" else "fuzz")
SCALE = int(os.environ.get("CUSYNC_FUZZ_SCALE", "1"))


def fuzz(examples: int) -> settings:
    return settings(PROFILE, max_examples=examples * SCALE)


IN_PROCESS_BOUND_S = 8.0   # no in-process example may run longer (they take 10-100 ms)
SUBPROCESS_BOUND_S = 30.0  # a CLI subprocess (start-up included, on a loaded 2-core CI machine)


# --------------------------------------------------------------------------------------------------
# Harness: a wall-clock bound, an audit of every write, snapshots, the error shape


class Hang(Exception):
    """An in-process call ran past IN_PROCESS_BOUND_S. An Exception, so Hypothesis shrinks and reports the
    input (cusync_gen has no `except Exception` that could swallow it), not a CusyncError."""


@contextlib.contextmanager
def time_bound(seconds: float = IN_PROCESS_BOUND_S) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_WRITES: list[tuple[str, str]] | None = None  # (event, absolute path) while a run is watched
_WRITE_EVENTS = {"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "shutil.rmtree", "os.chmod",
                 "os.symlink", "os.link", "os.truncate", "os.utime", "shutil.copyfile", "shutil.copymode",
                 "shutil.copystat", "shutil.move", "os.chown"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NO_FD = (None, -1)  # dir_fd not given (os functions pass -1, shutil None)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WRITES is None or event not in _WRITE_EVENTS:
        return
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        paths = [path] if writes else []
    elif event in ("os.rename", "os.replace", "os.link"):  # (src, dst, src_dir_fd, dst_dir_fd)
        paths = list(args[:2]) if args[2] in _NO_FD and args[3] in _NO_FD else []
    elif event in ("shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.move"):  # (src, dst, ...)
        paths = [args[1]]
    elif event == "os.symlink":  # (src, dst, dir_fd)
        paths = [args[1]] if args[2] in _NO_FD else []
    elif event == "os.truncate":  # (path, length)
        paths = [args[0]]
    else:  # (path, ..., dir_fd); a name relative to a dir_fd is inside a folder shutil.rmtree was given
        paths = [args[0]] if args[-1] in _NO_FD else []
    for path in paths:
        if isinstance(path, (str, bytes, os.PathLike)):
            _WRITES.append((event, os.path.abspath(os.fsdecode(path))))


sys.addaudithook(_audit)


@contextlib.contextmanager
def watched_writes() -> Iterator[list[tuple[str, str]]]:
    """Record the (event, absolute path) of every file system write inside the block."""
    global _WRITES
    _WRITES = []
    try:
        yield _WRITES
    finally:
        _WRITES = None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_SIBLING = re.compile(r"\.?(?P<name>.+?)(\.lock|\.cusync-(new|old|kept|tmp)-[0-9a-f]{8})", re.DOTALL)


def allowed_write(path: str, targets: list[str]) -> bool:
    """Inside a target; a target's lock file or staging/aside sibling (or inside one); a folder above a
    target (created with parents=True)."""
    for target in targets:
        parent, name = os.path.split(target)
        if _within(path, target):
            return True
        if _within(path, parent) and path != parent:
            first = path[len(parent) + 1:].split("/")[0]
            match = _SIBLING.fullmatch(first)
            if match and match.group("name") == name:
                return True
        if _within(target, path):  # a parent folder of the target
            return True
    return False


def assert_writes_inside(writes: list[tuple[str, str]], targets: list[Path]) -> None:
    roots = [os.path.abspath(t) for t in targets]
    bad = [(event, path) for event, path in writes if not allowed_write(path, roots)]
    assert not bad, f"writes outside {roots}: {bad[:5]}"


def assert_unchanged_outside(before: dict[str, bytes | str], after: dict[str, bytes | str], root: Path,
                             targets: list[Path]) -> None:
    """Nothing under `root` changed except inside `targets` (and the folders above them)."""
    roots = [os.path.abspath(t) for t in targets]

    def outside(rel: str) -> bool:
        path = os.path.abspath(root / rel)
        return not any(_within(path, t) or _within(t, path) for t in roots)

    changed = sorted(rel for rel in set(before) | set(after) if outside(rel) and before.get(rel) != after.get(rel))
    assert not changed, f"changed outside {roots}: {changed[:5]}"


def assert_clean_error(err: CusyncError) -> None:
    """What the CLI prints for it is one `error:` line and one hint line."""
    message, hint = str(err.message), str(err.hint or "")
    for text in (message, hint):
        assert "\n" not in text and "\r" not in text, f"not one line: {text!r}"
        assert len(text) < 2000, f"{len(text)} characters: {text[:200]!r}..."
    assert message.strip(), "an empty error message"
    assert err.exit_code in (1, 2), err


def assert_valid_project(spec_path: Path, out: Path, target: str | None) -> None:
    render.generate(spec_path, out, target, check=True)  # GeneratedDiffers (a test failure) when incomplete
    manifest = json.loads((out / "manifest.json").read_text())
    for rel in manifest["files"]:
        path = (out / rel).resolve()
        assert _within(str(path), str(out.resolve())), rel


# --------------------------------------------------------------------------------------------------
# Inputs: mutations of the shipped examples

HUGE_INTS = [0, -1, 1, 7, 8, 9, 16, 255, 256, 257, 4096, (1 << 17), (1 << 17) + 1, MAX_M, MAX_M + 1,
             (1 << 31) - 1, 1 << 31, 1 << 32, 1 << 63, 1 << 64, -(1 << 63), 10 ** 30, 10 ** 4000]
WEIRD_STRINGS = ["", " ", "\n", "a\nb", "gemm1\n", "gemm1 ", "é", "ÿ", "名前", "\u202e", "\x00", "\x1b[31m", ")\"",
                 '");', "..", "../x", "/", "/etc/passwd", "a/b", "a\\b", "a.b", "${x}", "{{ x }}", "{% raw %}", "%s",
                 "x" * 64, "x" * 65, "x" * 10_000, "nan", "null", "true", "0x10", "1e3", "~", "CON", "int", "half",
                 "input", "stages", "manifest", "CMakeLists", "README", "build", "Gemm1", "GEMM1", "_", "__x", "1abc"]
COLLIDING_NAMES = ["stage_gemm1", "gemm1_stock", "x_stock", "stage_x", "x", "stage_stage_x", "gemm1", "gemm2",
                   "manifest", "readme", "cmakelists", "reference", "baselines", "include", "src", "bench",
                   "stages", "two_gemm", "two_gemm_stages", "two_gemm_bench", "softmax", "stage_softmax", "cusync",
                   "attention_reference", "Stage_x", "X_STOCK", "a" * 64, "b" * 65]
FIELD_KEYS = sorted({"name", "arch", "target", "dtype", "stages", "op", "a", "b", "n", "k", "tile", "threadblock",
                     "warp", "instruction", "cluster", "schedule", "sync", "sync_b", "reads", "cols", "halo",
                     "strided", "count", "epilogue", "order", "b_layout", "split_k", "sms", "optimizations",
                     "tile_configs", "m_max", "tiles", "attention", "hidden", "heads", "head_dim", "causal", "qkv",
                     "scores", "pv", "proj", "no_atomic_add", "avoid_wait_kernel", "avoid_custom_order",
                     "reorder_tile_loads"})


def _values_by_key(node: Any, into: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Every value the examples give each key (near-valid replacements reach the deeper rules)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if value not in into.setdefault(key, []):
                into[key].append(copy.deepcopy(value))
            _values_by_key(value, into)
    elif isinstance(node, list):
        for item in node:
            _values_by_key(item, into)
    return into


VALID_BY_KEY: dict[str, list[Any]] = {}
for _data in PARSED.values():
    _values_by_key(_data, VALID_BY_KEY)
VALID_BY_KEY.setdefault("sync", []).extend(["tile", "row", "strided", "none", "auto"])
VALID_BY_KEY.setdefault("op", []).extend(["gemm", "swiglu"])
VALID_BY_KEY["reads"] = [{"cols": "k_range"}, {"cols": "same", "halo": 1}, {"cols": {"strided": 1408, "count": 2}}]
VALID_BY_KEY["tile_configs"] = [[{"m_max": 256, "tiles": {"gemm1": [128, 64, 64]}}],
                                [{"m_max": 0, "tiles": {}}] * 9]

scalars = st.one_of(
    st.sampled_from(HUGE_INTS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(WEIRD_STRINGS),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(FIELD_KEYS) | st.text(max_size=6), children, max_size=3)),
    max_leaves=8,
)


def _slots(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every value in the tree (mapping keys and list indices)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*path, key))
            out += _slots(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append((*path, i))
            out += _slots(value, (*path, i))
    return out


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated_data(draw: st.DrawFn) -> Any:
    """A shipped example, parsed, with one to four mutations."""
    data = copy.deepcopy(PARSED[draw(st.sampled_from(EXAMPLES))])
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(data)
        if not slots or not isinstance(data, dict):
            break
        path = draw(st.sampled_from(slots))
        parent, key = _at(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(["valid", "valid", "replace", "delete", "rename", "share", "wrap", "name",
                                   "stages", "stages", "add_key"]))
        if op == "valid":  # a value another example gives a key of this name: passes the types, tests the rules
            name = key if isinstance(key, str) else path[-2] if len(path) > 1 and isinstance(path[-2], str) else ""
            if VALID_BY_KEY.get(name):
                parent[key] = copy.deepcopy(draw(st.sampled_from(VALID_BY_KEY[name])))
        elif op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            new = draw(st.sampled_from(FIELD_KEYS) | st.sampled_from(WEIRD_STRINGS))
            parent[new] = parent.pop(key)
        elif op == "share":  # the same object twice: yaml.safe_dump writes an anchor and an alias
            other = draw(st.sampled_from(slots))
            if other[: len(path)] != path and path[: len(other)] != other:
                _at(data, other[:-1])[other[-1]] = parent[key]
        elif op == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}, [[[parent[key]]]]]))
        elif op == "name":  # names that collide with the generated file names
            stages = data.get("stages") if isinstance(data.get("stages"), list) else []
            names = COLLIDING_NAMES + [f"stage_{s.get('name')}" for s in stages if isinstance(s, dict)] + \
                [f"{s.get('name')}_stock" for s in stages if isinstance(s, dict)]
            if stages and draw(st.booleans()):
                stage = draw(st.sampled_from(stages))
                if isinstance(stage, dict):
                    stage["name"] = draw(st.sampled_from(names))
            else:
                data["name"] = draw(st.sampled_from(names))
        elif op == "stages" and isinstance(data.get("stages"), list) and data["stages"]:
            count = draw(st.sampled_from([MAX_STAGES - 1, MAX_STAGES, MAX_STAGES + 1, 40]))
            stages = data["stages"]
            last = stages[-1]
            while len(stages) < count and isinstance(last, dict):  # a longer chain of copies of the last stage
                new = copy.deepcopy(last)
                new["name"] = f"s{len(stages)}"
                if new.get("op") == "gemm" and isinstance(last.get("n"), int):
                    new.update(a=last.get("name"), sync="row", k=last["n"])
                stages.append(new)
                last = new
        elif op == "add_key" and isinstance(parent, dict):
            parent[draw(st.sampled_from(FIELD_KEYS))] = draw(values)
    return data


def dump(data: Any, how: str) -> str:
    if how == "json":
        return json.dumps(data)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=how == "yaml-unicode", width=10 ** 6)


@st.composite
def mutated_text(draw: st.DrawFn, as_json: bool = False) -> bytes:
    """A shipped example file (or its JSON) with one to three raw mutations (may not be YAML any more)."""
    name = draw(st.sampled_from(EXAMPLES))
    text = json.dumps(PARSED[name], indent=draw(st.sampled_from([None, 2]))).encode() if as_json else TEXTS[name].encode()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["truncate", "bytes", "nest", "alias", "complex_key", "line", "junk"]))
        if op == "truncate":
            text = text[:at]
        elif op == "bytes":
            text = text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]
        elif op == "nest":
            depth = draw(st.sampled_from([5, 31, 33, 100, 5000]))
            opening, closing = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("- ", "")]))
            text = text[:at] + (opening * depth).encode() + b"1" + (closing * depth).encode() + text[at:]
        elif op == "alias":
            snippet = draw(st.sampled_from([
                b"&a [1, 2]", b"*a", b"*undefined", b"&a [*a]", b"&x 128",
                b"&l [&k [&j [1, 1, 1], *j, *j], *k, *k]",
                b"\nx: &a [1,1,1,1,1,1,1,1,1,1]\ny: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                b"z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nw: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n",
                b"<<: *a", b"!!python/object:os.system [ls]", b"!!binary aGVsbG8=", b"!!set {a, b}",
                b"!!omap [a: 1, b: 2]", b"!!timestamp 2001-12-14", b"!!float 1e400",
            ]))
            text = text[:at] + snippet + text[at:]
        elif op == "complex_key":
            snippet = draw(st.sampled_from([b"\n? [a, b]\n: 1\n", b"\n? {a: 1}\n: 2\n", b"\n1: x\n", b"\nnull: x\n",
                                            b"\ntrue: x\n", b"\n1.5: x\n", b"\n? |\n  x\n: 3\n"]))
            text = text[:at] + snippet + text[at:]
        elif op == "line":
            lines = text.split(b"\n")
            i = draw(st.integers(0, max(0, len(lines) - 1)))
            lines.insert(i, lines[i] if lines else b"")  # a duplicated line: a duplicate key, most often
            text = b"\n".join(lines)
        else:
            text = text[:at] + draw(st.sampled_from([b"\t", b"\r", b"\xef\xbb\xbf", b"\x00", b"%YAML 1.1\n---\n",
                                                     b"\n---\n", b"\n...\n", b":", b"- ", b"'", b'"', b"#"]))\
                + text[at:]
    return text


# --------------------------------------------------------------------------------------------------
# The in-process pipeline: load, plan, verify, describe, render into a tmp folder

TARGET_STATES = ["absent", "absent", "empty", "project", "foreign", "file"]


def prepare_root(root: Path, state: str, project: Path) -> Path:
    """root/{sentinel.txt, sibling/, out} with `out` in the given state; returns out."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "sentinel.txt").write_text("parent sentinel")
    (root / "sibling").mkdir()
    (root / "sibling" / "keep.txt").write_text("sibling sentinel")
    (root / ".out.lock.txt").write_text("looks like a lock, is not one")
    out = root / "out"
    if state == "empty":
        out.mkdir()
    elif state == "project":
        shutil.copytree(project, out)
    elif state == "foreign":
        out.mkdir()
        (out / "mine.txt").write_text("a user's file")
    elif state == "file":
        out.write_text("a file where the folder goes")
    return out


def run_pipeline(spec_path: Path, root: Path, state: str, force: bool, target: str | None) -> str:
    """Everything validate and generate do with a spec, under a time bound and the write audit.
    Returns "project" or "error" (after checking the error's shape and what is on disk)."""
    out = root / "out"
    before = snapshot(root)
    with time_bound(), watched_writes() as writes:
        try:
            spec = load_spec(spec_path)
            plan = render.plan_of_spec(spec, target)
            render.output_files(plan)
            if isinstance(plan, AttentionPlan):
                for shape in (AttentionShape(1, 1, 0), AttentionShape(4, 1, 1023), AttentionShape(1, 2048, 0),
                              AttentionShape(1, MAX_M, MAX_M)):
                    with contextlib.suppress(CusyncError):  # shapes this spec's tiles do not take
                        plan.describe(shape)
                        verify_attention(plan, shape)
            elif isinstance(plan, ConvPlan):
                for batch in sorted({1, plan.max_batch}):
                    plan.describe(batch)
                    verify_conv(plan, batch)
            else:
                for m in (1, 777, MAX_M):
                    plan.describe(m)
                    verify(plan, m)
            render.generate(spec_path, out, target, force=force)
        except CusyncError as err:
            note(f"error: {err.message} / hint: {err.hint}")
            assert_clean_error(err)
            outcome = "error"
        else:
            outcome = "project"
    assert_writes_inside(writes, [out])
    after = snapshot(root)
    assert_unchanged_outside(before, after, root, [out])
    if outcome == "project":
        assert state in ("absent", "empty", "project") or (state == "foreign" and force), state
        assert_valid_project(spec_path, out, target)
        if state == "foreign":
            assert (out / "mine.txt").read_text() == "a user's file"
    else:  # refused (the spec, or the folder): the target is as it was
        assert {k: v for k, v in after.items() if k == "out" or k.startswith("out/")} == \
            {k: v for k, v in before.items() if k == "out" or k.startswith("out/")}
    return outcome


@pytest.fixture(scope="module")
def old_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project of another example (so a generate replaces it): what "project" targets start from."""
    return render.generate(EXAMPLES_DIR / "llama_mlp.yaml", tmp_path_factory.mktemp("old") / "llama_mlp")


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="cusync-fuzz-")).resolve()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@fuzz(150)
@given(data=mutated_data(), how=st.sampled_from(["yaml", "yaml-unicode", "json", "parse"]),
       state=st.sampled_from(TARGET_STATES), force=st.booleans(),
       target=st.sampled_from([None, None, None, "sm_90", "sm_80", "sm_100", ""]))
def test_mutated_specs(data: Any, how: str, state: str, force: bool, target: str | None, old_project: Path) -> None:
    with scratch() as root:
        if how == "parse":  # the model and rules directly, with Python values no file could hold
            with time_bound():
                try:
                    parse_spec(copy.deepcopy(data))
                except CusyncError as err:
                    assert_clean_error(err)
            how = "yaml"
        suffix = ".json" if how == "json" else ".yaml"
        spec_path = root / f"spec{suffix}"
        spec_path.write_text(dump(data, how))
        prepare_root(root / "t", state, old_project)
        run_pipeline(spec_path, root / "t", state, force, target)


@fuzz(120)
@given(data=st.data(), suffix=st.sampled_from([".yaml", ".yaml", ".yml", ".json"]),
       state=st.sampled_from(TARGET_STATES), force=st.booleans())
def test_mutated_spec_text(data: st.DataObject, suffix: str, state: str, force: bool, old_project: Path) -> None:
    text = data.draw(mutated_text(as_json=suffix == ".json"), label="text")
    with scratch() as root:
        spec_path = root / f"spec{suffix}"
        spec_path.write_bytes(text)
        prepare_root(root / "t", state, old_project)
        run_pipeline(spec_path, root / "t", state, force, None)


# --------------------------------------------------------------------------------------------------
# The command line, in process (fast) and as a subprocess (the real entry point, a hard timeout)

M_VALUES = ["1", "0", "-1", "", " ", ",", "1,,2", "256,1024", "1,256,1024", "512", "1023", str(MAX_M), str(MAX_M + 1),
            str(1 << 31), "9" * 5000, "١٢٣", "²", "1e3", "0x10", " 8", "+8", "1_000", "nan", "1.5", "00000001",
            "8\n", "8\x00", "--force", "-o"]
PATHS = ["out", "out/sub", "new", "sentinel.txt", "sentinel.txt/x", ".", "..", "", "sibling", "sibling/keep.txt",
         "../sibling", "../out2", "out\nx", "out\x01", "ü/out", "x" * 300, "out/" + "y" * 300, "-x", "~", "./",
         "../sentinel.txt", "generated", "proj"]
SPEC_ARGS = ["two_gemm", "gpt3_attention", "llama_mlp_split", "two_gemm_sm90", "spec.yaml", "nope.yaml", "nope",
             "sibling", "", "-", "sentinel.txt", "spec\n.yaml", "../spec.yaml", "proj", "trace.jsonl", "bad.jsonl"]
TARGET_ARGS = ["sm_80", "sm_90", "sm_100", "", "sm_9\n0", "\x1b[31m", "x" * 200, "sm80"]
TRACE_ROW = {"m": 256, "mode": "sequential", "stage": "gemm1", "tile_m": 0, "tile_n": 0, "sm": 0, "taken_us": 0.0,
             "stored_us": 1.0}
FAKE_ROW = {"m": 256, "policy": "row", "sequential_us": 130.5, "overlapped_us": 110.25, "speedup": 1.18,
            "bitwise_equal": True, "ref_rel_err": 1.5e-4, "sync_error": None, "graph_ok": True}

text_args = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """One command line of validate, generate, run, trace, init or fetch-cutlass, with hostile values."""
    def pick(values: list[str]) -> str:
        return draw(st.sampled_from(values) | text_args) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(values))

    def maybe(*option: str, values: list[str]) -> list[str]:
        return [*option, pick(values)] if draw(st.booleans()) else []

    command = draw(st.sampled_from(["validate", "generate", "run", "trace", "init", "fetch-cutlass"]))
    args = [command]
    if command == "validate":
        args += [pick(SPEC_ARGS), *maybe("--m", values=M_VALUES), *maybe("--batch", values=M_VALUES),
                 *maybe("--cache", values=M_VALUES), *maybe("--target", values=TARGET_ARGS)]
    elif command == "generate":
        args += [pick(SPEC_ARGS), "-o", pick(PATHS), *maybe("--target", values=TARGET_ARGS)]
        args += draw(st.sampled_from([[], [], ["--force"], ["--check"]]))
    elif command in ("run", "trace"):
        args += [pick(SPEC_ARGS), *maybe("--m", values=M_VALUES), *maybe("--arch", values=TARGET_ARGS),
                 *maybe("--jobs", values=M_VALUES), *maybe("--cutlass-dir", values=PATHS)]
        if command == "run":
            args += [*maybe("--batch", values=M_VALUES), *maybe("--cache", values=M_VALUES),
                     *maybe("--repeats", values=M_VALUES), *maybe("--warmup", values=M_VALUES),
                     *maybe("--policies", values=["row", "row,tile", "", ",", "a b", "ü"]),
                     *maybe("-o", values=PATHS), *maybe("--out", values=PATHS)]
        else:
            args += [*maybe("-o", values=PATHS + ["t.png", "sub/t.png", "t"]), *maybe("--project", values=PATHS)]
        args += draw(st.sampled_from([[], ["--force"]]))
    elif command == "init":
        args += draw(st.sampled_from([[pick(SPEC_ARGS)], [pick(SPEC_ARGS)], ["--list"], []]))
        args += [*maybe("-o", values=PATHS + ["x.yaml", "sub/x.yaml"])] + draw(st.sampled_from([[], ["--force"]]))
    else:  # never a download: always a (fake) wheel, and a --dest in the tmp folder
        args += ["--wheel", draw(st.sampled_from(["fake.whl", "nope.whl", "sibling", "sentinel.txt"])),
                 "--dest", pick(PATHS)] + draw(st.sampled_from([[], ["--force"]]))
    return args


def _option(args: list[str], *names: str) -> str | None:
    """The value of the last of `names` in `args` (None when absent)."""
    value = None
    for i, arg in enumerate(args[:-1]):
        if arg in names:
            value = args[i + 1]
    return value


def cli_targets(args: list[str], cwd: Path) -> list[Path]:
    """Where the command may write, by what its options say."""
    command = args[0]
    if command == "generate":
        return [cwd / (_option(args, "-o", "--output") or "")]
    if command == "run":
        return [cwd / (_option(args, "-o", "--output") or "generated"), *[cwd / p for p in [_option(args, "--out")] if p]]
    if command == "trace":
        png = cwd / (_option(args, "-o", "--png") or "trace.png")
        outputs = [png, png.with_name(png.name + ".png")]
        with contextlib.suppress(ValueError):
            outputs += [png.with_suffix(".json"), png.with_suffix(".jsonl")]
        return [cwd / (_option(args, "--project") or "generated"), *outputs]
    if command == "init":
        name = next((a for a in args[1:2] if not a.startswith("-")), "x")
        return [cwd / (_option(args, "-o", "--output") or f"{name}.yaml")]
    if command == "fetch-cutlass":
        return [cwd / (_option(args, "--dest") or "")]
    return []


def prepare_cli_root(root: Path, spec_text: str, project: Path) -> Path:
    """root/{sentinel.txt, sibling/, spec.yaml, cwd/{sentinel.txt, sibling/, spec.yaml, fake.whl, trace.jsonl,
    proj/ (a generated project)}}; returns root/cwd."""
    cwd = root / "cwd"
    for folder in (root, cwd):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sentinel.txt").write_text("sentinel")
        (folder / "sibling").mkdir()
        (folder / "sibling" / "keep.txt").write_text("sibling sentinel")
        (folder / "spec.yaml").write_text(spec_text)
    (cwd / "fake.whl").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: fails the sha256 check
    (cwd / "trace.jsonl").write_text(json.dumps(TRACE_ROW) + "\n" + json.dumps({**TRACE_ROW, "mode": "overlapped"}))
    (cwd / "bad.jsonl").write_text('{"m": Infinity}\n[1]\n')
    shutil.copytree(project, cwd / "proj")
    return cwd


def fake_bench_run(project: Path, ms: list[int], policies: object = None, repeats: int = 50, warmup: int = 10,
                   extra_args: list[str] = ()) -> list[dict[str, Any]]:
    """build.run without a GPU: a trace for `trace`, one row for `run`."""
    if "--trace" in extra_args:
        Path(extra_args[extra_args.index("--trace") + 1]).write_text(json.dumps({**TRACE_ROW, "m": ms[0]}) + "\n")
    return [dict(FAKE_ROW, m=m) for m in ms]


def run_cli_in_process(args: list[str], cwd: Path, gpu: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    fakes = [mock.patch.object(build, "has_gpu", lambda: gpu), mock.patch.object(build, "gpu_arch", lambda: "sm_90"),
             mock.patch.object(build, "build", lambda project, **kwargs: Path(project) / "build"),
             mock.patch.object(build, "run", fake_bench_run)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, out: str, err: str, allowed: tuple[int, ...] = (1, 2)) -> None:
    assert "Traceback" not in out + err, err
    assert code in allowed, (code, out, err)
    lines = err.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, err
    rest = lines[errors[0] + 1:]
    assert rest == [] or (len(rest) == 1 and rest[0].startswith("hint:")), f"not one error line and a hint: {err!r}"


def check_cli_outcome(args: list[str], cwd: Path, code: int, out: str, err: str) -> None:
    command = args[0]
    if code == 1 and command == "generate" and "--check" in args and "differs from what" in err:
        assert "Traceback" not in out + err  # the --check report: one line per difference
        return
    if code != 0:
        assert_one_error_line(code, out, err, (1, 2, 3, 6) if command in ("run", "trace") else (1, 2))
        return
    assert command != "fetch-cutlass", "a fake wheel was accepted"
    assert "Traceback" not in out + err
    if command == "validate":
        assert out.rstrip().endswith("OK"), out
    elif command == "generate" and "--check" not in args:
        spec = args[1]
        spec_path = cwd / spec if (cwd / spec).is_file() else EXAMPLES_DIR / f"{spec}.yaml"
        assert_valid_project(spec_path, cwd / _option(args, "-o"), _option(args, "--target"))


@pytest.fixture(scope="module")
def small_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """two_gemm, generated: the `proj` a command line may name (run and trace take it as it is)."""
    return render.generate(EXAMPLES_DIR / "two_gemm.yaml", tmp_path_factory.mktemp("proj") / "proj")


@fuzz(120)
@given(args=command_lines(), spec=mutated_data(), gpu=st.booleans())
def test_command_lines_in_process(args: list[str], spec: Any, gpu: bool, small_project: Path) -> None:
    with scratch() as root:
        cwd = prepare_cli_root(root, dump(spec, "yaml"), small_project)
        before = snapshot(root)
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(args, cwd, gpu)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        targets = cli_targets(args, cwd)
        assert_writes_inside(writes, targets)
        assert_unchanged_outside(before, snapshot(root), root, targets)
        check_cli_outcome(args, cwd, code, out, err)


# The real entry point in a subprocess, under a hard timeout. `run` and `trace` go through a launcher that
# reports no GPU and builds nothing (on a GPU machine they would build for minutes, and `run` builds without
# a GPU too); everything else is `python3 -m`.
NO_GPU_LAUNCHER = ("import sys; from cusync_gen import build, cli; build.has_gpu = lambda: False; "
                   "build.gpu_arch = lambda: None; build.build = lambda project, **kwargs: project; "
                   "cli.main(sys.argv[1:])")


def run_cli_subprocess(args: list[str], cwd: Path) -> tuple[int, str, str]:
    entry = ["-c", NO_GPU_LAUNCHER] if args[0] in ("run", "trace") else ["-m", "cusync_gen.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    try:
        proc = subprocess.run([sys.executable, *entry, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              errors="replace", timeout=SUBPROCESS_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cusync-gen {args} still running after {SUBPROCESS_BOUND_S} s")
    return proc.returncode, proc.stdout, proc.stderr


def check_cli_subprocess(args: list[str], spec_text: str, project: Path) -> None:
    with scratch() as root:
        cwd = prepare_cli_root(root, spec_text, project)
        before = snapshot(root)
        code, out, err = run_cli_subprocess(args, cwd)
        with contextlib.suppress(Exception):  # (outside a Hypothesis test there is nowhere to note)
            note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        targets = cli_targets(args, cwd)
        assert_unchanged_outside(before, snapshot(root), root, targets)
        check_cli_outcome(args, cwd, code, out, err)


HOSTILE_COMMAND_LINES = [
    ["validate", "spec.yaml", "--m", "9" * 5000],
    ["validate", "gpt3_attention", "--m", str(MAX_M), "--cache", str(MAX_M)],
    ["validate", "two_gemm", "--target", "sm_9\n0", "--batch", "²"],
    ["validate", "spec\n.yaml"],
    ["generate", "two_gemm", "-o", "sentinel.txt/x"],
    ["generate", "two_gemm", "-o", ".."],
    ["generate", "llama_mlp_split", "-o", "sibling"],
    ["generate", "two_gemm_sm90", "-o", "out\x01"],
    ["init", "two_gemm", "-o", "sibling", "--force"],
    ["trace", "bad.jsonl", "-o", "t.yaml"],
    ["run", "two_gemm", "--m", "²", "--out", "sentinel.txt/r.json"],
    ["fetch-cutlass", "--wheel", "fake.whl", "--dest", "sibling"],
    ["fetch-cutlass", "--wheel", "fake.whl", "--dest", "x" * 300],
    ["nosuchcommand"],
    ["generate", "two_gemm"],
]


@pytest.mark.parametrize("args", HOSTILE_COMMAND_LINES, ids=lambda a: " ".join(a)[:40].encode("unicode_escape").decode())
def test_hostile_command_lines_in_a_subprocess(args: list[str], small_project: Path) -> None:
    check_cli_subprocess(args, TEXTS["two_gemm"], small_project)


@fuzz(6)
@given(spec=mutated_data() | mutated_text().map(lambda b: b.decode("utf-8", "replace")),
       command=st.sampled_from([["validate", "spec.yaml", "--m", "1,1023,4096"], ["generate", "spec.yaml", "-o", "out"],
                                ["generate", "spec.yaml", "-o", "sibling", "--force"]]))
def test_mutated_specs_in_a_subprocess(spec: Any, command: list[str], small_project: Path) -> None:
    check_cli_subprocess(command, spec if isinstance(spec, str) else dump(spec, "yaml"), small_project)


# --------------------------------------------------------------------------------------------------
# Trace input, tune --tiles strings and init arguments (tests/test_safety_readers.py has one test per case
# these found): exit 0 or one `error:` line, never a traceback, within the time bound

TRACE_VALUES: list[Any] = [0, 1, -1, -1.0, 0.5, 7, 256, 1024, 131, 4096, 1e9, 1e308, -1e308, float("inf"),
                           float("-inf"), float("nan"), 10 ** 30, 2 ** 31, 2 ** 64, -(2 ** 63), True, False, None,
                           "256", "", "x" * 100, "\x00", "é", [], {}, [[[[1]]]], {"a": 1}, "sequential", "overlapped",
                           "fused", "gemm1", "gemm2"]


@st.composite
def trace_text(draw: st.DrawFn) -> bytes:
    """A few lines of a bench trace, with values replaced, keys dropped, lines cut or nested, bytes inserted."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 6))):
        row: dict[str, Any] = dict(TRACE_ROW, mode=draw(st.sampled_from(["sequential", "overlapped"])),
                                   stage=draw(st.sampled_from(["gemm1", "gemm2"])), sm=draw(st.integers(0, 131)))
        row["stored_us"] = row["taken_us"] + draw(st.sampled_from([0.0, 1.0, 150.5]))
        op = draw(st.sampled_from(["keep"] * 3 + ["replace"] * 4 + ["delete", "add", "list", "nest", "cut"]))
        key = draw(st.sampled_from([*sorted(row), "taken_us", "stored_us", "stored_us", "sm", "m"]))
        if op == "replace":
            row[key] = draw(st.sampled_from(TRACE_VALUES))
        elif op == "delete":
            del row[key]
        elif op == "add":
            row[draw(text_args)] = draw(st.sampled_from(TRACE_VALUES))
        line = json.dumps(row).encode()
        if op == "list":
            line = json.dumps(list(row.values())).encode()
        elif op == "nest":
            depth = draw(st.sampled_from([3, 5, 100, 20_000]))
            line = line[:-1] + b', "x": ' + b"[" * depth + b"]" * depth + b"}"
        elif op == "cut":
            line = line[:draw(st.integers(0, len(line)))]
        lines.append(line)
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from([b"", b"   ", b"\r", b"null", b"[", b"\xff\xfe", b"\x00"])))
    text = b"\n".join(lines)
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    return text


@fuzz(40)
@given(text=trace_text(), m=st.sampled_from(["256"] * 6 + ["1024", "1", str(MAX_M)]) | st.sampled_from(M_VALUES))
def test_trace_input(text: bytes, m: str) -> None:
    with scratch() as root:
        (root / "t.jsonl").write_bytes(text)
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(["trace", "t.jsonl", "--m", m, "-o", "t.png"], root, False)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        assert_writes_inside(writes, [root / "t.png", root / "t.json"])
        if code == 0:
            assert (root / "t.png").is_file() and (root / "t.json").is_file() and "Traceback" not in out + err
        else:
            assert_one_error_line(code, out, err, (2,))


TILE_NUMBERS = ["128", "64", "32", "256", "16", "0", "-1", "+8", "١٢٨", "²", "9" * 5000, "1e3", " 128", "128 ", "",
                "00128", "512", "0x10", "1_0", "nan", str(MAX_M + 1)]


@st.composite
def tiles_values(draw: st.DrawFn) -> list[str]:
    """--tiles values: well-formed STAGE=MxNxK[,...] lists (up to more combinations than tune takes) with at
    most one hostile piece each: a number, a stage name, a separator or a shape."""
    values = []
    for stage in ["gemm1", "gemm2"][:draw(st.sampled_from([1, 2, 2]))]:
        count = draw(st.sampled_from([1, 3, 9, 65, 600]))
        shapes = [[draw(st.sampled_from(["64", "128", "256"])), draw(st.sampled_from(["64", "128", "256"])),
                   draw(st.sampled_from(["32", "64"]))] for _ in range(count)]
        hostile = draw(st.sampled_from(["none", "none", "number", "number", "number", "stage", "shape", "sep"]))
        if hostile == "number":
            shapes[draw(st.integers(0, count - 1))][draw(st.integers(0, 2))] = draw(st.sampled_from(TILE_NUMBERS) |
                                                                                     text_args)
        elif hostile == "stage":
            stage = draw(st.sampled_from(["glu", "", " gemm1 ", "nope", "gemm1=gemm2"]) | text_args)
        elif hostile == "shape":
            shapes[draw(st.integers(0, count - 1))] = draw(st.sampled_from([["128"], ["128", "128"], [""] * 3,
                                                                            ["1"] * 4]))
        text = ",".join("x".join(shape) for shape in shapes)
        values.append(f"{stage}{draw(st.sampled_from(['=', ':', '', '=='])) if hostile == 'sep' else '='}{text}")
    return values


@fuzz(60)
@given(values=tiles_values())
def test_tune_tiles_strings(values: list[str]) -> None:
    with scratch() as root:
        args = ["tune", "two_gemm", *[a for v in values for a in ("--tiles", v)], "-o", "t"]
        with time_bound(3.0), watched_writes() as writes:  # no GPU: nothing is built or enumerated (~0.1 s)
            code, out, err = run_cli_in_process(args, root, False)
        note(f"exit {code}\nstderr: {err[-2000:]}")
        assert not writes and not (root / "t").exists()
        assert_one_error_line(code, out, err, (2, 3))


init_paths = text_args.filter(lambda p: ".." not in p.split("/") and not p.startswith("/")) | st.sampled_from(
    ["x.yaml", "sub/x.yaml", "sentinel.txt", "sentinel.txt/x", "sibling", "", ".", "x" * 300, "a\nb", "-x"])


@fuzz(60)
@given(name=st.sampled_from(EXAMPLES + ["nope", "", "--list", "../two_gemm", "two_gemm.yaml"]) | text_args,
       output=st.none() | init_paths, force=st.booleans())
def test_init_arguments(name: str, output: str | None, force: bool) -> None:
    with scratch() as root:
        cwd = root / "cwd"
        cwd.mkdir()
        (cwd / "sentinel.txt").write_text("sentinel")
        (cwd / "sibling").mkdir()
        before = snapshot(root)
        args = ["init", name, *(["-o", output] if output is not None else []), *(["--force"] if force else [])]
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(args, cwd, False)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        assert_writes_inside(writes, [cwd])
        assert_unchanged_outside(before, snapshot(root), root, [cwd])
        if code == 0:
            assert "Traceback" not in out + err
        else:
            assert_one_error_line(code, out, err, (2,))


# --------------------------------------------------------------------------------------------------
# What the fuzzer found, one focused test each (each failed before its fix)


def cli_call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`cusync-gen ARGS` in process, with its output checked for a traceback."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return int(exc.value.code or 0), out, err



@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\ufffe"])
def test_control_character_in_a_yaml_spec(tmp_path: Path, character: str) -> None:
    """yaml's ReaderError was a traceback (raised by the loader's constructor) with a two-line message."""
    path = tmp_path / "spec.yaml"
    path.write_text(TEXTS["two_gemm"].replace("name: gemm2", f"name: gemm{character}2"))
    with pytest.raises(CusyncError) as info:
        load_spec(path)
    assert_clean_error(info.value)
    line = TEXTS["two_gemm"].splitlines().index("  - name: gemm2") + 1
    assert f"spec.yaml:{line}:" in info.value.message and f"U+{ord(character):04X}" in info.value.message
    assert f"column {len('  - name: gemm') + 1}" in info.value.message


@pytest.mark.parametrize(("args", "words"), [
    (["validate"], "Missing argument"),
    (["validate", "two_gemm", "--bogus"], "No such option: --bogus"),
    (["run", "two_gemm", "--jobs", "0"], "--jobs"),
    (["validate", "two_gemm", "--m"], "--m"),
    (["generate", "two_gemm"], "-o"),
])
def test_click_usage_errors_are_one_error_line(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    """click's own parsing errors were a boxed usage message, not our `error:` line and hint."""
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert words in err and "--help" in err


def test_control_characters_in_paths_stay_on_the_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_call(capsys, "validate", "spec\n\x1b[2J.yaml")
    assert_one_error_line(code, out, err, (2,))
    assert "spec\\n\\x1b[2J.yaml" in err


@pytest.mark.parametrize(("args", "option"), [(["validate", "two_gemm", "--target", "sm_9\n0"], "--target"),
                                              (["generate", "two_gemm", "-o", "out", "--target", "sm_100"], "--target"),
                                              (["run", "two_gemm", "--arch", "sm_9\n0", "--force"], "--arch")])
def test_unknown_target_names_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    """`unknown target 'sm_9<newline>0'` was two lines, and did not say which option."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert f"error: {option} " in err and "sm_80, sm_86, sm_89, sm_90" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "generated").exists()


@pytest.mark.parametrize(("args", "option"), [
    (["init", "two_gemm", "-o", "file.txt/x.yaml"], "-o"),
    (["init", "two_gemm", "-o", "folder", "--force"], "-o"),
    (["trace", "trace.jsonl", "-o", "folder"], "-o"),
    (["trace", "trace.jsonl", "-o", "file.txt/t.png"], "-o"),
    (["trace", "trace.jsonl", "-o", "t.yaml"], "-o"),
    (["trace", "two_gemm", "-o", "t.txt"], "-o"),  # before the GPU check: exit 2, not 3
    (["run", "two_gemm", "--results", "file.txt/r.json"], "--results"),  # before the GPU check
    (["run", "two_gemm", "--out", "folder"], "--results"),
])
def test_output_files_are_checked_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    """init -o under a file or onto a folder, trace -o (a folder, under a file, a suffix matplotlib does not
    write) and run --out under a file were tracebacks (the last two after the whole run)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    (tmp_path / "file.txt").write_text("a file")
    (tmp_path / "folder").mkdir()
    (tmp_path / "trace.jsonl").write_text(json.dumps(TRACE_ROW) + "\n")
    before = snapshot(tmp_path)
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert f"error: {option} " in err
    assert snapshot(tmp_path) == before


def test_trace_line_with_infinity(tmp_path: Path) -> None:
    """int(float('inf')) is an OverflowError, which load_trace did not catch."""
    from cusync_gen.trace import load_trace

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({**TRACE_ROW, "m": float("inf")}) + "\n")
    with pytest.raises(CusyncError) as info:
        load_trace(path)
    assert_clean_error(info.value)
    assert "t.jsonl:1" in info.value.message


@pytest.mark.parametrize("args", [["validate", "{long}"], ["validate", "{long}.yaml"], ["init", "two_gemm", "-o", "{long}"],
                                  ["build", "{long}"], ["fetch-cutlass", "--wheel", "w.whl", "--dest", "{long}"]])
def test_file_name_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                            args: list[str]) -> None:
    """ENAMETOOLONG from a stat() (pathlib lets it through) was a traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.whl").write_bytes(b"not a wheel")
    code, out, err = cli_call(capsys, *[a.replace("{long}", "x" * 300) for a in args])
    assert_one_error_line(code, out, err, (2,))
    assert "too long" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.whl"]


# --------------------------------------------------------------------------------------------------
# Option bounds and run/trace --force (issue 9)


@pytest.mark.parametrize(("args", "option"), [
    (["validate", "gpt3_attention", "--batch", str(MAX_M + 1)], "--batch"),
    (["validate", "gpt3_attention", "--cache", str(10 ** 30)], "--cache"),
    (["validate", "gpt3_attention", "--batch", "1,2"], "--batch"),
    (["validate", "gpt3_attention", "--cache", "١٢"], "--cache"),  # int() takes Arabic-Indic digits
    (["trace", "two_gemm", "--m", str(MAX_M + 1)], "--m"),
    (["run", "two_gemm", "--repeats", str(cli.MAX_COUNT + 1)], "--repeats"),
    (["run", "two_gemm", "--warmup", str(10 ** 20)], "--warmup"),
    (["run", "two_gemm", "--jobs", str(cli.MAX_JOBS + 1)], "--jobs"),
    (["tune", "two_gemm", "--rounds", str(cli.MAX_COUNT + 1)], "--rounds"),
])
def test_numeric_options_are_bounded(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                     args: list[str], option: str) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: True)  # the bound comes first, not "no GPU"
    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("built"))
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert option in err.splitlines()[-2]


def test_bounded_options_accept_their_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.parse_count(str(MAX_M), "--cache", 0) == MAX_M and cli.parse_count("0", "--cache", 0) == 0
    code, out, err = cli_call(capsys, "validate", "gpt3_attention", "--m", "1", "--batch", "4", "--cache", str(MAX_M - 1))
    assert code == 0 and out.rstrip().endswith("OK"), err


@pytest.mark.parametrize("command", ["run", "trace"])
def test_run_and_trace_force_into_a_foreign_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], command: str) -> None:
    """run and trace generate into ./generated/NAME (or -o / --project), which now refuses a folder that is
    not our project; --force (passed to generate) writes into it and keeps the user's files."""
    monkeypatch.chdir(tmp_path)
    for name, fake in (("has_gpu", lambda: True), ("gpu_arch", lambda: "sm_80"),  # sm_90: run takes two_gemm_sm90
                       ("build", lambda project, **kwargs: Path(project) / "build"), ("run", fake_bench_run)):
        monkeypatch.setattr(build, name, fake)
    folder = tmp_path / "generated" / "two_gemm"
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("mine")
    extra = ["--m", "256", "-o", str(tmp_path / "t.png")] if command == "trace" else ["--m", "256"]
    code, out, err = cli_call(capsys, command, "two_gemm", *extra)
    assert_one_error_line(code, out, err, (2,))
    assert "--force" in err and sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
    code, out, err = cli_call(capsys, command, "two_gemm", *extra, "--force")
    assert code == 0, err
    assert_valid_project(EXAMPLES_DIR / "two_gemm.yaml", folder, None)
    assert (folder / "mine.txt").read_text() == "mine"


@pytest.mark.parametrize("value", ["!!int abc", "!!int 0x", "!!float abc", "!!bool maybe", "!!timestamp 2001-13-45",
                                   "!!timestamp tomorrow"])
def test_explicit_yaml_tag_that_does_not_fit_its_value(tmp_path: Path, value: str) -> None:
    """PyYAML's constructors raise ValueError, KeyError or AttributeError for these: tracebacks."""
    path = tmp_path / "spec.yaml"
    path.write_text(TEXTS["two_gemm"].replace("    n: 1024", f"    n: {value}", 1))
    with pytest.raises(CusyncError) as info:
        load_spec(path)
    assert_clean_error(info.value)
    line = TEXTS["two_gemm"].splitlines().index("    n: 1024") + 1
    assert f"spec.yaml:{line}: cannot read" in info.value.message and value.split()[0] in info.value.message
