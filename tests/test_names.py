"""Names that pass validation must compile, configure and import wherever they go (cusync_gen/spec/names.py).

Every name the validator accepts (a corpus, plus seeded random names built from the very words the rules
reject) is checked for real, in batches: one g++ -fsyntax-only run on a TU that declares it the way the
generated headers do (after the system and CUDA headers the project includes), one CMake configure of a
project (LANGUAGES NONE) with the targets the generated CMakeLists.txt would create, and the rendered
--torch module (templates/torch/module.py.j2) compiled and run against a stub torch. Every name of the
bad corpus is refused by `cusync-gen validate`, in one error line that names the field and a hint.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import random
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, REPO
from cusync_gen import cli
from cusync_gen.errors import SpecError
from cusync_gen.spec import load_spec, names, parse_spec

TWO_GEMM = REPO / "cusync_gen" / "examples" / "two_gemm.yaml"
CUDA_INCLUDE = Path("/usr/local/cuda/include")

#: Chain names each language or tool rejects, and the one it is (the message says which).
BAD_CHAIN = {
    # C++20 keywords and alternative tokens, C and CUDA
    "xor": "C++", "and_eq": "C++", "static_assert": "C++", "decltype": "C++", "char8_t": "C++",
    "co_await": "C++", "requires": "C++", "concept": "C++", "thread_local": "C++", "typeid": "C++",
    "restrict": "C keyword", "linux": "GCC predefines", "unix": "GCC predefines",
    # reserved identifiers (double underscore, leading underscore) and what the affixes would make of them
    "my__chain": "double underscore", "chain_": "double underscore",
    # global names of the headers the project includes (namespace NAME clashes) and C ABI names
    "sin": "global name", "exp": "global name", "index": "global name", "time": "global name",
    "printf": "global name", "errno": "global name", "half": "global name", "dim3": "global name",
    "pthread": "pthread_create", "pthread_mutex": "pthread_mutex_destroy", "cuda": "namespace", "cutlass": "namespace",
    "cusync": "namespace", "std": "namespace", "bench": "namespace",
    "element": "class", "arguments": "class",
    # file names: headers include/NAME.h would shadow, Windows device names
    "cuda_fp16": "shadow", "cuda_runtime": "shadow", "stdint": "shadow", "math": "shadow", "string": "shadow",
    "stdlib": "shadow", "con": "Windows", "nul": "Windows", "com1": "Windows",
    # CMake's reserved targets and torch's imported ones
    "all": "CMake", "test": "CMake", "install": "CMake", "clean": "CMake", "help": "CMake", "package": "CMake",
    "package_source": "CMake", "edit_cache": "CMake", "rebuild_cache": "CMake",
    "list_install_components": "CMake", "all_build": "CMake", "zero_check": "CMake", "run_tests": "CMake",
    "preinstall": "CMake", "torch_cpu": "torch", "c10": "torch",
    # the --torch module: Python keywords, its imports, globals, builtins and locals
    "lambda": "Python", "def": "Python", "match": "Python", "os": "Python", "nn": "Python",
    "load": "Python", "loaded": "Python", "self": "Python", "super": "Python", "x": "Python", "y": "Python",
    "next": "Python", "path": "Python", "value_error": "Python", "module": "C++", "name": "Python",
    # the shape rules (lower snake case, ASCII, length)
    "Gpt3": "lower snake case", "1chain": "lower snake case", "gpt-3": "lower snake case",
    "caf\u00e9": "ASCII", "a" * 65: "above the limit",
}
#: Stage names rejected on their own (the same language lists; stage names may have capitals).
BAD_STAGE = {
    "xor": "C++", "bitor": "C++", "co_yield": "C++", "_gemm": "double underscore", "gemm_": "double underscore",
    "g__1": "double underscore", "_Gemm": "double underscore", "__global__": "double underscore",
    "threadIdx": "CUDA", "blockIdx": "CUDA", "warpSize": "CUDA", "class": "C++", "while": "C++",
    "lambda": "Python", "None": "Python", "input": "reserved", "1st": "C identifier", "a" * 65: "above the limit",
}
#: Pairs of stage names that clash with each other.
BAD_STAGE_PAIRS = [("gemm1", "Gemm1"), ("gemm1", "gemm1_stock"), ("up_cluster", "up"), ("g", "g_streamk")]

#: Names that must keep working (the shipped ones, and ones that only look close to a rejected one).
GOOD_CHAIN = ["two_gemm", "gpt3_mlp", "llama_mlp_split", "xor_mlp", "my_class", "vector", "detail", "testing",
              "map", "mlp2", "std_mlp", "cuda_mlp", "torch_mlp", "all_gemm", "sin_mlp", "a", "b", "m", "gemm1"]
GOOD_STAGE = ["gemm1", "gemm2", "glu", "gate", "up", "down", "qkv", "x", "self", "Gemm1", "GEMM_UP", "sin", "std",
              "all", "test", "torch", "vector", "stdint", "math", "m", "n", "k", "mode", "a1"]

_WORDS = sorted(names.CPP_KEYWORDS | names.PYTHON_KEYWORDS | names.CMAKE_RESERVED_TARGETS | names.NAMESPACES
                | names.PYTHON_MODULE_NAMES | names.TORCH_TARGETS | set(BAD_CHAIN) | set(GOOD_CHAIN)
                | {"gemm", "mlp", "create", "bench", "stock", "cuda", "fp16", "runtime", "h", "c"})


def _random_names(count: int, seed: int) -> list[str]:
    """Names made of one to three words from the reject lists and the corpus, joined by '_', some with digits."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rnd.choice(_WORDS) for _ in range(rnd.choice((1, 1, 2, 2, 3)))]
        name = "_".join(words) + (str(rnd.randrange(100)) if rnd.random() < 0.2 else "")
        out.append(name[:70])
    return out


