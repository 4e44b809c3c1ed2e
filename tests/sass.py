"""Reading the machine code (SASS) of compiled sm90 units: is the math warps' wgmma loop the one CUTLASS's own
kernels compile to? (benchmarks/NOTES.md h17.)

ptxas keeps the wgmma descriptors in uniform registers only while the mainloop state that they derive from is
uniform over the tile loop. A lane-dependent branch that defines a value reaching that loop (one elected lane
taking the ticket, a spin inside it) moves the state to per-thread registers, and every HGMMA then needs R2UR
moves first: 88 instead of 57 instructions per 8 HGMMAs in the synced ping-pong kernel. Nothing fails, the
results stay bitwise equal, so only the code shows it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


def find_tool(name: str) -> str | None:
    """`name` from PATH, the CUDA toolkit, or the nvidia-cuda-<name> wheel (a test extra)."""
    path = shutil.which(name)
    if path is None and os.path.exists(f"/usr/local/cuda/bin/{name}"):
        path = f"/usr/local/cuda/bin/{name}"
    if path is None:
        spec = importlib.util.find_spec("nvidia")
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            for candidate in sorted(Path(root).glob(f"cu*/bin/{name}")):
                if os.access(candidate, os.X_OK):
                    return str(candidate)
    return path


def find_cuobjdump() -> str | None:
    """cuobjdump, where nvdisasm (which `cuobjdump -sass` runs) is found too; else None."""
    cuobjdump = find_tool("cuobjdump")
    return cuobjdump if cuobjdump is not None and find_tool("nvdisasm") is not None else None


@dataclass(frozen=True)
class WgmmaLoop:
    kernel: str       # mangled name
    instructions: int
    hgmma: int
    r2ur: int


_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")


def wgmma_loops(sass: str) -> list[WgmmaLoop]:
    """Per kernel, its innermost loop with HGMMAs (the K loop): the shortest backward branch whose body has one."""
    kernels: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in sass.splitlines():
        if "Function :" in line:
            current = line.split("Function :", 1)[1].strip()
            kernels[current] = []
        elif current is not None and (m := _INSTRUCTION.match(line)):
            kernels[current].append((int(m.group(1), 16), m.group(2)))
    loops = []
    for name, body in kernels.items():
        index = {address: i for i, (address, _) in enumerate(body)}
        best = None
        for i, (address, text) in enumerate(body):
            m = _BRANCH.search(text)
            target = int(m.group(1), 16) if m else None
            if target is None or target > address or target not in index:
                continue
            loop = [t for _, t in body[index[target]:i + 1]]
            hgmma = sum("HGMMA" in t for t in loop)
            if hgmma and (best is None or len(loop) < best.instructions):
                best = WgmmaLoop(name, len(loop), hgmma, sum(re.search(r"\bR2UR\b", t) is not None for t in loop))
        if best is not None:
            loops.append(best)
    return loops


def sass_of(cuobjdump: str, obj: Path) -> str:
    nvdisasm = find_tool("nvdisasm")
    env = dict(os.environ)
    if nvdisasm is not None:
        env["PATH"] = f"{Path(nvdisasm).parent}{os.pathsep}{env.get('PATH', '')}"
    out = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout
