"""How spec errors read: user values quoted short and safe, and pydantic's validation errors turned
into one SpecError that names the field (`stages[1].tile.warp`) and says how to fix it.
"""

from __future__ import annotations

import difflib
import reprlib
from typing import Any

from pydantic import BaseModel, ValidationError

from cusync_gen.errors import SpecError
from cusync_gen.spec.limits import LIMITS, MAX_NAME_LENGTH, MAX_SHOWN, MAX_STAGES, MAX_TILE_CONFIGS
from cusync_gen.spec.model import (
    AttentionBlock,
    AttentionSpec,
    AttentionTiles,
    ChainSpec,
    ConvChainSpec,
    ConvStageSpec,
    ConvTileConfigSpec,
    DispatchEntrySpec,
    DispatchSpec,
    Optimizations,
    ReadsSpec,
    StageSpec,
    StridedCols,
    TileConfigSpec,
    TileSpec,
)

# ---------------------------------------------------------------------------------------------------
# User values in messages


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, MAX_SHOWN, MAX_SHOWN, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def show(value: Any) -> str:
    """A user value quoted in an error message: its repr (so a newline shows as \\n), at most MAX_SHOWN
    characters; reprlib stops early, so a huge (or alias-expanded) value costs nothing to show."""
    return clip(_REPR.repr(value))


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show_key(name: str) -> str:
    """A user key in a field path, cut short like show but without quotes."""
    return clip(name, MAX_NAME_LENGTH + 3)


def with_source(err: SpecError, source: str) -> SpecError:
    """Remember which file the error came from without changing the message the CLI prints."""
    err.source = source
    return err


# ---------------------------------------------------------------------------------------------------
# Pydantic errors -> one SpecError


_NESTED: dict[type[BaseModel], dict[str, type[BaseModel]]] = {
    ChainSpec: {"stages": StageSpec, "optimizations": Optimizations, "tile_configs": TileConfigSpec,
                "dispatch": DispatchSpec},
    DispatchSpec: {"modes": DispatchEntrySpec},
    StageSpec: {"tile": TileSpec, "reads": ReadsSpec},
    ReadsSpec: {"cols": StridedCols},
    AttentionSpec: {"attention": AttentionBlock},
    ConvChainSpec: {"stages": ConvStageSpec, "tile_configs": ConvTileConfigSpec},
    ConvStageSpec: {"tile": TileSpec},
    AttentionBlock: {"tiles": AttentionTiles},
    AttentionTiles: {name: TileSpec for name in ("qkv", "scores", "pv", "proj")},
}

_MISSING_HINTS = {
    "name": "add name: gpt3_mlp (a lower snake case C identifier)",
    "op": "add op: gemm (or swiglu)",
    "a": "add a: input (or the name of an earlier stage)",
    "n": "add n: <output width>",
    "tile": "add tile: {threadblock: [128, 128, 32]}",
    "threadblock": "add threadblock: [128, 128, 32]",
    "stages": "add stages: with at least one stage",
}

_TRIPLE_EXAMPLES = {
    "threadblock": "[128, 128, 32]",
    "warp": "[64, 64, 32]",
    "instruction": "[16, 8, 16]",
}

#: The threadblock a hint suggests on the Hopper kernels (K-blocks of 64: spec/rules.py), by the spec's kind.
_HOPPER_THREADBLOCK = {ChainSpec: "[128, 256, 64]", ConvChainSpec: "[128, 64, 64]"}


def _missing_hint(key: str, root: type[BaseModel], hopper: bool) -> str:
    threadblock = _HOPPER_THREADBLOCK.get(root) if hopper else None
    if threadblock is not None and key in ("tile", "threadblock"):
        return f"add tile: {{threadblock: {threadblock}}}" if key == "tile" else f"add threadblock: {threadblock}"
    return _MISSING_HINTS.get(key, f"add {key}: ...")


def _triple_example(key: str, root: type[BaseModel], hopper: bool) -> str:
    if key in _TRIPLE_EXAMPLES and key != "threadblock":
        return _TRIPLE_EXAMPLES[key]
    return (_HOPPER_THREADBLOCK.get(root) if hopper else None) or _TRIPLE_EXAMPLES["threadblock"]


