#!/usr/bin/env python3
"""Hugging Face transformers on the same synthetic shape as bench/gpu_decode, for a
side-by-side (to run on the GPU machine):

    python3 bench/hf_transformers.py [--shape llama-3-8b] [--batches 1,8,64,256]
                                     [--contexts 512,2048] [--steps 128] [--mode both]
    python3 bench/hf_transformers.py --workload 256/256x1000 [--static-batch 64] ...

Without --workload: the B1 grid. Two modes, each printing one JSON line per (batch,
context) on stdout:

  static  model.generate(..., cache_implementation="static"): a padded static batch with
          a static KV cache (torch.compile-friendly). Decode tok/s is measured as
          (generate with `steps` new tokens) minus (generate with 1 new token), so the
          prefill of the context is not counted, as in gpu_decode.
  cb      model.generate_batch(...): transformers' continuous batching (paged KV cache).
          Its time includes prefill (generate_batch runs requests to completion); the
          prefill-only time is measured the same way and subtracted.

With --workload ISL/OSLxN (V2 is 256/256x1000, F1 128/128x8192 in WORKLOADS.md): the
same fixed-shape workload that `batchgen bench --workload ISL/OSLxN` runs, one JSON line
per mode with output tok/s over the whole run (prefill included, as batchgen's
results.output_tok_s): `static` generates the requests in padded batches of
--static-batch (all prompts have the same length, so there is no padding), `cb` hands all
N to generate_batch at once. Prompt ids are random, not batchgen's (the throughput of a
fixed shape does not depend on the ids; EOS is disabled).

Weights are random (bf16, the shape's config), prompts are random token ids, EOS is
disabled (min_new_tokens = steps) so every sequence decodes exactly `steps` tokens, like
batchgen's B1 benchmark. Shapes mirror core/model/synth.c.
"""
import argparse
import json
import sys
import time

SHAPES = {
    # name: layers, hidden, heads, kv heads, ffn, vocab, rope theta, tied
    "llama-3-8b": (32, 4096, 32, 8, 14336, 128256, 500000.0, False),
    "llama-3.2-1b": (16, 2048, 32, 8, 8192, 128256, 500000.0, True),
    "llama-3.2-3b": (28, 3072, 24, 8, 8192, 128256, 500000.0, True),
    "llama-2-7b": (32, 4096, 32, 32, 11008, 32000, 10000.0, False),
    "tinyllama-1.1b": (22, 2048, 32, 4, 5632, 32000, 10000.0, False),
    "llama-100m": (12, 768, 12, 12, 2048, 32000, 10000.0, True),
}


def parse_list(s):
    return [int(x) for x in s.split(",") if x]


def build_model(shape, torch, transformers):
    n_layer, hidden, heads, kv, ffn, vocab, theta, tied = SHAPES[shape]
    cfg = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=n_layer,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=8192,
        rope_theta=theta,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tied,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.eval()
    return model


def sync(torch):
    torch.cuda.synchronize()


def run_static(model, torch, B, L, steps):
    gen = torch.Generator(device="cuda").manual_seed(B * 100003 + L)
    ids = torch.randint(3, model.config.vocab_size, (B, L), device="cuda", generator=gen)
    attn = torch.ones_like(ids)

    def go(n):
        sync(torch)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=attn,
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                cache_implementation="static",
                pad_token_id=0,
            )
        sync(torch)
        return time.perf_counter() - t0, out

    go(2)  # warm-up (allocations, kernels, compilation)
    t_pre, _ = go(1)
    t_all, out = go(steps)
    assert out.shape[1] == L + steps, out.shape
    dt = max(t_all - t_pre, 1e-9)
    return {"tok_per_s": B * (steps - 1) / dt, "ms_per_step": dt * 1e3 / (steps - 1)}


def run_cb(model, torch, transformers, B, L, steps):
    from transformers.generation import GenerationConfig

    gen = torch.Generator().manual_seed(B * 100003 + L)
    inputs = torch.randint(3, model.config.vocab_size, (B, L), generator=gen).tolist()

    def go(n):
        gc = GenerationConfig(
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )
        sync(torch)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate_batch(inputs=inputs, generation_config=gc, progress_bar=False)
        sync(torch)
        return time.perf_counter() - t0, out

    go(2)
    t_pre, _ = go(1)
    t_all, out = go(steps)
    n_tok = 0
    for r in out.values():
        toks = getattr(r, "generated_tokens", None)
        n_tok += len(toks) if toks is not None else steps
    dt = max(t_all - t_pre, 1e-9)
    return {"tok_per_s": (n_tok - B) / dt, "ms_per_step": dt * 1e3 / (steps - 1),
            "generated_tokens": n_tok}


