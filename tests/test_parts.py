"""The macro interface between the shared templates and the backends' parts, declared once in
backends/protocol.py (PART_MACROS): every part file, rendered with a plan of its backend, exports exactly
the macros declared for its part, and the shared templates call no other macro of a part."""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from cusync_gen import __version__
from cusync_gen.backends import BACKENDS
from cusync_gen.backends.protocol import PART_MACROS
from cusync_gen.render import _environment, plan_of_spec
from cusync_gen.spec import load_spec

TEMPLATES = REPO / "templates"
#: An example of each backend, whose plan the part files are rendered with.
EXAMPLE = {"sm80": "gpt3_mlp", "sm90": "gpt3_mlp_sm90", "attention": "gpt3_attention", "conv": "resnet_block",
           "attention_sm90": "llama_attention_sm90", "conv_sm90": "resnet_block_sm90"}
IMPORT = re.compile(r"\{%-?\s*import parts\.(\w+) as (\w+)")


def test_every_backend_has_an_example_here() -> None:
    assert set(EXAMPLE) == set(BACKENDS)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_part_file_defines_exactly_the_declared_macros(name: str) -> None:
    backend = BACKENDS[name]
    plan = plan_of_spec(load_spec(REPO / "cusync_gen" / "examples" / f"{EXAMPLE[name]}.yaml"))
    env = _environment()
    context = {"plan": plan, "version": __version__, "stage": None, "gemm": None, "parts": backend.PARTS,
               "operands": (), "buffers": ()}
    for part, template in backend.PARTS.items():
        assert part in PART_MACROS, (name, part)
        module = env.get_template(template).make_module(context)
        exported = {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))}
        assert exported == set(PART_MACROS[part]), (name, template, exported ^ set(PART_MACROS[part]))


def test_shared_templates_call_only_declared_macros() -> None:
    called: dict[str, set[str]] = {}
    for path in sorted(TEMPLATES.rglob("*.j2")):
        text = path.read_text()
        for part, alias in IMPORT.findall(text):
            assert part in PART_MACROS, (path.relative_to(REPO), part)
            used = set(re.findall(rf"\b{alias}\.(\w+)", text))
            assert used <= set(PART_MACROS[part]), (path.relative_to(REPO), used - set(PART_MACROS[part]))
            called.setdefault(part, set()).update(used)
    for part, macros in PART_MACROS.items():  # and every declared macro has a caller
        assert called.get(part, set()) == set(macros), (part, set(macros) - called.get(part, set()))


def test_every_declared_macro_has_a_meaning() -> None:
    for part, macros in PART_MACROS.items():
        assert macros and all(isinstance(v, str) and v for v in macros.values()), part
