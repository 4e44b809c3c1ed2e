"""The import layering: `spec` is the bottom layer (docs/interfaces.md) and imports nothing above it;
inside it each module imports only the ones listed before it; only its loader reads files."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "cusync_gen"

#: The spec package's modules, lowest first: each may import only those before it (and errors).
SPEC_MODULES = ("limits", "archs", "system_names", "model", "policies", "messages", "names", "rules", "loading")
#: What the spec package may import from the rest of cusync_gen (userfile: reading a file we did not write).
SPEC_MAY_IMPORT = {"cusync_gen.errors", "cusync_gen.userfile"}
#: Modules below the spec package: each imports only what is listed for it.
BELOW_SPEC = {"cusync_gen.errors": set(), "cusync_gen.userfile": {"cusync_gen.errors"}}
#: Modules outside the spec package that read or write YAML, and why (keep this list from growing:
#: the spec format belongs to cusync_gen.spec).
YAML_OUTSIDE_SPEC = {
    "cusync_gen.tune": "writes the tuned spec and each variant's spec file",
}


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("cusync_gen", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (also inside functions), as absolute names; for
    `from a import b`, both a and a.b (b may be a module)."""
    package = _module_of(path) if path.name == "__init__.py" else _module_of(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _own(names: set[str]) -> set[str]:
    """The cusync_gen modules among the names."""
    def is_module(name: str) -> bool:
        where = PACKAGE.joinpath(*name.split(".")[1:])
        return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()

    return {n for n in names if n.startswith("cusync_gen.") and is_module(n)}


def test_the_spec_package_has_the_listed_modules() -> None:
    found = {p.stem for p in (PACKAGE / "spec").glob("*.py")} - {"__init__"}
    assert found == set(SPEC_MODULES), "add a new spec module to SPEC_MODULES, in its place in the layering"


def test_the_spec_package_imports_nothing_above_it() -> None:
    for path in sorted((PACKAGE / "spec").glob("*.py")):
        upward = {n for n in _own(_imports(path)) if not n.startswith("cusync_gen.spec")} - SPEC_MAY_IMPORT
        assert not upward, f"{path.relative_to(REPO)} imports {sorted(upward)}: the spec is the bottom layer"


def test_each_spec_module_imports_only_the_ones_below_it() -> None:
    for i, name in enumerate(SPEC_MODULES):
        path = PACKAGE / "spec" / f"{name}.py"
        imports = _imports(path)
        inside = {n.split(".")[2] for n in _own(imports) if n.startswith("cusync_gen.spec.")}
        above = inside - set(SPEC_MODULES[:i])
        assert not above, f"cusync_gen/spec/{name}.py imports {sorted(above)}, which come after it in SPEC_MODULES"
        facade = {n for n in imports if n.count(".") == 2 and n.startswith("cusync_gen.spec.")} - {
            f"cusync_gen.spec.{m}" for m in SPEC_MODULES}
        assert not facade, f"cusync_gen/spec/{name}.py imports {sorted(facade)} from the package: import the module"


def test_only_the_loader_reads_files() -> None:
    for name in SPEC_MODULES:
        imported = {n.split(".")[0] for n in _imports(PACKAGE / "spec" / f"{name}.py")}
        if name != "loading":
            assert not imported & {"yaml", "pathlib"}, f"spec/{name}.py: reading files (YAML) is loading's"


def test_yaml_stays_in_the_spec_package() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_of(path)
        if module == "cusync_gen.spec" or module.startswith("cusync_gen.spec."):
            continue
        if "yaml" in {n.split(".")[0] for n in _imports(path)}:
            assert module in YAML_OUTSIDE_SPEC, f"{module} imports yaml: read specs through cusync_gen.spec"


def test_importing_the_spec_loads_no_module_above_it() -> None:
    code = ("import sys, cusync_gen.spec\n"
            "print(' '.join(m for m in sys.modules if m.startswith('cusync_gen')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    loaded = set(out.split()) - {"cusync_gen", *BELOW_SPEC}
    assert loaded == {"cusync_gen.spec", *(f"cusync_gen.spec.{m}" for m in SPEC_MODULES)}, loaded


def test_the_modules_below_the_spec_import_only_their_list() -> None:
    """errors and userfile sit below every layer (the spec's loader reads files through userfile)."""
    for module, allowed in BELOW_SPEC.items():
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        own = _own(_imports(path)) - allowed
        assert not own, f"{module} imports {sorted(own)}: it may import only {sorted(allowed) or 'nothing of ours'}"