def _render_loc(loc: tuple[int | str, ...]) -> str:
    """('stages', 1, 'tile', 'warp') -> 'stages[1].tile.warp'; drops pydantic's internal union tags."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{show_key(part)}" if out else show_key(part)
    return out or "<root>"


#: Which row of LIMITS a pydantic `le` bound comes from, by the key it bounds (the elements of a
#: threadblock, warp, instruction or tile_configs tile are "tile values").
_LIMIT_OF_KEY = {"n": "n, k", "k": "n, k", "hidden": "attention.hidden",
                 "heads": "attention.heads * attention.head_dim", "head_dim": "attention.head_dim",
                 "stages": "tile.stages", "sms": "sms", "m_max": "tile_configs[i].m_max", "batch_max": "conv n",
                 "strided": "reads", "count": "reads", "halo": "reads", "h": "conv h, w", "w": "conv h, w",
                 "c": "conv c, k", "r": "conv r, s, padding", "s": "conv r, s, padding", "padding": "conv r, s, padding",
                 "stride": "conv stride, dilation", "dilation": "conv stride, dilation"}


def _above_limit(loc: tuple[int | str, ...], key: str, value: Any, maximum: Any) -> SpecError:
    what = "tile values" if loc and isinstance(loc[-1], int) else _LIMIT_OF_KEY.get(key, "")
    limit = next((row for row in LIMITS if row.what == what), None)
    why = f" ({limit.why})" if limit is not None else ""
    if what == "tile values":  # name the list, not its element
        return SpecError(_render_loc(loc[:-1]), f"{show(value)} is above the limit of {maximum} for a tile value{why}",
                         f"use values of at most {maximum} (`cusync-gen docs spec-format`, Limits)")
    return SpecError(_render_loc(loc), f"{show(value)} is above the limit of {maximum}{why}",
                     f"use at most {maximum} (`cusync-gen docs spec-format`, Limits)")


def _model_at(loc: tuple[int | str, ...], root: type[BaseModel] = ChainSpec) -> type[BaseModel]:
    model: type[BaseModel] = root
    for part in loc:
        if isinstance(part, str) and part in _NESTED.get(model, {}):
            model = _NESTED[model][part]
    return model


def from_validation_error(exc: ValidationError, root: type[BaseModel] = ChainSpec, *, hopper: bool = False) -> SpecError:
    """The first of pydantic's errors as a SpecError naming the field and the fix (`hopper`: the spec's arch
    runs the Hopper kernels, whose tiles the hints then show)."""
    err = exc.errors(include_url=False)[0]
    loc: tuple[int | str, ...] = tuple(err["loc"])
    field = _render_loc(loc)
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    key = next((p for p in reversed(loc) if isinstance(p, str) and p.isidentifier()), "")
    if kind == "extra_forbidden":
        allowed = list(_model_at(loc[:-1], root).model_fields)
        close = difflib.get_close_matches(str(loc[-1])[: MAX_NAME_LENGTH + 1], allowed, n=1)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        return SpecError(field, f"unknown key {show(loc[-1])}",
                         f"remove it{guess}; allowed keys are {', '.join(allowed)}")
    if kind == "missing" and loc and isinstance(loc[-1], int):
        # a short [M, N, K] list is reported per missing element; name the list instead
        field, kind = _render_loc(loc[:-1]), "too_short"
    if kind == "missing":
        return SpecError(field, f"required key '{key}' is missing", _missing_hint(key, root, hopper))
    if kind in ("enum", "literal_error"):
        return SpecError(field, f"{show(value)} is not a valid {key}", f"use one of: {ctx.get('expected', '')}")
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return SpecError(field, f"expected an integer, got {show(value)}",
                         "write a whole number without quotes, e.g. 128")
    if kind in ("float_type", "float_parsing", "finite_number"):
        return SpecError(field, f"expected a finite number, got {show(value)}",
                         "write a number without quotes, e.g. 10000.0 or 5.0e5 (YAML reads 5e5, without the dot, as text)")
    if kind == "greater_than":
        bound = ctx.get("gt")
        return SpecError(field, f"must be greater than {bound}, got {show(value)}",
                         "use a positive number" if bound in (0, 0.0) else f"use a number above {bound}")
    if kind == "greater_than_equal":
        return SpecError(field, f"must be at least {ctx.get('ge')}, got {show(value)}", f"use {ctx.get('ge')} or more")
    if kind == "less_than_equal":
        return _above_limit(loc, key, value, ctx.get("le"))
    if kind in ("bool_type", "bool_parsing"):
        return SpecError(field, f"expected true or false, got {show(value)}", f"write {key}: true or {key}: false")
    if kind == "string_type":
        return SpecError(field, f"expected a string, got {show(value)}", "quote the value")
    if kind == "too_long" and key == "stages" and loc == ("stages",):
        return SpecError(field, f"{ctx.get('actual_length')} stages; a chain has at most {MAX_STAGES} (kMaxStages "
                         "sizes the runtime's per-stage counters)",
                         f"split the chain into specs of at most {MAX_STAGES} stages")
    if kind == "too_long" and loc == ("tile_configs",):
        return SpecError(field, f"{ctx.get('actual_length')} entries; at most {MAX_TILE_CONFIGS} (the library tries "
                         "them in order at every run)", f"merge neighbouring entries into at most {MAX_TILE_CONFIGS}")
    if kind in ("tuple_type", "list_type", "too_short", "too_long"):
        # a tile configuration's entry (tile_configs[i].tiles.<stage>) is a threadblock triple too
        in_tiles = "tiles" in loc[-3:] and loc[:1] == ("tile_configs",)
        if key in _TRIPLE_EXAMPLES or in_tiles:
            return SpecError(
                field,
                f"expected a list of three integers [M, N, K], got {show(value)}",
                f"write {key}: {_triple_example(key, root, hopper)}",
            )
        if key == "stages":
            msg = ("needs at least one stage" if kind == "too_short"
                   else f"expected a list of stages, got {show(value)}")
            return SpecError(field, msg, "write stages as a list of mappings, each starting with '- name: ...'")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return SpecError(field, f"expected a mapping, got {show(value)}", "write it as 'key: value' lines")
    return SpecError(field, clip(str(err.get("msg", "invalid value"))),
                     "see `cusync-gen docs spec-format` for the allowed values")