def _accepted(candidates: list[str], stage: bool) -> list[str]:
    return sorted({n for n in candidates if names.name_problem(n, stage=stage) is None})


ACCEPTED_CHAINS = _accepted(GOOD_CHAIN + [n.lower() for n in _random_names(400, 1)], stage=False)
ACCEPTED_STAGES = _accepted(GOOD_STAGE + _random_names(300, 2), stage=True)


def test_the_corpus_is_what_the_validator_says() -> None:
    assert set(GOOD_CHAIN) <= set(ACCEPTED_CHAINS) and set(GOOD_STAGE) <= set(ACCEPTED_STAGES)
    assert len(ACCEPTED_CHAINS) > 100 and len(ACCEPTED_STAGES) > 100  # the random names are not all rejected
    for bad in BAD_CHAIN:
        assert names.name_problem(bad) is not None, bad
    for bad in BAD_STAGE:
        assert names.name_problem(bad, stage=True) is not None, bad


# ---------------------------------------------------------------------------------------------------
# C++ (g++ -fsyntax-only, after the headers the generated project includes)


def _headers() -> str:
    found = re.search(r"Headers probed: (.*)\.\n", (REPO / "cusync_gen" / "spec" / "system_names.py").read_text())
    assert found
    return "".join(f"#include <{h}>\n" for h in found.group(1).split(", "))


def _chain_decls(name: str) -> tuple[str, str]:
    """(the chain's macros, its declarations) as include/NAME.h, NAME_c.h and torch/NAME_op.cpp spell them."""
    camel, up = names.class_name(name), name.upper()
    macros = "".join(f"#define {up}_{s} 1\n" for s in names.C_MACRO_SUFFIXES)
    c_abi = " ".join(f"int {name}_{s}(struct {name}_chain*);" for s in names.C_ABI_SUFFIXES
                     if s not in ("chain", "arguments", "layout", "torch"))
    decl = (f"namespace {name} {{ using Element = __half; struct Arguments {{ int m; }}; "
            f"namespace testing {{ struct Access; }} namespace detail {{ int tables(); }} "
            f"class {camel} {{ public: friend struct testing::Access; Arguments args; Element e; "
            f"int f() {{ return detail::tables(); }} }}; }} "
            f'extern "C" {{ struct {name}_chain; typedef struct {name}_arguments {{ int m; }} {name}_arguments; '
            f"typedef struct {name}_layout {{ int m; }} {name}_layout; {c_abi} }} "
            f"namespace {name}_torch {{ using Chain = {name}::{camel}; using Element = {name}::Element; }}\n")
    return macros, decl


