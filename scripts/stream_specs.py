"""Projects for run() mode stream's GPU call (scripts/gpu_stream_mode.sh), generated here (the GPU machine has no
pydantic): tests/data/decode_stream_sm90.yaml as it is, and the shipped sm90 MLP chains (GeLU, fused SwiGLU,
and gemm -> swiglu -> gemm) with `optimizations: {stream_weights: true}` and without their measured `dispatch:`
table (so that run()'s rule takes mode stream at M <= 64), each renamed `<name>_stream`.

    python3 scripts/stream_specs.py .gen-stream
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cusync_gen.render import generate  # noqa: E402
from cusync_gen.spec.loading import read_spec_data  # noqa: E402

SHIPPED = ("gpt3_mlp_sm90", "llama_mlp_fused_sm90", "llama_mlp_sm90")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    generate(REPO / "tests" / "data" / "decode_stream_sm90.yaml", out / "decode_stream_sm90", force=True)
    for name in SHIPPED:
        data = read_spec_data(REPO / "cusync_gen" / "examples" / f"{name}.yaml")
        data["name"] = f"{name}_stream"
        data.setdefault("optimizations", {})["stream_weights"] = True
        data.pop("dispatch", None)
        spec = out / f"{name}_stream.json"
        spec.write_text(json.dumps(data, indent=2) + "\n")
        generate(spec, out / f"{name}_stream", force=True)
    print(" ".join(sorted(p.name for p in out.iterdir() if p.is_dir())))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".gen-stream"))
