"""Weight sync into the vLLM engine: seconds per update, per model size and path.

    .venv/bin/python bench/training/weight_sync_bench.py [--repeats 3] [--big-layers 12]

Models: the tiny model of :mod:`rockroll.agentrl.models.tiny` and a ~100M-parameter Qwen2-shaped model
with random weights (``transformers.Qwen2Config``: hidden 768, 12 layers, 12 heads, 4 KV heads,
MLP 2048, vocab 32,000, tied embeddings). Paths:

* ``folder``: a state dict staged as ``model.safetensors`` in the engine's work folder;
* ``bytes``: the same file's bytes sent through the host's pipe (no disk);
* ``ckpt``: a checkpoint folder the trainer saved itself (``save_pretrained``), passed as a path.

Columns: ``stage_s`` (trainer side: serialising the state dict), ``load_s`` (host side: the
worker's in-place reload, tied-layer refresh and prefix-cache reset), ``total_s`` (the whole
``update_weights`` call); medians over ``--repeats`` updates, each with freshly perturbed weights.
Needs the vLLM venv (``bash scripts/setup-vllm.sh``); runs on CPU (float32, eager).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from rockroll.agentrl.engines.vllm_engine import VLLMEngine
from rockroll.agentrl.models.tiny import build_tiny_model, load_tokenizer


def build_big(out: Path, layers: int) -> Path:
    cfg = Qwen2Config(
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=layers,
        num_attention_heads=12,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        use_sliding_window=False,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(out)
    return out


def bench_model(name: str, path: Path, tokenizer, repeats: int, workdir: Path) -> list[tuple]:
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    params = sum(p.numel() for p in model.parameters())
    extra = {} if tokenizer is None else {"tokenizer": tokenizer, "skip_tokenizer_init": True}
    start = time.perf_counter()
    engine = VLLMEngine(path, dtype="float32", enforce_eager=True, max_model_len=512, cpu_threads=2, **extra)
    startup = time.perf_counter() - start
    rows = []
    version = 0
    for transport in ("folder", "bytes", "ckpt"):
        stage, load, total = [], [], []
        for _ in range(repeats):
            version += 1
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 1e-3)
            t0 = time.perf_counter()
            if transport == "ckpt":
                ckpt = workdir / f"{name}-ckpt"
                model.save_pretrained(ckpt)
                save_s = time.perf_counter() - t0
                engine.update_weights(ckpt, version)
            else:
                engine.weight_transport = transport  # type: ignore[assignment]
                engine.update_weights(model.state_dict(), version)
                save_s = engine.last_update["staging_seconds"]
            total.append(time.perf_counter() - t0)
            stage.append(save_s)
            load.append(engine.last_update["seconds"])
        rows.append((name, params, transport, *(statistics.median(x) for x in (stage, load, total))))
    import asyncio

    asyncio.run(engine.close())
    print(f"# {name}: engine start {startup:.1f} s", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big-layers", type=int, default=12)
    args = ap.parse_args()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="weight-sync-bench-") as tmp:
        work = Path(tmp)
        tiny = build_tiny_model(work / "tiny")
        big = build_big(work / "big", args.big_layers)
        rows = bench_model("tiny", tiny, None, args.repeats, work)
        rows += bench_model("qwen2-100m", big, load_tokenizer(tiny), args.repeats, work)
    print(f"{'model':<12} {'params':>12} {'path':<7} {'stage_s':>8} {'load_s':>8} {'total_s':>8}")
    for name, params, path, stage, load, total in rows:
        print(f"{name:<12} {params:>12,} {path:<7} {stage:>8.3f} {load:>8.3f} {total:>8.3f}")


if __name__ == "__main__":
    main()