def _stage_decls(i: int, stage: str) -> str:
    """A stage's names: the Arguments fields and the launchers in NAME::detail (sm80 and sm90)."""
    fields = " ".join(f"int {stage}_{s};" for s in ("weight", "bias", "out", "n", "k", "weight_ld", "out_ld"))
    fns = " ".join(f"int {f}();" for f in (
        f"launch_{stage}", f"prepare_{stage}", f"interleave_{stage}", f"streamk_workspace_{stage}",
        f"clear_{stage}_streamk", *(f"launch_{stage}{s}" for s in names.STAGE_SUFFIXES), f"prepare_{stage}_stock"))
    return (f'namespace stage_probe{i} {{ struct Arguments {{ {fields} }}; namespace detail {{ {fns} '
            f'constexpr int kWeightBytes_{stage} = 1; char const* kName = "{stage}"; }} }}\n')


def _gxx(source: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    (tmp / "probe.cpp").write_text(source)
    return subprocess.run(["g++", "-std=gnu++17", "-fsyntax-only", "-fmax-errors=0", f"-I{CUDA_INCLUDE}",
                           str(tmp / "probe.cpp")], capture_output=True, text=True)


def _failing_lines(proc: subprocess.CompletedProcess[str]) -> set[int]:
    return {int(n) for n in re.findall(r"probe\.cpp:(\d+):\d+: error", proc.stderr)}


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None or not (CUDA_INCLUDE / "cuda_runtime.h").is_file(),
                               reason="needs g++ and the CUDA toolkit's headers")


@needs_gxx
def test_accepted_names_compile_as_cpp(tmp_path: Path) -> None:
    """One TU: every accepted chain's macros before the headers (as a user including NAME_c.h first would),
    then its namespace, class and C ABI, then every accepted stage's names."""
    macros, decls = zip(*(_chain_decls(n) for n in ACCEPTED_CHAINS))
    head = "".join(macros) + _headers()
    body = list(decls) + [_stage_decls(i, s) for i, s in enumerate(ACCEPTED_STAGES)]
    proc = _gxx(head + "".join(body), tmp_path)
    first = head.count("\n") + 1
    owners = ACCEPTED_CHAINS + ACCEPTED_STAGES
    bad = sorted({owners[n - first] if n >= first else f"(a macro, line {n})" for n in _failing_lines(proc)})
    assert proc.returncode == 0 and not bad, f"accepted names that do not compile: {bad}\n{proc.stderr[-3000:]}"


