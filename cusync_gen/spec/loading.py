"""Reading a spec: the only code that knows the file formats (YAML, JSON). `load_spec` reads a file
within the limits (size, nesting, values: no file can hang or crash it), `parse_spec` turns its data
into a canonical spec in three steps: the model checks shapes and types, `resolve_defaults` makes
omitted tile fields explicit, and the rules check what crosses fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cusync_gen import userfile
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.spec.limits import MAX_M, MAX_SPEC_BYTES, MAX_SPEC_DEPTH, MAX_SPEC_VALUES
from cusync_gen.spec.messages import clip, from_validation_error, show, with_source
from cusync_gen.spec.archs import ARCHS, DEFAULT_ARCH, Arch, ArchFacts
from cusync_gen.spec.model import (
    ATTENTION_GEMMS,
    Op,
    canonical_backend,
    AttentionSpec,
    AttentionTiles,
    ChainSpec,
    ConvChainSpec,
    default_sm80_tile,
    default_sm90_conv_tile,
    default_sm90_conv_tile_configs,
    resolve_defaults,
)
from cusync_gen.spec.rules import check_attention_rules, check_conv_rules, check_rules

# ---------------------------------------------------------------------------------------------------
# Data -> spec


def parse_spec(data: Any, source: str = "<spec>") -> ChainSpec:
    """Validate raw data into a canonical ChainSpec; the first violation becomes one SpecError."""
    if not isinstance(data, dict):
        kind = "nothing (the file is empty)" if data is None else type(data).__name__
        raise with_source(
            SpecError(
                "<root>",
                f"the top level of {source} must be a mapping, got {kind}",
                "start the file with 'name: ...', 'stages: ...' (see `cusync-gen docs spec-format`)",
            ),
            source,
        )
    try:
        data = drop_one_value_fields(data)
    except SpecError as exc:
        raise with_source(exc, source) from None
    if "attention" in data:
        return _parse_attention(data, source)
    if _is_conv_chain(data):
        return _parse_conv(data, source)
    try:
        spec = ChainSpec.model_validate(data)
    except ValidationError as exc:
        raise with_source(from_validation_error(exc, hopper=_hopper(data)), source) from None
    spec = resolve_defaults(spec)
    try:
        check_rules(spec)
    except SpecError as exc:
        raise with_source(exc, source) from None
    return spec


def drop_one_value_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The spec data without the fields that could only take one value (model.ONE_VALUE_FIELDS): `split_k: 1`
    of a stage and `cluster: [1, 1, 1]` of an sm90 GEMM's tile are accepted and dropped; any other value,
    or a cluster where there never was one, is a SpecError naming the field."""
    _no_attention_cluster(data)
    stages = data.get("stages")
    if not isinstance(stages, list):
        return data
    facts = _arch_facts(data)
    out = []
    for i, stage in enumerate(stages):
        if isinstance(stage, dict) and "split_k" in stage:
            value = stage["split_k"]
            if not (type(value) is int and value == 1):
                raise SpecError(f"stages[{i}].split_k", f"split_k={show(value)} is not supported: each stage computes "
                                "its whole K in one kernel, so split_k is always 1", "remove split_k")
            stage = {k: v for k, v in stage.items() if k != "split_k"}
        tile = stage.get("tile") if isinstance(stage, dict) else None
        if isinstance(tile, dict) and "cluster" in tile:
            value = tile["cluster"]
            field = f"stages[{i}].tile.cluster"
            if stage.get("op") == Op.SWIGLU.value:
                raise SpecError(field, "swiglu is elementwise and does not use cluster", "remove cluster")
            if facts is not None and not facts.warp_specialized:
                raise SpecError(field, f"cluster is a Hopper kernel setting and does not apply to arch: {facts.arch.value}",
                                "remove cluster, or set arch: sm90")
            if not (isinstance(value, list) and len(value) == 3 and all(type(v) is int and v == 1 for v in value)):
                raise SpecError(field, f"cluster {show(value)} is not supported: synced kernels take one tile per CTA "
                                "from the ticket queue, so every kernel runs in 1x1x1 clusters", "remove cluster")
            stage = {**stage, "tile": {k: v for k, v in tile.items() if k != "cluster"}}
        out.append(stage)
    return {**data, "stages": out}


def _arch_facts(data: dict[str, Any]) -> ArchFacts | None:
    """The facts of the spec data's arch (its default where omitted); None where it names no arch (the model
    reports that)."""
    arch = canonical_backend(data.get("arch", DEFAULT_ARCH.value))
    return ARCHS.get(Arch(arch)) if arch in (a.value for a in Arch) else None


