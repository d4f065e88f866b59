"""era's weight-only int8 linear on a GPU: correctness, kernel speed, and a decoder's decode / memory.

    check_int8_cuda.py [--ops LIB.so] [--work DIR] [--layers 8] [--json out.json]

Needs a CUDA GPU, and a checkout of era plus a compiler (g++, nvcc, ninja) where --ops is not
given. It loads era's own `era::int8_linear` (src/kernels/int8_linear.cpp, the CUDA kernel in
src/kernels/int8_linear_cuda.cu and the CPU kernel it shares cpu_gemv.cpp with), compiled into a
small operator library with torch.utils.cpp_extension (or the one --ops names, built so before), so
what runs is the C++ code era_core runs, driven from Python. Three parts:
  1. the operator against a float64 reference on shapes that take the kernel (1-4 rows, K a
     multiple of 16) and ones that do not (K = 40, 64 rows), float32 / float16 / bfloat16, with
     and without bias: the largest error relative to the output's largest magnitude;
  2. the 7B model's linear shapes at one row: era's kernel, the same weight in bf16 (F.linear,
     cuBLAS), LibTorch's own _weight_int8pack_mm, era's GEMM path (gemv_max_rows = 0: the weight
     dequantised by era's kernel, then cuBLAS) and the path before that kernel (the weight cast,
     cuBLAS, the sums scaled): microseconds and weight GB/s, each the median of interleaved
     CUDA-event timings;
  2b. the layer shapes at 160 and 600 rows (a prefill): bf16 cuBLAS, era's GEMM path, and the
     previous path;
  3. two random bundles of the 7B width (hidden 4096, MLP 11008; --layers layers), bf16 and
     weight-only int8 (tools/make_random_bundle.py): their decoders on the GPU as era drives them
     (tools/era_tools/compare_decoders.py's runner): weight memory, prefill of 160 tokens and
     ms/token over 64 greedy steps, alternating; prefill of 160 and 600 tokens, bf16 and int8
     alternating (--rounds); then the int8 decoder's logit error and greedy agreement against the
     bf16 one.
Exit status 1 where part 1 finds an error above its bound.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# compare_decoders, int8_weights and make_random_bundle are imported where used, after era's
# library is loaded: importing them defines the era:: operators in Python (era_ops.py) unless
# the process already has them, and a library loaded after that would define them twice (abort).

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding era_tools
ROOT = os.path.dirname(TOOLS)  # the checkout, where era's sources are
# era's operator and what it calls: the CPU kernel, the CUDA kernel, and util/device.cpp (the one
# file of era that calls LibTorch's CUDA APIs: the current stream) with the error type it throws;
# onednn_linear.cpp and cpu_widened_linear.cpp because cpu_gemv.cpp registers every era:: operator
# of the bundle format (and the int8 operator's CPU slices are widened_linear's). Every era source
# file these include a header of is listed (tests/python/test_int8_weights.py checks): a missing
# one is an undefined symbol only when the library loads, on the GPU machine.
OP_SOURCES = ["src/kernels/int8_linear.cpp", "src/kernels/cpu_gemv.cpp", "src/kernels/onednn_linear.cpp",
              "src/kernels/cpu_widened_linear.cpp", "src/kernels/cpu_widened_attention.cpp",
              "src/kernels/cpu_convert.cpp", "src/kernels/int8_linear_cuda.cu", "src/util/device.cpp",
              "src/util/kernel_threads.cpp",
              "src/era/error.cpp"]
# The 7B model's per-layer linear shapes (N x K): q/k/v/o, gate/up, down
LAYER_SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="era's operator library (default: build it into --work)")
    p.add_argument("--work", default="/tmp/era-int8-cuda", help="build and bundle folder")
    p.add_argument("--layers", type=int, default=8, help="decoder layers of the 7B-width bundles (0: skip part 3)")
    p.add_argument("--rounds", type=int, default=8, help="part 3b's prefill rounds (after one warm-up)")
    p.add_argument("--json", help="also write the numbers here")
    return p.parse_args(argv)


def build_ops(work):
    from torch.utils import cpp_extension
    build = os.path.join(work, "ops")
    os.makedirs(build, exist_ok=True)
    return cpp_extension.load(
        name="era_int8_ops", sources=[os.path.join(ROOT, s) for s in OP_SOURCES],
        extra_include_paths=[os.path.join(ROOT, "src")], build_directory=build, is_python_module=False,
        extra_cflags=["-O3", "-fopenmp", "-DERA_WITH_CUDA_KERNELS=1", "-DERA_WITH_CUDA=1"], extra_cuda_cflags=["-O3"],
        extra_ldflags=["-fopenmp"], verbose=False)


def op(x, w, s, b, rows):
    return torch.ops.era.int8_linear(x, w, s, b, rows, 0)


def previous_gemm_path(x, w, s, b):
    """era's GPU GEMM path before the dequantisation kernel, op for op: the weight cast to x's
    dtype, cuBLAS, the float32 sums scaled, the bias added, cast back."""
    y = torch.matmul(x, w.to(x.dtype).t()).float().mul_(s)
    if b is not None:
        y.add_(b.float())
    return y.to(x.dtype)


def part_correctness():
    from . import int8_weights
    g = torch.Generator().manual_seed(0)
    rows = []
    worst = 0.0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for (m, n, k) in ((1, 4096, 4096), (4, 11008, 4096), (3, 4096, 11008), (2, 33, 48), (1, 7, 40), (64, 300, 256)):
            for with_bias in (False, True):
                x = torch.randn(m, k, generator=g)
                w, s = int8_weights.quantize_rows(torch.randn(n, k, generator=g))
                b = torch.randn(n, generator=g) if with_bias else None
                # the reference sees the activations rounded to `dtype`, as the kernel does
                ref = (x.to(dtype).double() @ w.double().t()) * s.double() + (b.to(dtype).double() if b is not None else 0)
                args = (x.to(dtype).cuda(), w.cuda(), s.cuda(), b.to(dtype).cuda() if b is not None else None)
                # the kernel (up to 4 rows), then the GEMM path
                for path, rows_arg in (("kernel", 4), ("gemm", 0)):
                    y = op(*args, rows_arg)
                    assert y.dtype == dtype and y.shape == (m, n), (y.dtype, y.shape)
                    err = float((y.double().cpu() - ref).abs().max() / ref.abs().max())
                    # float32: summation order only; fp16 / bf16: one rounding of the output (and,
                    # on the GEMM path, of each dequantised weight: a random walk, well inside)
                    bound = 1e-5 if dtype == torch.float32 else (2e-3 if dtype == torch.float16 else 8e-3)
                    worst = max(worst, err / bound)
                    took = "kernel" if path == "kernel" and m <= 4 and k % 16 == 0 else (
                        "dequantize+cuBLAS" if k % 16 == 0 else "cast+GEMM")
                    rows.append({"dtype": str(dtype).split(".")[-1], "rows": m, "N": n, "K": k, "bias": with_bias,
                                 "path": path, "took": took, "error": err, "bound": bound, "ok": err <= bound})
    bad = [r for r in rows if not r["ok"]]
    print(f"part 1: {len(rows)} cases, {len(bad)} above their bound; worst error / bound {worst:.3f}")
    for r in bad:
        print("  FAILED", r)
    return rows, not bad


def time_us(fn, iters=200):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / iters


def part_kernel_speed():
    from . import int8_weights
    out = []
    print("part 2: one row, bf16 activations; microseconds a call (weight GB/s), median of 5 interleaved rounds")
    print(f"  {'N x K':>12} | {'era int8':>16} | {'bf16 cuBLAS':>16} | {'_weight_int8pack_mm':>20} | "
          f"{'dequantize+GEMM':>16} | {'cast+GEMM+scale':>16}")
    for (n, k) in ((4096, 4096), (11008, 4096), (4096, 11008), (32064, 4096)):
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        wf = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        w, s = (t.cuda() for t in int8_weights.quantize_rows(wf))
        s_bf = s.to(torch.bfloat16)
        cases = {"era": lambda: op(x, w, s, None, 4), "bf16": lambda: F.linear(x, wf),
                 "int8pack": lambda: torch._weight_int8pack_mm(x, w, s_bf),
                 "convert": lambda: op(x, w, s, None, 0), "previous": lambda: previous_gemm_path(x, w, s, None)}
        for fn in cases.values():  # warm-up
            fn()
        times = {key: [] for key in cases}
        for _ in range(5):
            for key, fn in cases.items():
                times[key].append(time_us(fn))
        med = {key: statistics.median(v) for key, v in times.items()}
        gbps = {key: (n * k * (2 if key == "bf16" else 1)) / (med[key] * 1e3) for key in med}
        cell = {key: f"{med[key]:7.1f} ({gbps[key]:5.0f})" for key in med}
        print(f"  {n:>5} x {k:<5} | {cell['era']:>16} | {cell['bf16']:>16} | {cell['int8pack']:>20} | {cell['convert']:>16} | {cell['previous']:>16}")
        out.append({"N": n, "K": k, "us": med, "weight_gbps": gbps})
    return out


def part_prefill_speed():
    """Many rows (a prefill) on the 7B model's layer shapes: era's GEMM path (the weight
    dequantised, then cuBLAS) against the bf16 weight's cuBLAS product and the previous path
    (cast, GEMM, scale)."""
    from . import int8_weights
    out = []
    keys = ["bf16", "int8", "previous"]
    print("part 2b: prefill rows, bf16 activations; microseconds a call, median of 5 interleaved rounds of 50")
    print("  " + f"{'rows':>4} {'N x K':>13} | " + " | ".join(f"{k:>9}" for k in keys))
    for rows in (160, 600):
        for (n, k) in LAYER_SHAPES:
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            wf = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            w, s = (t.cuda() for t in int8_weights.quantize_rows(wf))

            cases = {"bf16": lambda: F.linear(x, wf), "int8": lambda: op(x, w, s, None, 4),
                     "previous": lambda: previous_gemm_path(x, w, s, None)}
            for fn in cases.values():
                fn()
            times = {key: [] for key in cases}
            for _ in range(5):
                for key, fn in cases.items():
                    times[key].append(time_us(fn, 50))
            med = {key: statistics.median(v) for key, v in times.items()}
            print("  " + f"{rows:>4} {n:>5} x {k:<5} | " + " | ".join(f"{med[key]:9.1f}" for key in keys))
            out.append({"rows": rows, "N": n, "K": k, "us": med})
    # the dequantisation alone, the int8 call minus bf16's product, is a pass over the weight:
    # its rate counting one read of int8 and one write of bf16
    for r in out:
        extra = r["us"]["int8"] - r["us"]["bf16"]
        r["dequantize_tbps_estimate"] = r["N"] * r["K"] * 3 / (extra * 1e6) if extra > 0 else None
    return out


def make_bundles(work, layers):
    """The two random bundles (made once per --work folder): the 7B width at `layers` layers."""
    from . import make_random_bundle
    # tok_vocab 1000: the pieces of the tokenizer make_random_bundle trains (image token 1000)
    config = make_random_bundle.preset_config("llava-1.5-7b", "bfloat16", 1000)
    config["text_config"]["num_hidden_layers"] = layers
    os.makedirs(work, exist_ok=True)
    config_path = os.path.join(work, f"l7b{layers}-config.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    made = {}
    env = dict(os.environ, PYTHONPATH=TOOLS)
    for name, extra in (("bf16", []), ("int8", ["--int8", "decoder", "--int8-scheme", "weight-only"])):
        out = made[name] = os.path.join(work, f"l7b{layers}-{name}")
        if os.path.isfile(os.path.join(out, "manifest.json")):
            continue
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "era_tools.make_random_bundle", "--config", config_path,
                        "--dtype", "bfloat16", "--no-check", "--out", out] + extra, check=True, env=env)
        print(f"  made {out} in {time.time() - t0:.0f} s")
    return made


def part_decoder(work, layers, rounds):
    from . import compare_decoders
    bundles = make_bundles(work, layers)
    prompt, steps = 160, 64
    result = {}
    runners = {}
    for name, path in bundles.items():
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        m, manifest = compare_decoders.load(path, torch.bfloat16, "cuda")
        torch.cuda.synchronize()
        result[name] = {"weights_gib": (torch.cuda.memory_allocated() - before) / 2**30, "prefill_ms": [], "decode_ms": []}
        runners[name] = (m, manifest)
    g = torch.Generator().manual_seed(0)
    vocab = runners["bf16"][1]["tokens"]["tokenizer_vocab_size"]
    ids = torch.randint(3, vocab, (1, prompt), generator=g)
    with torch.no_grad():
        for _ in range(3):  # rounds, alternating the two decoders
            for name, (m, manifest) in runners.items():
                r = compare_decoders.Runner(m, manifest, torch.bfloat16, prompt + steps + 1, "cuda")
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                tok = int(r.step(ids, True)[0, -1].argmax())
                t1 = time.perf_counter()
                for _ in range(steps):
                    tok = int(r.step(torch.tensor([[tok]]), True)[0, -1].argmax())
                t2 = time.perf_counter()
                result[name]["prefill_ms"].append((t1 - t0) * 1e3)
                result[name]["decode_ms"].append((t2 - t1) * 1e3 / steps)
    # prefill of 160 and 600 tokens, bf16 and int8 alternating
    prefill = {name: {160: [], 600: []} for name in runners}
    with torch.no_grad():
        for _ in range(rounds + 1):
            for length in (160, 600):
                ids_n = torch.randint(3, vocab, (1, length), generator=g)
                for name, (m, manifest) in runners.items():
                    r = compare_decoders.Runner(m, manifest, torch.bfloat16, length + 1, "cuda")
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    int(r.step(ids_n, True)[0, -1].argmax())
                    prefill[name][length].append((time.perf_counter() - t0) * 1e3)
    print(f"part 3b: decoder prefill, bf16 and int8 alternating; ms, median of {rounds} rounds (after one that warms "
          "each length's shapes up), then each round's")
    for key, by_len in prefill.items():
        print(f"  prefill {key:8}: " + ", ".join(
            f"{n} tokens {statistics.median(v[1:]):.2f} ms ({' / '.join(f'{t:.1f}' for t in v[1:])})"
            for n, v in by_len.items()))
    runners.clear()
    torch.cuda.empty_cache()
    acc = compare_decoders.compare(compare_decoders.parse_args(
        ["--reference", bundles["bf16"], "--candidate", bundles["int8"], "--device", "cuda"]))
    print(f"part 3: 7B width, {layers} layers, bf16 vs weight-only int8 on {torch.cuda.get_device_name()}")
    for name, r in result.items():
        print(f"  {name:5}: weights {r['weights_gib']:.2f} GiB, prefill {prompt} tokens "
              f"{' / '.join(f'{v:.1f}' for v in r['prefill_ms'])} ms, decode "
              f"{' / '.join(f'{v:.2f}' for v in r['decode_ms'])} ms/token")
    result["prefill_variants_ms"] = {key: {str(n): v for n, v in by_len.items()} for key, by_len in prefill.items()}
    result["accuracy"] = acc
    return result


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("check_int8_cuda: error: no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.work, exist_ok=True)
    if not args.ops and not os.path.isfile(os.path.join(ROOT, OP_SOURCES[0])):
        print(f"check_int8_cuda: error: no --ops library, and {ROOT} is not an era checkout to build one from",
              file=sys.stderr)
        return 2
    t0 = time.time()
    try:
        if not args.ops:
            raise OSError("no --ops given")
        torch.ops.load_library(args.ops)
    except (OSError, RuntimeError) as e:
        print(f"building era's operator library ({e})")
        build_ops(args.work)
    print(f"era's operators loaded in {time.time() - t0:.0f} s on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}

    def save():  # after each part: a run cut short keeps what it measured
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=1)
    report["correctness"], ok = part_correctness()
    save()
    report["kernel_speed"] = part_kernel_speed()
    save()
    report["prefill_speed"] = part_prefill_speed()
    save()
    report["decoder"] = part_decoder(args.work, args.layers, args.rounds) if args.layers > 0 else None
    save()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