@needs_gxx
@pytest.mark.parametrize("name", ["xor", "co_await", "linux", "sin", "pthread", "element", "cuda_fp16"])
def test_rejected_cpp_names_really_fail(name: str, tmp_path: Path) -> None:
    """The probe is not vacuous: a sample of the bad corpus fails it, each in its own TU (a header named
    after the chain, include/NAME.h, found first on the include path as the generated CMake puts it)."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / f"{name}.h").write_text("#error shadowed\n")
    macros, decls = _chain_decls(name)
    (tmp_path / "probe.cpp").write_text(macros + _headers() + decls)
    # gnu++20: torch/NAME_op.cpp includes the chain's header as C++20 (co_await is a keyword there)
    proc = subprocess.run(["g++", "-std=gnu++20", "-fsyntax-only", f"-I{tmp_path / 'include'}", f"-I{CUDA_INCLUDE}",
                           str(tmp_path / "probe.cpp")], capture_output=True, text=True)
    assert proc.returncode != 0


# ---------------------------------------------------------------------------------------------------
# CMake (one configure, no compiler)


def _cmake_project(chains: list[str]) -> str:
    lines = ["cmake_minimum_required(VERSION 3.24)", "project(probe LANGUAGES NONE)", "enable_testing()",
             "include(CPack)"]
    lines += [f"add_library({t} INTERFACE IMPORTED)" for t in sorted(names.TORCH_TARGETS)]
    for n in chains:
        lines += [f"add_library({n} INTERFACE)", f"add_library({n}::{n} ALIAS {n})",
                  f"add_custom_target({n}_bench)", f"add_custom_target({n}_torch)",
                  f"add_test(NAME {n}_check COMMAND {n}_bench)",
                  f"install(TARGETS {n} EXPORT {n}Targets)",
                  f'export(EXPORT {n}Targets NAMESPACE {n}:: FILE "${{CMAKE_CURRENT_BINARY_DIR}}/{n}Targets.cmake")']
    return "\n".join(lines) + "\n"


def _batches(chains: list[str]) -> list[list[str]]:
    """Chains in groups whose targets (NAME, NAME_bench, NAME_torch) do not meet: one chain per project."""
    out: list[tuple[set[str], list[str]]] = []
    for n in chains:
        targets = {f"{n}{s}".casefold() for s in names.TARGET_SUFFIXES}
        for taken, group in out:
            if not taken & targets:
                taken |= targets
                group.append(n)
                break
        else:
            out.append((set(targets), [n]))
    return [group for _, group in out]


needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")


def _configure(chains: list[str], tmp: Path, generator: str) -> subprocess.CompletedProcess[str]:
    src, build = tmp / "src", tmp / "build"
    shutil.rmtree(build, ignore_errors=True)
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(_cmake_project(chains))
    return subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", generator],
                          capture_output=True, text=True)


@needs_cmake
def test_accepted_names_configure_with_cmake(tmp_path: Path) -> None:
    generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles"
    for group in _batches(ACCEPTED_CHAINS):
        proc = _configure(group, tmp_path, generator)
        assert proc.returncode == 0, proc.stderr[-3000:]


@needs_cmake
def test_reserved_cmake_names_really_fail(tmp_path: Path) -> None:
    generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles"
    for n in ("all", "test", "install", "clean", "help", "package", "torch_cpu"):
        assert _configure([n], tmp_path, generator).returncode != 0, n


# ---------------------------------------------------------------------------------------------------
# Python: the rendered --torch module


class _Stub(types.ModuleType):
    """torch, enough to import the module: any attribute is another stub, nn.Module a class."""

    def __getattr__(self, attr: str) -> object:
        if attr == "Module":
            return type("Module", (), {})
        return _Stub(f"{self.__name__}.{attr}")


def _module_source(chain: str) -> str:
    from cusync_gen.render import render_project

    base = _base_plan()
    plan = dataclasses.replace(base, name=chain, class_name=names.class_name(chain))
    return render_project(plan, torch=True)[f"torch/{chain}_torch.py"]


_BASE: list[object] = []


def _base_plan() -> object:
    if not _BASE:
        from cusync_gen.render import plan_of_spec
        _BASE.append(plan_of_spec(load_spec(TWO_GEMM)))
    return _BASE[0]


def _load_module(source: str) -> dict[str, object]:
    stub = _Stub("torch")
    saved = {k: sys.modules.get(k) for k in ("torch",)}
    sys.modules["torch"] = stub
    try:
        scope: dict[str, object] = {"__name__": "probe_torch", "__file__": "/nowhere/probe_torch.py"}
        exec(compile(source, "<module.py.j2>", "exec"), scope)
        return scope
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def _local_names(tree: ast.Module) -> set[str]:
    """Parameters and assigned names inside functions: a chain function of that name would be hidden there."""
    out: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.Lambda)):
            out |= {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
            out |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out


def test_python_module_names_list_is_complete() -> None:
    """Every name the rendered module uses unqualified is in names.PYTHON_MODULE_NAMES (or starts with _)."""
    tree = ast.parse(_module_source("probe_chain"))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | _local_names(tree)
    used |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}  # not the methods
    used |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names}
    generated = {"probe_chain", "ProbeChain"} | {n for n in used if n.endswith("_weight")}
    missing = {n for n in used - generated if not n.startswith("_")} - names.PYTHON_MODULE_NAMES
    assert not missing, f"add to names.PYTHON_MODULE_NAMES: {sorted(missing)}"


def test_accepted_names_import_as_python() -> None:
    """Each accepted chain's module compiles and imports; its def and class shadow nothing the module uses."""
    source = _module_source("probe_chain")
    reference = _load_module(source)
    builtins_used = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)} & set(dir(builtins))
    kept = {k: v for k, v in reference.items() if k not in ("probe_chain", "ProbeChain", "__builtins__")}
    for chain in ACCEPTED_CHAINS:
        camel = names.class_name(chain)
        source = _module_source(chain)
        tree = ast.parse(source)
        assert chain not in _local_names(tree) and not keyword.iskeyword(chain), chain
        scope = _load_module(source)
        assert getattr(scope[chain], "__name__", None) == chain and isinstance(scope[camel], type), chain
        assert scope["Module"] is scope[camel], chain
        for k, v in kept.items():
            if k == "Module" or k.startswith("__") or not callable(v) and not isinstance(v, types.ModuleType):
                continue  # the constants (NAME, LIBRARY, ...) spell the chain's name
            w = scope[k]
            same = (v is w or (isinstance(v, types.ModuleType) and getattr(w, "__name__", None) == v.__name__)
                    or (type(v) is type(w) and getattr(v, "__qualname__", v) == getattr(w, "__qualname__", w)))
            assert same, f"{chain}: the module's {k} is shadowed"
        assert chain not in builtins_used and camel not in builtins_used, chain


