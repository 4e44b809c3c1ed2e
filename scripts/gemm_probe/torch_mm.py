"""PyTorch's matmul on the probe's GEMM shapes (fp16, same M list): what eager PyTorch's cuBLASLt picks.

Usage: python3 torch_mm.py MS SHAPES REPEATS  (same spellings as run.sh); one JSON line per point.
"""
import json
import sys

import torch


def main() -> None:
    ms = [int(x) for x in sys.argv[1].split(",")]
    shapes = [s.split(":") for s in sys.argv[2].split(",")]
    repeats = int(sys.argv[3])
    for n, k, b in shapes:
        n, k = int(n), int(k)
        w = torch.randn(n, k, device="cuda", dtype=torch.half) if b == "c" else torch.randn(k, n, device="cuda", dtype=torch.half)
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.half)
            f = (lambda: x @ w.t()) if b == "c" else (lambda: x @ w)
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            times = []
            for _ in range(repeats):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) * 1000)
            times.sort()
            us = times[len(times) // 2]
            print(json.dumps({"n": n, "k": k, "b": "col" if b == "c" else "row", "m": m, "variant": "torch_mm",
                              "ok": True, "us": round(us, 2), "tflops": round(2 * m * n * k / us * 1e-6, 1)}), flush=True)


if __name__ == "__main__":
    main()
