"""The sm90 attention results page from one device run of scripts/gpu_check_attention_sm90.sh.

    python3 scripts/attention_sm90_results.py RUN_DIR [LAYER:MODE=OTHER_RUN_DIR ...] > benchmarks/results/<date>-h200-attention.md

LAYER:MODE=DIR takes that table (e.g. gpt3:generation) from another run: ours and PyTorch's both from that
run, so every ratio compares two numbers measured in the same device run.

RUN_DIR holds check-<e>.jsonl, time-<e>.jsonl, torch-<e>.jsonl (and time-simt-<e>.jsonl if the CUDA-core
decode was timed, time-pingpong-<e>.jsonl if the prompts were timed on the FMHA's ping-pong schedule) for e
in llama, gpt3 (and llama3, g7 from scripts/gpu_check_attention_gqa.sh). Where the bench ran Layer::autotune (scripts/gpu_tune_attention_sm90.sh), a column gives the
cuBLASLt candidate each GEMM ran (qkv/proj, 0: the heuristic's first; "s" marks a split-K algorithm). Ratios are PyTorch's layer time over ours (> 1: we are faster).
The last two lines are the geomean and the minimum of the ratio over every timed point of every layer.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

# (label, heads, kv_heads, head_dim, hidden, dtype bytes)
LAYERS = {"llama": ("llama_attention_sm90 (8 q-heads / 1 kv-head, rotary, bf16)", 8, 1, 128, 8192, 2),
          "gpt3": ("gpt3_attention_sm90 (12 heads, fp16)", 12, 12, 128, 12288, 2),
          # several KV heads (scripts/gpu_check_attention_gqa.sh): K and V shared across each group's heads
          "llama3": ("llama3_attention_sm90 (32 q-heads / 8 kv-heads, rotary base 500000, bf16)", 32, 8, 128, 4096, 2),
          "g7": ("gqa_g7 (28 q-heads / 4 kv-heads, rotary base 1e6, bf16; the spec in "
                 "scripts/gpu_check_attention_gqa.sh)", 28, 4, 128, 3584, 2),
          # head widths other than 64 and 128 (scripts/gpu_check_attention_heads.sh)
          "h80": ("h80 (32 q-heads / 8 kv-heads of 80, rotary, fp16; the spec in scripts/gpu_check_attention_heads.sh)",
                  32, 8, 80, 2560, 2),
          "h96": ("h96 (32 heads of 96, rotary, bf16; the spec in scripts/gpu_check_attention_heads.sh)",
                  32, 32, 96, 3072, 2)}
PEAK_TFLOPS = 989.0  # H200 dense fp16/bf16
PEAK_TBS = 4.8


def rows(path: Path) -> dict[str, dict]:
    """The JSON lines of `path`, or of `path`.gz (raw files are kept gzipped), by shape."""
    gz = path.with_name(path.name + ".gz")
    if path.is_file():
        text = path.read_text()
    elif gz.is_file():
        text = gzip.decompress(gz.read_bytes()).decode()
    else:
        return {}
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            out[d["shape"]] = d
    return out


def attn_flops(d: dict, heads: int, dh: int) -> float:
    b, s, c = d["batch"], d["tokens"], d["cache"]
    visible = s * c + s * (s + 1) / 2  # causal, bottom-right: token t sees cache + t + 1 keys
    return 4.0 * dh * heads * b * visible


def kv_bytes(d: dict, kv_heads: int, dh: int, elem: int) -> float:
    return 2.0 * d["batch"] * (d["cache"] + 1) * kv_heads * dh * elem


def algo(a: list | None) -> str:
    """[candidate, K splits, reduction scheme] as the bench reports it: "3", or "3s" for a split-K algorithm."""
    if not a:
        return "-"
    return f"{a[0]}{'s' if len(a) > 1 and a[1] > 1 else ''}"


def main() -> None:
    run = Path(sys.argv[1])
    override = {key: Path(value) for key, value in (a.split("=", 1) for a in sys.argv[2:])}
    ratios: list[float] = []
    out = ["# sm90 attention layer on the H200 (2026-12-03)", "",
           "One layer per GPU shard: qkv (cuBLASLt) -> rope + cache append (ours) -> attention (prompt: CUTLASS's",
           "Hopper FMHA with our bottom-right causal mask and GQA row packing; generation: our split-KV decode on",
           "tensor cores + fixed-order combine) -> proj (cuBLASLt), back to back on one stream with PDL for our",
           "kernels. PyTorch: the same layer (cuBLAS projections, HF-style rotary, cache update, SDPA with",
           "enable_gqa and a bottom-right causal mask), in a CUDA graph. Both: median of the repeats of CUDA-graph",
           "replays timed with CUDA events, after ~2 s of preheat; stage times are each stage's own graph.",
           "Produced by `scripts/gpu_check_attention_sm90.sh` (or `scripts/gpu_tune_attention_sm90.sh`) and",
           "`scripts/attention_sm90_results.py`.", ""]
    for e, (label, hq, hkv, dh, hidden, elem) in LAYERS.items():
        ours, torch, check = rows(run / f"time-{e}.jsonl"), rows(run / f"torch-{e}.jsonl"), rows(run / f"check-{e}.jsonl")
        simt = rows(run / f"time-simt-{e}.jsonl")
        if not ours:
            continue
        out += [f"## {label}", ""]
        if check:
            ok = sum(1 for d in check.values() if d.get("ok"))
            worst = max(max(d.get("attn_err", 0), d.get("layer_err", 0)) for d in check.values())
            out += [f"Correctness: {ok}/{len(check)} shapes ok ({', '.join(check)}): every element written, bitwise "
                    f"equal run to run and from a graph replay, worst relative error vs fp32 {worst:.2e}.", ""]
        for mode in ("prompt", "generation"):
            src = override.get(f"{e}:{mode}", run)
            ours, torch = rows(src / f"time-{e}.jsonl"), rows(src / f"torch-{e}.jsonl")
            simt = rows(src / f"time-simt-{e}.jsonl")
            pts = [d for d in ours.values() if d["mode"] == mode]
            if not pts:
                continue
            if src != run:
                out += [f"({mode}: from run `{src.name}`, ours and PyTorch in that run.)", ""]
            extra = "attention TFLOP/s (% of 989)" if mode == "prompt" else "attention KV TB/s (% of 4.8)"
            kinds = {d.get("decode", "simt") for d in pts}
            other = "tensor-core" if kinds == {"simt"} else "CUDA-core"
            simt_col = f" | {other} decode us" if mode == "generation" and simt else ""
            pingpong = rows(src / f"time-pingpong-{e}.jsonl") if mode == "prompt" else {}
            pp_col = " | ping-pong attention us" if pingpong else ""
            algo_col = " | algorithm qkv/proj" if any("qkv_algo" in d for d in pts) else ""
            cols = 9 + sum(1 for c in (simt_col, pp_col, algo_col) if c)
            out += [f"### {mode}", "",
                    f"| shape | qkv us | rope us | attention us | proj us | layer us | PyTorch us | PyTorch / ours | {extra}"
                    f"{simt_col}{pp_col}{algo_col} |",
                    "| --- " * cols + "|"]
            for d in pts:
                t = torch.get(d["shape"], {}).get("torch_us")
                ratio = t / d["layer_us"] if t else None
                if ratio:
                    ratios.append(ratio)
                if mode == "prompt":
                    tf = attn_flops(d, hq, dh) / (d["attention_us"] * 1e-6) / 1e12
                    rate = f"{tf:.0f} ({100 * tf / PEAK_TFLOPS:.0f}%)"
                else:
                    tb = kv_bytes(d, hkv, dh, elem) / (d["attention_us"] * 1e-6) / 1e12
                    rate = f"{tb:.2f} ({100 * tb / PEAK_TBS:.0f}%)"
                s = simt.get(d["shape"], {}).get("attention_us") if simt_col else None
                simt_cell = (f" | {s:.1f}" if s else " | -") if simt_col else ""
                p = pingpong.get(d["shape"], {}).get("attention_us")
                pp_cell = (f" | {p:.1f}" if p else " | -") if pp_col else ""
                algo_cell = f" | {algo(d.get('qkv_algo'))}/{algo(d.get('proj_algo'))}" if algo_col else ""
                out.append(f"| {d['shape']} | {d['qkv_us']:.1f} | {d['rope_us']:.1f} | {d['attention_us']:.1f} | "
                           f"{d['proj_us']:.1f} | {d['layer_us']:.1f} | {t if t else '-'} | "
                           f"{f'{ratio:.2f}x' if ratio else '-'} | {rate}{simt_cell}{pp_cell}{algo_cell} |")
            out.append("")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out += [f"Points: {len(ratios)} (every layer, prompt and generation).", "",
                f"attention geomean over PyTorch: {geo:.2f}x", f"attention min over PyTorch: {min(ratios):.2f}x"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
