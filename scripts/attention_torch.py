"""PyTorch baseline for the attention examples: the same layer as the generated chain, timed on the GPU.

    python3 scripts/attention_torch.py --chain gpt3_attention --m 512,1024,2048            # prompt
    python3 scripts/attention_torch.py --chain gpt3_attention --m 1 --batch 1,2,4 --cache 511,1023,2047

It runs what an inference engine runs: qkv = x @ W_qkv, the new K and V written into a preallocated
KV cache, torch.nn.functional.scaled_dot_product_attention over the cached + new keys (causal for a
prompt), and y = o @ W_o; captured in a CUDA graph (no launch overhead), timed with CUDA events,
median of --repeats replays. Prints one JSON line per point (same keys as the generated bench).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

SHAPES = {"gpt3_attention": (12288, 12, 128), "llama_attention": (8192, 8, 128)}  # hidden, heads, head_dim


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chain", choices=sorted(SHAPES), required=True)
    ap.add_argument("--m", type=ints, default=[512, 1024, 2048], help="new tokens per sequence")
    ap.add_argument("--batch", type=ints, default=[1])
    ap.add_argument("--cache", type=ints, default=[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
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
