"""`cusync-gen validate`'s report: a parsed spec planned, its files' paths checked, and the plan and its
proofs at each size, as text or as one JSON document. cli.py prints what these give.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from cusync_gen.spec.model import AttentionSpec, ChainSpec, ConvChainSpec


def _planned(spec: ChainSpec | AttentionSpec, target: str | None) -> Any:  # noqa: ANN401 (ChainPlan | AttentionPlan)
    from cusync_gen.render import output_files, plan_of_spec

    plan = plan_of_spec(spec, target)
    output_files(plan)  # raises when two generated files would share a path
    return plan


def validate_json(spec: ChainSpec | AttentionSpec, ms: Sequence[int], batches: int, cached: int,
                  target: str | None) -> dict[str, Any]:
    """`validate --json`: the plan and its proof at every size (docs/validate-json.md). Raises on the first
    size whose proof fails, so a document returned is a plan proved at every size."""
    plan = _planned(spec, target)
    if isinstance(spec, AttentionSpec) and plan.backend == "attention_sm90":
        from cusync_gen.attention_plan import AttentionShape

        shapes = [AttentionShape(batches, value, cached) for value in ms]
        return {**plan.identity_json(), "sizes": [plan.describe_json(shape) for shape in shapes]}
    if isinstance(spec, AttentionSpec):
        from cusync_gen.attention_plan import AttentionShape
        from cusync_gen.verify_attention import validate_attention_json

        return validate_attention_json(plan, [AttentionShape(batches, value, cached) for value in ms])
    from cusync_gen.verify import validate_json as chain_json

    return chain_json(plan, ms)


def validate_text(spec: ChainSpec | AttentionSpec, ms: Sequence[int], batches: int, cached: int,
                  target: str | None) -> Iterator[str]:
    """`validate`: per size, the plan's description, then its proof (raises on the first uncovered read,
    after the description of that size)."""
    plan = _planned(spec, target)
    if isinstance(spec, AttentionSpec) and plan.backend == "attention_sm90":
        from cusync_gen.attention_plan import AttentionShape

        for value in ms:
            yield plan.describe(AttentionShape(batches, value, cached))
            yield ("proof: the stages run back to back in stream order (each reads what the one before it wrote, "
                   "after griddepcontrol.wait where it launches early); no tile waits to prove\n")
        return
    if isinstance(spec, AttentionSpec):
        from cusync_gen.attention_plan import AttentionShape
        from cusync_gen.verify_attention import verify_attention

        for value in ms:
            shape = AttentionShape(batches, value, cached)
            yield plan.describe(shape)
            yield verify_attention(plan, shape).describe() + "\n"
        return
    from cusync_gen.verify import verify

    for value in ms:
        yield plan.describe(value)
        yield verify(plan, value).describe() + "\n"


def _conv_planned(spec: ConvChainSpec, batches: Sequence[int], target: str | None) -> Any:  # noqa: ANN401 (ConvPlan)
    from cusync_gen.conv_plan import make_conv_plan
    from cusync_gen.render import output_files

    plan = make_conv_plan(spec, target)
    output_files(plan)  # raises when two generated files would share a path
    for value in batches:
        plan.check_batch(value)
    return plan


def validate_conv_json(spec: ConvChainSpec, batches: Sequence[int], target: str | None) -> dict[str, Any]:
    """`validate --json` of a conv chain: the plan and its proof at every batch."""
    from cusync_gen.verify_conv import validate_conv_json as conv_json

    return conv_json(_conv_planned(spec, batches, target), batches)


def validate_conv_text(spec: ConvChainSpec, batches: Sequence[int], target: str | None) -> Iterator[str]:
    """`validate` of a conv chain: per batch, the plan's description, then its proof."""
    from cusync_gen.verify_conv import verify_conv

    plan = _conv_planned(spec, batches, target)
    for value in batches:
        yield plan.describe(value)
        yield verify_conv(plan, value).describe() + "\n"

