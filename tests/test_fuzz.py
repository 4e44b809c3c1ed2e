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

The command-line half (hostile arguments, trace/tune/init inputs, the focused tests of what the fuzzer found,
option bounds) is tests/test_fuzz_cli.py, which uses this file's harness and strategies.

Deterministic in CI (the `fuzz` profile derandomizes); `CUSYNC_FUZZ=long` draws fresh random inputs and
`CUSYNC_FUZZ_SCALE=N` runs N times as many examples, for hunting bugs locally.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import REPO
from test_write_safety import snapshot
from cusync_gen import render
from cusync_gen.attention_sm90_plan import AttentionSm90Plan
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
            if isinstance(plan, AttentionSm90Plan):
                for shape in (AttentionShape(1, 1, 0), AttentionShape(4, 1, 1023), AttentionShape(1, 2048, 0),
                              AttentionShape(1, MAX_M, MAX_M)):
                    with contextlib.suppress(CusyncError):  # shapes past the layer's limits
                        plan.describe(shape)
            elif isinstance(plan, AttentionPlan):
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