def _hopper(data: dict[str, Any]) -> bool:
    facts = _arch_facts(data)
    return facts is not None and facts.warp_specialized


def _no_attention_cluster(data: dict[str, Any]) -> None:
    """The attention chain's sm80 kernels never had a cluster."""
    block = data.get("attention")
    if isinstance(block, dict) and block.get("tiles") is None:
        return
    tiles = block.get("tiles") if isinstance(block, dict) else None
    for name, tile in (tiles.items() if isinstance(tiles, dict) else ()):
        if isinstance(tile, dict) and "cluster" in tile:
            raise SpecError(f"attention.tiles.{name}.cluster", "cluster is a Hopper kernel setting; the attention chain "
                            "uses sm80 kernels", "remove cluster")


def _is_conv_chain(data: dict[str, Any]) -> bool:
    """Any stage with op: conv makes the spec a conv chain (then every stage must be one)."""
    stages = data.get("stages")
    return isinstance(stages, list) and any(isinstance(s, dict) and s.get("op") == "conv" for s in stages)


def _parse_conv(data: dict[str, Any], source: str) -> ConvChainSpec:
    stages = data["stages"]
    if not all(isinstance(s, dict) and s.get("op") == "conv" for s in stages):
        i = next(i for i, s in enumerate(stages) if isinstance(s, dict) and s.get("op") == "conv")
        raise with_source(SpecError(f"stages[{i}].op", "'conv' stages make a chain of their own: they cannot be "
                                    "mixed with 'gemm' or 'swiglu' stages (or other entries) in one spec",
                                    "make every stage op: conv, or put the convolutions in their own spec"), source)
    try:
        spec = ConvChainSpec.model_validate(data)
    except ValidationError as exc:
        raise with_source(from_validation_error(exc, ConvChainSpec, hopper=_hopper(data)), source) from None
    if not ARCHS[spec.arch].warp_specialized:  # sm90 conv tiles are their threadblock alone
        stages = [s.model_copy(update={"tile": default_sm80_tile(s.tile)}) for s in spec.stages]
        spec = spec.model_copy(update={"stages": stages})
    elif any("tile" not in s.model_fields_set for s in spec.stages):
        omitted = {s.name for s in spec.stages if "tile" not in s.model_fields_set}
        stages = [s if "tile" in s.model_fields_set else s.model_copy(update={"tile": default_sm90_conv_tile(s.k)})
                  for s in spec.stages]
        spec = spec.model_copy(update={"stages": stages})
        derived = default_sm90_conv_tile_configs(spec, omitted)
        try:  # the derived tiles are kept only where they are valid; otherwise the defaults alone are checked
            check_conv_rules(derived)
            return derived
        except SpecError:
            pass
    try:
        check_conv_rules(spec)
    except SpecError as exc:
        raise with_source(exc, source) from None
    return spec


def _parse_attention(data: dict[str, Any], source: str) -> AttentionSpec:
    if "stages" in data:
        raise with_source(SpecError("attention", "a spec has either stages: (a GEMM chain) or attention:, not both",
                                    "split it into two spec files"), source)
    try:
        spec = AttentionSpec.model_validate(data)
    except ValidationError as exc:
        raise with_source(from_validation_error(exc, AttentionSpec), source) from None
    if spec.attention.tiles is not None:  # sm80's tiles (the rules require them there and refuse them on sm90)
        tiles = {name: default_sm80_tile(getattr(spec.attention.tiles, name)) for name in ATTENTION_GEMMS}
        spec = spec.model_copy(update={"attention": spec.attention.model_copy(
            update={"tiles": AttentionTiles(**tiles)})})
    try:
        check_attention_rules(spec)
    except SpecError as exc:
        raise with_source(exc, source) from None
    return spec


# ---------------------------------------------------------------------------------------------------
# File -> data


def load_spec(path: Path) -> ChainSpec:
    """Read a .yaml/.yml/.json file; problems with the file itself are UsageErrors, not SpecErrors.

    No file can make this hang or crash: its size, nesting and number of values (YAML aliases
    included) are capped before the spec model sees the data (LIMITS)."""
    return parse_spec(read_spec_data(path), source=str(Path(path)))


def ignored_fields(data: Any) -> list[str]:
    """The fields of raw spec data that the loader accepts and drops (one-value settings: `split_k: 1`,
    `cluster: [1, 1, 1]`), as field paths; `validate` names them so a user can remove them."""
    stages = data.get("stages") if isinstance(data, dict) else None
    found = []
    for i, stage in enumerate(stages if isinstance(stages, list) else ()):
        if isinstance(stage, dict) and "split_k" in stage:
            found.append(f"stages[{i}].split_k")
        tile = stage.get("tile") if isinstance(stage, dict) else None
        if isinstance(tile, dict) and "cluster" in tile:
            found.append(f"stages[{i}].tile.cluster")
    return found