# ---------------------------------------------------------------------------------------------------
# The validator: the field, the language, a hint; the CLI: one error line


def _spec(chain: str = "two_gemm", stages: tuple[str, str] = ("gemm1", "gemm2")) -> dict:
    data = yaml.safe_load(TWO_GEMM.read_text())
    data["name"] = chain
    data["stages"][0]["name"], data["stages"][1]["name"] = stages
    data["stages"][1]["a"] = stages[0]
    return data


@pytest.mark.parametrize("name", list(BAD_CHAIN))
def test_bad_chain_name_is_a_spec_error_naming_the_field(name: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(chain=name))
    assert info.value.field == "name"
    assert BAD_CHAIN[name].split()[0].lower() in (info.value.message + info.value.hint).lower() or \
        BAD_CHAIN[name] in ("global name", "namespace", "class", "shadow", "Windows", "torch", "pthread_create",
                            "pthread_mutex_destroy", "GCC predefines")
    assert info.value.hint


@pytest.mark.parametrize("name", list(BAD_STAGE))
def test_bad_stage_name_is_a_spec_error_naming_the_field(name: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(stages=("gemm1", name)))
    assert info.value.field == "stages[1].name" and info.value.hint


@pytest.mark.parametrize("pair", BAD_STAGE_PAIRS)
def test_clashing_stage_names_are_refused(pair: tuple[str, str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(stages=pair))
    assert info.value.field == "stages[1].name"


def test_the_hint_suggests_a_name_that_passes() -> None:
    for bad in [n for n in BAD_CHAIN if n.isascii() and re.fullmatch(r"[a-z][a-z0-9_]*", n) and len(n) < 60]:
        why, hint = names.name_problem(bad)
        suggested = re.search(r"e\.g\. '([^']+)'", hint)
        assert suggested and names.name_problem(suggested.group(1)) is None, (bad, hint)
    assert "xor_mlp" in names.name_problem("xor")[1]


@pytest.mark.parametrize("example", EXAMPLES)
def test_shipped_examples_keep_their_names(example: str) -> None:
    load_spec(REPO / "cusync_gen" / "examples" / f"{example}.yaml")


def test_cli_validate_bad_name(tmp_path: Path) -> None:
    """The real entry point: one error line naming the field and the language, one hint, no traceback."""
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(_spec(chain="xor")))
    proc = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "validate", str(spec)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == SpecError.exit_code
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    hints = [line for line in proc.stderr.splitlines() if line.startswith("hint:")]
    assert len(errors) == 1 and errors[0].startswith("error: name: 'xor' is a C++ keyword"), proc.stderr
    assert len(hints) == 1 and "xor_mlp" in hints[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cli_validate_each_bad_name_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    for name in BAD_CHAIN:
        spec.write_text(yaml.safe_dump(_spec(chain=name)))
        with pytest.raises(SystemExit) as exc:
            cli.main(["validate", str(spec)])
        err = capsys.readouterr().err
        assert exc.value.code == SpecError.exit_code, (name, err)
        assert [line for line in err.splitlines() if line.startswith("error:")][0].startswith("error: name: "), err
