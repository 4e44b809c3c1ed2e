"""PyTorch baseline for the attention examples: the same layer as the generated chain, timed on the GPU.

    python3 scripts/attention_torch.py --chain gpt3_attention --m 512,1024,2048            # prompt
    python3 scripts/attention_torch.py --chain gpt3_attention --m 1 --batch 1,2,4 --cache 511,1023,2047

It runs what an inference engine runs: qkv = x @ W_qkv, the new K and V written into a preallocated
KV cache, torch.nn.functional.scaled_dot_product_attention over the cached + new keys (causal for a
prompt), and y = o @ W_o; captured in a CUDA graph (no launch overhead), timed with CUDA events,
median of --repeats replays. Prints one JSON line per point (same keys as the generated bench).

The sm90 layer (`arch: sm90` attention specs: separate K and V caches [batch, capacity, kv_heads, dh],
grouped-query heads, rotary embeddings, fp16 or bf16) has its own mode, with the sm90 bench's shape
syntax (p:BATCHxTOKENS+CACHE a prompt, g:BATCH+CACHE a generation step):

    python3 scripts/attention_torch.py --sm90 --hidden 8192 --heads 8 --kv-heads 1 --rotary \
        --shapes p:1x1024+0,g:32+4096

It runs x @ W_qkv, the rotary embedding as Hugging Face's LLaMA applies it (rotate_half on q and k, cos
and sin tables of the positions precomputed as the model caches them), the new K and V written into the
caches, SDPA with enable_gqa over the cached + new keys (causal bottom-right: query t sees keys
[0, cache + t]), and o @ W_o; in a CUDA graph, after a preheat, median of --repeats replays.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

def sm90_main(args: argparse.Namespace) -> None:
    from torch.nn.attention.bias import causal_lower_right

    hidden, hq, hkv, dh = args.hidden, args.heads, args.kv_heads, args.head_dim
    dev, dt = "cuda", {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    cols = (hq + 2 * hkv) * dh
    gen = torch.Generator(device=dev).manual_seed(1)
    w_qkv = (torch.rand(hidden, cols, device=dev, generator=gen) * 2 - 1).mul_((3 / hidden) ** 0.5).to(dt)
    w_o = (torch.rand(hq * dh, hidden, device=dev, generator=gen) * 2 - 1).mul_((3 / (hq * dh)) ** 0.5).to(dt)
    inv_freq = args.rotary_base ** (-torch.arange(0, dh, 2, device=dev, dtype=torch.float32) / dh)
    preheated = False
    for shape in args.shapes.split(","):
        if shape.startswith("p:"):
            b, rest = shape[2:].split("x")
            s, cache = (int(v) for v in rest.split("+"))
            batch = int(b)
        else:
            batch, cache = (int(v) for v in shape[2:].split("+"))
            s = 1
        keys = cache + s
        x = (torch.rand(batch * s, hidden, device=dev, generator=gen) * 2 - 1).to(dt)
        k_cache = (torch.rand(batch, keys, hkv, dh, device=dev, generator=gen) * 2 - 1).to(dt)
        v_cache = (torch.rand(batch, keys, hkv, dh, device=dev, generator=gen) * 2 - 1).to(dt)
        pos = torch.arange(cache, keys, device=dev, dtype=torch.float32)
        ang = torch.outer(pos, inv_freq)
        cos = torch.cat([ang.cos(), ang.cos()], -1).to(dt)[None, :, None, :]  # (1, s, 1, dh)
        sin = torch.cat([ang.sin(), ang.sin()], -1).to(dt)[None, :, None, :]
        mask = causal_lower_right(s, keys) if s > 1 and not args.non_causal else None

        def rotate_half(t: torch.Tensor) -> torch.Tensor:
            return torch.cat([-t[..., dh // 2:], t[..., :dh // 2]], -1)

        def layer() -> torch.Tensor:
            qkv = (x @ w_qkv).view(batch, s, hq + 2 * hkv, dh)
            q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
            if args.rotary:
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
            k_cache[:, cache:keys] = k
            v_cache[:, cache:keys] = v
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                               attn_mask=mask, enable_gqa=hkv != hq)
            return o.transpose(1, 2).reshape(batch * s, hq * dh) @ w_o

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                layer()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            layer()
        if not preheated:  # sustained clocks before the first timing
            start = time.monotonic()
            while time.monotonic() - start < args.preheat_s:
                for _ in range(20):
                    graph.replay()
                torch.cuda.synchronize()
            preheated = True
        for _ in range(args.warmup):
            graph.replay()
        times = []
        for _ in range(args.repeats):
            start_e, end_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start_e.record()
            graph.replay()
            end_e.record()
            end_e.synchronize()
            times.append(start_e.elapsed_time(end_e) * 1000.0)
        print(json.dumps({"shape": shape, "batch": batch, "tokens": s, "cache": cache, "dtype": args.dtype,
                          "heads": hq, "kv_heads": hkv, "rotary": args.rotary,
                          "torch_us": round(statistics.median(times), 2), "torch": torch.__version__}), flush=True)


SHAPES = {"gpt3_attention": (12288, 12, 128), "llama_attention": (8192, 8, 128)}  # hidden, heads, head_dim


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chain", choices=sorted(SHAPES))
    ap.add_argument("--sm90", action="store_true", help="the sm90 layer (GQA, rotary, separate K/V caches)")
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rotary", action="store_true")
    ap.add_argument("--non-causal", action="store_true", help="the sm90 layer with causal: false (every key)")
    ap.add_argument("--rotary-base", type=float, default=10000.0)
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--shapes", default="p:1x1024+0,g:32+4096")
    ap.add_argument("--preheat-s", type=float, default=2.0)
    ap.add_argument("--m", type=ints, default=[512, 1024, 2048], help="new tokens per sequence")
    ap.add_argument("--batch", type=ints, default=[1])
    ap.add_argument("--cache", type=ints, default=[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    if args.sm90:
        sm90_main(args)
        return
    if args.chain is None:
        ap.error("--chain is required (or --sm90)")
    hidden, heads, dh = SHAPES[args.chain]
    d = heads * dh
    dev, dt = "cuda", torch.float16
    gen = torch.Generator(device=dev).manual_seed(1)
    w_qkv = (torch.rand(hidden, 3 * d, device=dev, generator=gen) * 2 - 1).mul_((3 / hidden) ** 0.5).to(dt)
    w_o = (torch.rand(d, hidden, device=dev, generator=gen) * 2 - 1).mul_((3 / d) ** 0.5).to(dt)
    for batch in args.batch:
        for cache in args.cache:
            for s in args.m:
                keys = cache + s
                x = (torch.rand(batch * s, hidden, device=dev, generator=gen) * 2 - 1).to(dt)
                kv = (torch.rand(batch, keys, 3 * d, device=dev, generator=gen) * 2 - 1).to(dt)

                def layer() -> torch.Tensor:
                    qkv = x @ w_qkv
                    kv[:, cache:keys] = qkv.view(batch, s, 3 * d)
                    q = kv[:, cache:keys, :d].view(batch, s, heads, dh).transpose(1, 2)
                    k = kv[:, :, d:2 * d].view(batch, keys, heads, dh).transpose(1, 2)
                    v = kv[:, :, 2 * d:].view(batch, keys, heads, dh).transpose(1, 2)
                    if s > 1 and cache > 0:  # causal with a cache: query t sees keys [0, cache + t]
                        mask = torch.ones(s, keys, dtype=torch.bool, device=dev).tril(diagonal=cache)
                        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                    else:
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=s > 1)
                    return o.transpose(1, 2).reshape(batch * s, d) @ w_o

                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        layer()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    layer()
                for _ in range(args.warmup):
                    graph.replay()
                times = []
                for _ in range(args.repeats):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    graph.replay()
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) * 1000.0)
                print(json.dumps({"chain": args.chain, "gpu": torch.cuda.get_device_name(), "m": batch * s,
                                  "batch": batch, "new_tokens": s, "cache_tokens": cache, "keys": keys,
                                  "torch_us": round(statistics.median(times), 2), "torch": torch.__version__}),
                      flush=True)


if __name__ == "__main__":
    main()
