"""The backends: one module per kind of generated project, chosen from one table.

Each backend module (`sm80`, `sm90`, `attention`, `attention_sm90`, `conv`, `conv_sm90`) has its own template folder (`templates/<name>/`)
and says which files a project of its kind holds (`files(plan)`), what each template sees besides the
plan (`context(plan, f)`) and what its manifest lists per stage (`manifest_stages(plan)`). Shared
templates (`templates/project/`) hold no branches on the backend: what differs is a template of the
backend's own folder, named in `PARTS` and included by name. Adding a backend is adding a module and a
folder, and a row in `BACKENDS`.
"""

from __future__ import annotations

from typing import cast

from cusync_gen.backends import attention, attention_sm90, conv, conv_sm90, sm80, sm90
from cusync_gen.backends.base import OutputFile
from cusync_gen.backends.protocol import Backend, Support

#: plan.backend -> the module that emits projects of that kind (each a Backend: backends/protocol.py).
BACKENDS: dict[str, Backend] = {m.NAME: cast(Backend, m) for m in (sm80, sm90, attention, attention_sm90, conv, conv_sm90)}


def backend_of(plan) -> Backend:  # noqa: ANN001 (ChainPlan | AttentionPlan)
    """The backend module of a plan (its `backend` property names the row of BACKENDS)."""
    return BACKENDS[plan.backend]


__all__ = ["BACKENDS", "Backend", "OutputFile", "Support", "backend_of"]