def parse_workload(spec):
    shape, _, n = spec.partition("x")
    isl, _, osl = shape.partition("/")
    return int(isl), int(osl), int(n or 1000)


def run_workload(model, torch, transformers, mode, isl, osl, n, static_batch):
    """Output tok/s of n requests of isl prompt tokens and osl new tokens, end to end."""
    gen = torch.Generator().manual_seed(isl * 1000003 + osl * 1009 + n)
    prompts = torch.randint(3, model.config.vocab_size, (n, isl), generator=gen)
    if mode == "static":
        run_static(model, torch, min(static_batch, n), isl, 2)  # warm-up and compile
        sync(torch)
        t0 = time.perf_counter()
        produced = 0
        for i in range(0, n, static_batch):
            ids = prompts[i:i + static_batch].to("cuda")
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     max_new_tokens=osl, min_new_tokens=osl, do_sample=False,
                                     cache_implementation="static", pad_token_id=0)
            produced += (out.shape[1] - isl) * out.shape[0]
        sync(torch)
        dt = time.perf_counter() - t0
        return {"output_tok_s": produced / dt, "wall_s": dt, "output_tokens": produced,
                "static_batch": static_batch}
    from transformers.generation import GenerationConfig

    gc = GenerationConfig(max_new_tokens=osl, min_new_tokens=osl, do_sample=False,
                          eos_token_id=2, pad_token_id=0)
    inputs = prompts.tolist()
    with torch.inference_mode():  # warm-up on a few requests
        model.generate_batch(inputs=inputs[:8], generation_config=gc, progress_bar=False)
    sync(torch)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate_batch(inputs=inputs, generation_config=gc, progress_bar=False)
    sync(torch)
    dt = time.perf_counter() - t0
    produced = 0
    for r in out.values():
        toks = getattr(r, "generated_tokens", None)
        produced += len(toks) if toks is not None else osl
    return {"output_tok_s": produced / dt, "wall_s": dt, "output_tokens": produced}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="llama-3-8b", choices=sorted(SHAPES))
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--contexts", default="512,2048")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--mode", default="both", choices=["static", "cb", "both"])
    ap.add_argument("--workload", help="ISL/OSLxN: a fixed-shape workload instead of the grid")
    ap.add_argument("--static-batch", type=int, default=64)
    a = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"hf_transformers: {e}; install torch and transformers", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("hf_transformers: no CUDA device; nothing measured", file=sys.stderr)
        return 3
    model = build_model(a.shape, torch, transformers)
    dev = torch.cuda.get_device_name(0)
    print(f"hf_transformers: transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{a.shape} bf16 on {dev}", file=sys.stderr)
    modes = ["static", "cb"] if a.mode == "both" else [a.mode]
    if a.workload:
        isl, osl, n = parse_workload(a.workload)
        for mode in modes:
            rec = {"tool": "transformers", "mode": mode, "shape": a.shape, "device": dev,
                   "workload": a.workload}
            try:
                rec.update(run_workload(model, torch, transformers, mode, isl, osl, n,
                                        a.static_batch))
            except torch.cuda.OutOfMemoryError:
                rec["skipped"] = "out of memory"
                torch.cuda.empty_cache()
            except Exception as e:  # an API difference must not stop the other mode
                rec["error"] = f"{type(e).__name__}: {e}"
            print(json.dumps(rec), flush=True)
        return 0
    for L in parse_list(a.contexts):
        for B in parse_list(a.batches):
            for mode in modes:
                rec = {"tool": "transformers", "mode": mode, "shape": a.shape, "device": dev,
                       "batch": B, "context": L, "steps": a.steps}
                try:
                    if mode == "static":
                        rec.update(run_static(model, torch, B, L, a.steps))
                    else:
                        rec.update(run_cb(model, torch, transformers, B, L, a.steps))
                except torch.cuda.OutOfMemoryError:
                    rec["skipped"] = "out of memory"
                    torch.cuda.empty_cache()
                except Exception as e:  # an API difference must not stop the sweep
                    rec["error"] = f"{type(e).__name__}: {e}"
                print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
