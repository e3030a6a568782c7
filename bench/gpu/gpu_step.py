"""Training-step cost of a Qwen2-shaped model on one GPU: forward, backward and optimizer time, peak memory.

    python bench/gpu/gpu_step.py --size tiny|0.5b [--model DIR] [--batch 16] [--seq 512] [--steps 5] [--out F.json]

``--size 0.5b`` builds a Qwen2-0.5B-shaped model (hidden 896, 24 layers, 14 heads, 2 key/value
heads, MLP 4,864) with the project's byte-level tokenizer (a small vocabulary, so about 0.36B
parameters instead of 0.49B); ``--model DIR`` loads a local Hugging Face model instead. Random
weights, bf16 on CUDA (fp32 on CPU), AdamW, a causal-LM loss over ``--batch`` x ``--seq`` random
tokens. Prints one table row per step and writes the medians to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

SIZES = {
    "tiny": {},
    "0.5b": {"hidden_size": 896, "num_layers": 24, "num_heads": 14, "num_kv_heads": 2, "intermediate_size": 4864},
}


def build(size: str, model: Path | None, device: str):
    import torch

    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model, load_model_and_tokenizer

    path = model
    if path is None:
        path = build_tiny_model(Path(tempfile.mkdtemp(prefix="gpu-step-")), TinyModelConfig(**SIZES[size]))
    dtype = "bfloat16" if device == "cuda" else "float32"
    net, _tok = load_model_and_tokenizer(path, device=device, dtype=dtype)
    net.train()
    return net, torch.optim.AdamW(net.parameters(), lr=1e-5)


def timed(device: str, fn):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--model", type=Path, default=None, help="a local Hugging Face model folder instead of --size")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    import torch

    net, opt = build(args.size, args.model, args.device)
    params = sum(x.numel() for x in net.parameters())
    vocab = net.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.seq), device=args.device)
    rows = []
    for step in range(args.steps + 1):  # the first step warms up (kernels, allocator) and is not counted
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        out, fwd = timed(args.device, lambda: net(input_ids=ids, labels=ids))
        _, bwd = timed(args.device, out.loss.backward)
        _, optim = timed(args.device, lambda: (opt.step(), opt.zero_grad(set_to_none=True)))
        peak = torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else float("nan")
        if step:
            rows.append({"forward_s": fwd, "backward_s": bwd, "optimizer_s": optim, "peak_gib": peak})
            print(
                f"step {step}: forward {fwd:.3f} s, backward {bwd:.3f} s, optimizer {optim:.3f} s, peak {peak:.2f} GiB"
            )
    summary = {
        "size": str(args.model or args.size),
        "params": params,
        "batch": args.batch,
        "seq": args.seq,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        **{k: statistics.median(r[k] for r in rows) for k in rows[0]},
    }
    summary["tokens_per_s"] = (
        args.batch * args.seq / (summary["forward_s"] + summary["backward_s"] + summary["optimizer_s"])
    )
    print(json.dumps(summary))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