def unused_fields(data: Any) -> list[str]:
    """Notes on fields of raw spec data that a valid spec carries without effect (`attention.rotary_base`
    without `rotary: true`), each naming the field; `validate` prints them."""
    attention = data.get("attention") if isinstance(data, dict) else None
    if isinstance(attention, dict) and "rotary_base" in attention and attention.get("rotary") is not True:
        return ["attention.rotary_base has no effect without attention.rotary: true; remove it or set rotary: true"]
    return []


def read_spec_data(path: Path) -> Any:
    """The raw data of a spec file (what `load_spec` parses), within the limits; `tune` edits it."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise UsageError(
            f"{path}: unknown spec file type '{suffix or '(none)'}'",
            "name the spec file *.yaml, *.yml or *.json",
        )
    text = _read_spec_text(path)
    if suffix == ".json":
        data = _load_json(path, text)
    else:
        try:
            loader = _StrictLoader(text, path)  # refuses characters YAML does not allow (NUL, ...) right here
        except yaml.reader.ReaderError as exc:
            raise UsageError(_reader_error_message(path, text, exc), "remove it (YAML takes a control character only as "
                             "an escape in a double-quoted string, e.g. \"\\t\")") from None
        try:
            data = loader.get_single_data()
        except yaml.YAMLError as exc:
            raise UsageError(_yaml_error_message(path, exc), "fix the YAML syntax at that line") from None
        finally:
            loader.dispose()
    _check_size(data, path)
    return data


def _read_spec_text(path: Path) -> str:
    """The file's text: a regular file (never a FIFO or device: userfile opens without blocking), within
    MAX_SPEC_BYTES, UTF-8."""
    try:
        text = userfile.read_text(path, "spec file", MAX_SPEC_BYTES)
    except userfile.UserFileError as err:
        if err.reason == "too_large":
            raise UsageError(f"{path} is larger than 1 MiB, the limit for a spec file",
                             "a spec is a few KiB: check that this is the spec (`cusync-gen docs spec-format`, Limits)") from None
        if err.reason == "directory":
            raise UsageError(f"{path} is a directory, not a spec file", "pass the path of a .yaml or .json file") from None
        raise
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads them


def _load_json(path: Path, text: str) -> Any:
    if userfile.json_too_deep(text, MAX_SPEC_DEPTH):  # before json.loads recurses once per level
        raise _too_deep(path)
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise UsageError(f"{path}: invalid JSON: key {show(exc.key)} appears twice in one object (JSON keeps the "
                         "last silently)", "keep one of them") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            "fix the JSON syntax at that line",
        ) from None
    except RecursionError:
        raise _too_deep(path) from None
    except MemoryError:
        raise UsageError(f"{path}: too large to parse", "a spec is a few KiB (docs/spec-format.md, Limits)") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise UsageError(f"{path}: invalid JSON: {clip(str(exc))}", _NUMBER_HINT) from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object hook: a key written twice is an error, as in YAML spec files."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


_NUMBER_HINT = f"no number in a spec is above {MAX_M} (`cusync-gen docs spec-format`, Limits)"


def _too_deep(path: Path, line: int | None = None) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: the spec nests mappings and lists deeper than {MAX_SPEC_DEPTH} levels",
                      "a spec needs at most 5 levels: check the brackets (and that no YAML alias contains itself)")


def _too_many(path: Path, line: int | None = None) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: the spec holds more than {MAX_SPEC_VALUES} values (counting what each YAML alias "
                      "repeats)", "a spec needs a few hundred: remove the extra data or the repeated aliases "
                      "(`cusync-gen docs spec-format`, Limits)")


def _check_size(data: Any, path: Path) -> None:
    """At most MAX_SPEC_DEPTH levels and MAX_SPEC_VALUES values, counting each YAML alias as what it
    repeats (an alias is the same Python object, so each is counted once and reused: linear time)."""
    done: dict[int, tuple[int, int]] = {}  # id -> (values, levels) of a finished mapping or list

    def walk(node: Any, level: int) -> tuple[int, int]:
        if not isinstance(node, (dict, list, tuple)):  # tuples: YAML's !!pairs and !!omap
            return 1, 0
        if id(node) in done:
            values, levels = done[id(node)]
        else:
            if level > MAX_SPEC_DEPTH:  # also ends a self-containing alias (&a [*a])
                raise _too_deep(path)
            values, levels = 1, 1
            children = [v for pair in node.items() for v in pair] if isinstance(node, dict) else node
            for child in children:
                child_values, child_levels = walk(child, level + 1)
                values += child_values
                levels = max(levels, child_levels + 1)
                if values > MAX_SPEC_VALUES:
                    break
            done[id(node)] = (values, levels)
        if level + levels - 1 > MAX_SPEC_DEPTH:
            raise _too_deep(path)
        if values > MAX_SPEC_VALUES:
            raise _too_many(path)
        return values, levels

    walk(data, 1)


# ---------------------------------------------------------------------------------------------------
# YAML: a strict loader, and its errors by line and column


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader for spec files: rejects duplicate keys (which plain YAML resolves to the last one),
    keys that are not strings, integers too long for int(), and nesting deeper than MAX_SPEC_DEPTH
    (the composer recurses once per level, so 100k brackets were a RecursionError)."""

    def __init__(self, stream: str, path: Path) -> None:
        super().__init__(stream)
        self.path = path
        self.depth = 0
        self.nodes = 0  # composed so far: stop early (1 MiB of YAML takes PyYAML half a minute to compose)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        self.nodes += 1
        try:
            if self.depth > MAX_SPEC_DEPTH + 1:  # + 1: the scalars inside the deepest mapping or list
                raise _too_deep(self.path, self.peek_event().start_mark.line + 1)
            if self.nodes > MAX_SPEC_VALUES:  # _check_size counts aliases too, after construction
                raise _too_many(self.path, self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's constructors for an explicit tag raise ValueError, KeyError or AttributeError on a value
        they cannot read (`!!float abc`, `!!bool maybe`, `!!timestamp tomorrow`): a UsageError instead."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            value = show(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise self.fail(node, f"cannot read {value} as {show(tag)}",
                            "remove the tag (the !!... before the value): a spec needs none") from None

    def fail(self, node: yaml.Node, message: str, hint: str) -> UsageError:
        line = node.start_mark.line + 1
        return UsageError(f"{self.path}:{line}: {message} (line {line}, column {node.start_mark.column + 1})", hint)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """Keys written twice are an error; YAML 1.1 merge keys (`<<: *anchor`) are not duplicates: a key
    written here overrides the merged one, as YAML says."""
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<`: flatten_mapping below merges its mappings
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
            raise loader.fail(key_node, f"a {kind} is used as a mapping key", _KEY_HINT)
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise loader.fail(key_node, f"the mapping key {show(key)} is not a string", _KEY_HINT)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {show(key)}",
                key_node.start_mark
            )
        seen.add(key)
    loader.flatten_mapping(node)  # merged keys first, then the ones written here (which win)
    for key_node, _ in node.value:  # a key a merge brought in (checked above: only the written ones)
        if not isinstance(key_node, yaml.ScalarNode) or not isinstance(loader.construct_object(key_node), str):
            raise loader.fail(key_node, "a merged mapping has a key that is not a string", _KEY_HINT)
    return loader.construct_mapping(node, deep=deep)


_KEY_HINT = "keys are names such as n or stages; quote a key that YAML reads as a number, null or true"


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    if ":" in node.value:  # YAML 1.1's base 60: `1:08:16` is 4096
        raise loader.fail(node, f"{show(node.value)} reads as a base-60 number in YAML 1.1",
                          "write the number in decimal (e.g. 4096), or quote it if it is text")
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        if not node.value.lstrip("+-").replace("_", "").isdigit():
            raise  # `!!int abc`: construct_object says it cannot read it
        raise loader.fail(node, f"the number {show(node.value)} has too many digits", _NUMBER_HINT) from None


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _yaml_error_message(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = clip(getattr(exc, "problem", None) or str(exc))  # may quote a tag or token of the file
    if mark is not None:
        return f"{path}:{mark.line + 1}: invalid YAML: {problem} (line {mark.line + 1}, column {mark.column + 1})"
    return f"{path}: invalid YAML: {problem}"


def _reader_error_message(path: Path, text: str, exc: yaml.reader.ReaderError) -> str:
    """A character YAML does not allow, by line and column (its str() is two lines and counts characters)."""
    position = exc.position if isinstance(exc.position, int) else 0
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    character = f"U+{exc.character:04X}" if isinstance(exc.character, int) else show(exc.character)
    return f"{path}:{line}: invalid YAML: the character {character} is not allowed (line {line}, column {column})"
