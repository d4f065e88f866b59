"""era beside llama.cpp on the CPU: the same random LLaMA, both engines, interleaved.

    bench_llamacpp.py --llama-cpp SRC [--work DIR] [--layers 8] [--threads N] [--rounds 3]
                      [--prompts 600,160] [--decode 32] [--era-bench build/era_bench]
                      [--llama-cmake-args="-DFLAG=VALUE ..."]

Nothing is downloaded. SRC is a llama.cpp source tree the user already has (a git checkout, or
the vendor/llama.cpp folder of the llama-cpp-python sdist); it is built once under
WORK/llama.cpp-build (llama-bench only, Release, GGML_NATIVE; with --llama-cmake-args, which are
added to its configure line, under WORK/llama.cpp-build-<digest of those arguments>). The model is drawn once by
tools/make_random_bundle.py from a LLaVA-1.5 config whose language model has LLaMA-7B's width
(hidden 4096, MLP 11008, 32 heads, vocabulary 32064) and --layers layers:
  - era: bfloat16 bundle, and the same weights with --int8 decoder;
  - llama.cpp: the same language model written as a Hugging Face LlamaForCausalLM folder
    (make_random_bundle.py --text-model) and converted by SRC's own convert_hf_to_gguf.py to
    bf16 and Q8_0 GGUF files.
The bundle's vision tower is tiny (its time is not measured); prompts are text + visual tokens
(era_bench --methods random --tokens K, K chosen so the prompt has exactly the asked length).

Per round, each of the four runs once in turn (era bf16, llama.cpp bf16, era int8, llama.cpp
Q8_0), so a busy machine slows all four alike; the table gives each number's median over the
rounds. Prefill: prompt tokens / prefill time (era_bench's prefill stage; llama-bench's pp test).
Decode: ms per generated token (era: decode steps after the shorter prompt; llama-bench: tg from
an empty context). RSS: the process's peak resident memory (getrusage of the child), model
loading included.

A run that fails (e.g. llama.cpp killed by an instruction the CPU or its VM refuses) does not
stop the others: its cells read "failed", the reasons follow the table, the exit status is 1.
"""
import argparse
import hashlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LLAMA_7B_TEXT = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
                 "num_key_value_heads": 32, "vocab_size": 32064}
# a real CLIP geometry (336 px, 14 px patches: 576 tokens) at a negligible width
SMALL_VISION = {"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_channels": 3,
                "image_size": 336, "patch_size": 14, "hidden_act": "quick_gelu",
                "layer_norm_eps": 1e-5, "projection_dim": 64}


class BenchError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-cpp", required=True, metavar="SRC",
                   help="llama.cpp source tree (has CMakeLists.txt and convert_hf_to_gguf.py)")
    p.add_argument("--work", default=os.path.join(REPO, "models", "llamacpp-bench"),
                   help="models and the llama.cpp build go here (reused when present)")
    p.add_argument("--layers", type=int, default=8, help="decoder layers (LLaMA-7B has 32)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", default="600,160", help="prompt lengths for prefill, comma-separated")
    p.add_argument("--decode", type=int, default=32, help="tokens generated per run")
    p.add_argument("--era-bench", default=os.path.join(REPO, "build", "era_bench"))
    p.add_argument("--python", default=sys.executable,
                   help="Python with torch (era's exporter) and numpy + sentencepiece (the converter)")
    p.add_argument("--json", help="also write every measurement here")
    p.add_argument("--llama-cmake-args", default="", metavar="ARGS",
                   help="extra arguments for llama.cpp's CMake configure line, shell-quoted, given "
                        "with '=' (they start with '-'): --llama-cmake-args=\"-DGGML_AVX512=OFF\"")
    args = p.parse_args(argv)
    try:
        args.llama_cmake = shlex.split(args.llama_cmake_args)
    except ValueError as e:
        raise BenchError(f"--llama-cmake-args {args.llama_cmake_args!r}: {e}") from None
    try:
        args.prompt_lengths = [int(x) for x in args.prompts.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"--prompts {args.prompts!r}: not a comma-separated list of integers") from None
    if not args.prompt_lengths or min(args.prompt_lengths) < 32:
        raise BenchError(f"--prompts {args.prompts!r}: each length must be at least 32")
    for name in ("layers", "threads", "rounds", "decode"):
        if getattr(args, name) < 1:
            raise BenchError(f"--{name} {getattr(args, name)}: must be at least 1")
    return args


def measured(cmd, what):
    """Runs cmd, returns (stdout, peak resident bytes of that process). The child is reaped with
    os.wait4 so its rusage is its own."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # drain both pipes without communicate() (which would reap the child with waitpid)
    chunks = {"out": [], "err": []}

    def drain(stream, key):
        for block in iter(lambda: stream.read(65536), b""):
            chunks[key].append(block)

    threads = [threading.Thread(target=drain, args=(proc.stdout, "out")),
               threading.Thread(target=drain, args=(proc.stderr, "err"))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for t in threads:
        t.join()
    proc.stdout.close()
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = b"".join(chunks["out"]).decode("utf-8", "replace")
    err = b"".join(chunks["err"]).decode("utf-8", "replace")
    if proc.returncode != 0:
        tail = "\n".join((err or out).strip().splitlines()[-8:])
        raise BenchError(f"{what} failed ({exit_reason(proc.returncode)}): {' '.join(cmd)}\n{tail}")
    return out, usage.ru_maxrss * 1024  # Linux: kilobytes


def exit_reason(code):
    """'exit 3', or the signal that killed the child, by name (a negative return code)."""
    if code >= 0:
        return f"exit {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    if name == "SIGILL":
        return ("killed by SIGILL: an instruction this CPU or its VM refuses; rebuild without it "
                "with --llama-cmake-args")
    return f"killed by {name}"


def build_folder(work, cmake_args):
    """One build per set of extra CMake arguments, so changing them never reuses a stale build."""
    if not cmake_args:
        return os.path.join(work, "llama.cpp-build")
    digest = hashlib.sha256("\0".join(cmake_args).encode()).hexdigest()[:10]
    return os.path.join(work, f"llama.cpp-build-{digest}")


def build_llama_cpp(src, work, threads, cmake_args=()):
    """llama-bench from the user's source tree, built once (Release, native CPU features, then
    the user's extra arguments, which therefore win)."""
    if not os.path.isfile(os.path.join(src, "CMakeLists.txt")) or \
            not os.path.isfile(os.path.join(src, "convert_hf_to_gguf.py")):
        raise BenchError(f"--llama-cpp {src}: not a llama.cpp source tree "
                         f"(needs CMakeLists.txt and convert_hf_to_gguf.py)")
    build = build_folder(work, list(cmake_args))
    for cand in (os.path.join(build, "bin", "llama-bench"), os.path.join(build, "llama-bench")):
        if os.path.isfile(cand):
            return cand
    print(f"bench_llamacpp: building llama-bench from {src} in {build} (once; minutes)", flush=True)
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
             "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
             "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON"] + list(cmake_args)
    measured(["cmake", "-S", src, "-B", build] + flags, "configuring llama.cpp")
    measured(["cmake", "--build", build, "--target", "llama-bench", "-j", str(threads)],
             "building llama-bench")
    for cand in (os.path.join(build, "bin", "llama-bench"), os.path.join(build, "llama-bench")):
        if os.path.isfile(cand):
            return cand
    raise BenchError(f"built llama.cpp in {build} but found no llama-bench binary")


def exporter_digest():
    """A digest of the era_tools sources that shape a bundle (this script is not one of them:
    editing it must not redraw the models)."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and name != os.path.basename(__file__):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def make_models(args):
    """Both engines' files for one random model. Each side is remade only when what shapes it
    changed: the era bundles with era's exporter, the GGUF files with the model (seeded, so the
    language model written beside the bf16 bundle is the same each time)."""
    work = args.work
    model = {"layers": args.layers, "text": LLAMA_7B_TEXT, "vision": SMALL_VISION, "seed": 0}
    paths = {"era-bf16": os.path.join(work, "era-bf16"), "era-int8": os.path.join(work, "era-int8"),
             "hf": os.path.join(work, "hf-text"),
             "gguf-bf16": os.path.join(work, "llama-bf16.gguf"),
             "gguf-q8_0": os.path.join(work, "llama-q8_0.gguf")}
    stamp_path = os.path.join(work, "models.json")
    try:
        with open(stamp_path, encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        stamp = {}
    os.makedirs(work, exist_ok=True)
    era_ok = stamp.get("era") == dict(model, exporter=exporter_digest()) and all(
        os.path.exists(paths[k]) for k in ("era-bf16", "era-int8", "hf"))
    gguf_ok = stamp.get("gguf") == model and all(
        os.path.exists(paths[k]) for k in ("gguf-bf16", "gguf-q8_0"))
    if not era_ok:
        from . import make_random_bundle as mrb
        config = mrb.preset_config("tiny", "bfloat16", 1000)  # the tiny preset's ids and template
        text = dict(config["text_config"], **LLAMA_7B_TEXT, num_hidden_layers=args.layers,
                    max_position_embeddings=4096, torch_dtype="bfloat16")
        config.update(text_config=text, vision_config=SMALL_VISION,
                      vocab_size=LLAMA_7B_TEXT["vocab_size"], torch_dtype="bfloat16")
        cfg_path = os.path.join(work, "llava-config.json")
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)
        tool = os.path.join(REPO, "tools", "make_random_bundle.py")
        common = [args.python, tool, "--config", cfg_path, "--dtype", "bfloat16", "--no-check",
                  "--seed", str(model["seed"])]
        print("bench_llamacpp: drawing the random model (era bf16 + HF folder, then era int8)", flush=True)
        measured(common + ["--out", paths["era-bf16"], "--text-model", paths["hf"]],
                 "make_random_bundle (bf16)")
        measured(common + ["--out", paths["era-int8"], "--int8", "decoder"], "make_random_bundle (int8)")
        stamp = {"era": dict(model, exporter=exporter_digest()), "gguf": stamp.get("gguf")}
        with open(stamp_path, "w", encoding="utf-8") as f:
            json.dump(stamp, f)
    if not gguf_ok:
        gguf_py = os.path.join(args.llama_cpp, "gguf-py")
        for outtype in ("bf16", "q8_0"):
            print(f"bench_llamacpp: converting to GGUF {outtype} with "
                  f"{args.llama_cpp}/convert_hf_to_gguf.py", flush=True)
            cmd = ["env", f"PYTHONPATH={gguf_py}", args.python,
                   os.path.join(args.llama_cpp, "convert_hf_to_gguf.py"), paths["hf"],
                   "--outtype", outtype, "--outfile", paths[f"gguf-{outtype}"]]
            measured(cmd, f"convert_hf_to_gguf.py --outtype {outtype}")
        stamp["gguf"] = model
        with open(stamp_path, "w", encoding="utf-8") as f:
            json.dump(stamp, f)
    return paths


def text_tokens(args, bundle, image):
    """How many text tokens era_bench's prompt has around the image (probe run)."""
    out, _ = measured([args.era_bench, "-m", bundle, "--image", image, "--methods", "random",
                       "--tokens", "16", "--warmup", "0", "--repeat", "1", "-n", "1",
                       "--threads", str(args.threads), "--json", "-"], "era_bench (probe)")
    return int(json.loads(out)["rows"][0]["text_tokens"])


def run_era(args, bundle, image, n_text):
    budgets = ",".join(str(p - n_text) for p in args.prompt_lengths)
    out, rss = measured([args.era_bench, "-m", bundle, "--image", image, "--methods", "random",
                         "--tokens", budgets, "--warmup", "1", "--repeat", "1",
                         "-n", str(args.decode), "--threads", str(args.threads), "--json", "-"],
                        f"era_bench {bundle}")
    report = json.loads(out)
    result = {"rss": rss, "model_resident": report["memory"].get("model_resident_bytes", 0),
              "prefill": {}, "decode_ms": None}
    shortest = None
    for row in report["rows"]:
        n = int(row["prompt_tokens"])
        result["prefill"][n] = n / (row["ms"]["prefill"]["median"] / 1000.0)
        if shortest is None or n < shortest:
            shortest = n
            result["decode_ms"] = row["ms"]["decode_per_token"]["median"]
    return result


def run_llama(args, bench, gguf):
    out, rss = measured([bench, "-m", gguf, "-p", args.prompts, "-n", str(args.decode),
                         "-t", str(args.threads), "-r", "1", "-o", "json"], f"llama-bench {gguf}")
    result = {"rss": rss, "prefill": {}, "decode_ms": None, "build": None}
    for entry in json.loads(out):
        result["build"] = f"{entry.get('build_commit', '?')} (build {entry.get('build_number', '?')})"
        if entry.get("n_gen", 0) == 0:
            result["prefill"][int(entry["n_prompt"])] = float(entry["avg_ts"])
        else:
            result["decode_ms"] = 1000.0 / float(entry["avg_ts"])
    return result


# The CPU features that decide which kernels either engine runs, as /proc/cpuinfo names them.
ISA_SHOWN = (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"),
             ("avx512_vnni", "VNNI"), ("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8"))


def cpu_name():
    """The CPU's model name and the kernel-deciding features it lists ("Intel(R) Xeon(R)
    Processor (AVX2, AVX-512, AVX512-BF16, VNNI, AMX-BF16, AMX-INT8)")."""
    name, flags = None, set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and name is None:
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    name = name or platform.processor() or "unknown CPU"
    shown = [label for flag, label in ISA_SHOWN if flag in flags]
    return f"{name} ({', '.join(shown)})" if shown else name


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def cell(value, fmt):
    return "failed" if value != value else fmt.format(value)  # NaN: no run finished


def table(args, runs, llama_build):
    lines = [f"era vs llama.cpp: random LLaMA, hidden 4096, MLP 11008, 32 heads, {args.layers} layers, "
             f"vocabulary 32064 | {cpu_name()}, {args.threads} threads | median of {args.rounds} "
             f"interleaved rounds | llama.cpp {llama_build}", ""]
    head = ["engine", "weights"] + [f"prefill tok/s @{p}" for p in args.prompt_lengths] + \
        ["decode ms/tok", "peak RSS GiB"]
    rows = []
    done = {k: [x for x in v if "error" not in x] for k, v in runs.items()}  # finished runs
    for key, engine, weights in (("era-bf16", "era", "bf16"), ("llama-bf16", "llama.cpp", "bf16"),
                                 ("era-int8", "era", "int8 (per-channel)"),
                                 ("llama-q8_0", "llama.cpp", "Q8_0")):
        r = done[key]
        row = [engine, weights]
        for p in args.prompt_lengths:
            row.append(cell(median([x["prefill"].get(p) for x in r]), "{:.1f}"))
        row.append(cell(median([x["decode_ms"] for x in r]), "{:.1f}"))
        row.append(cell(median([x["rss"] for x in r]) / 2**30, "{:.2f}"))
        rows.append(row)
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
    fmt = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    lines.append(fmt(head))
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines.extend(fmt(r) for r in rows)
    lines.append("")
    for era_key, llama_key, label in (("era-bf16", "llama-bf16", "bf16"), ("era-int8", "llama-q8_0", "int8 vs Q8_0")):
        if not done[era_key] or not done[llama_key]:
            lines.append(f"era / llama.cpp, {label}: no ratio (a side has no finished run)")
            continue
        ratios = []
        for p in args.prompt_lengths:
            e = median([x["prefill"].get(p) for x in done[era_key]])
            l = median([x["prefill"].get(p) for x in done[llama_key]])
            ratios.append(f"prefill @{p} {e / l:.2f}x")
        d = median([x["decode_ms"] for x in done[llama_key]]) / median([x["decode_ms"] for x in done[era_key]])
        lines.append(f"era / llama.cpp, {label}: " + ", ".join(ratios) + f", decode {d:.2f}x "
                     f"(above 1: era faster)")
    failures = [(k, i + 1, x["error"]) for k, v in runs.items() for i, x in enumerate(v) if "error" in x]
    for key, round_no, error in failures:
        lines.append(f"failed: {key}, round {round_no}: {error.splitlines()[0]}")
    return "\n".join(lines)


def main(argv=None):
    try:
        args = parse_args(argv)
        args.llama_cpp = os.path.abspath(args.llama_cpp)
        if not os.access(args.era_bench, os.X_OK):
            raise BenchError(f"--era-bench {args.era_bench}: not an executable (build era first: "
                             f"bash tools/setup.sh)")
        bench = build_llama_cpp(args.llama_cpp, args.work, args.threads, args.llama_cmake)
        paths = make_models(args)
        image = os.path.join(REPO, "tests", "data", "sample.png")
        n_text = text_tokens(args, paths["era-bf16"], image)
        if min(args.prompt_lengths) <= n_text:
            raise BenchError(f"--prompts: each length must exceed the {n_text} text tokens")
        runs = {k: [] for k in ("era-bf16", "llama-bf16", "era-int8", "llama-q8_0")}
        llama_build = "?"
        plan = (("era-bf16", lambda: run_era(args, paths["era-bf16"], image, n_text)),
                ("llama-bf16", lambda: run_llama(args, bench, paths["gguf-bf16"])),
                ("era-int8", lambda: run_era(args, paths["era-int8"], image, n_text)),
                ("llama-q8_0", lambda: run_llama(args, bench, paths["gguf-q8_0"])))
        for r in range(args.rounds):
            print(f"bench_llamacpp: round {r + 1} of {args.rounds}", flush=True)
            for key, run in plan:
                try:
                    x = run()
                except BenchError as e:  # the other engines' runs still count
                    print(f"bench_llamacpp: {key} failed in round {r + 1}: {e}", file=sys.stderr, flush=True)
                    x = {"error": str(e)}
                llama_build = x.get("build") or llama_build
                runs[key].append(x)
        text = table(args, runs, llama_build)
        print(text)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"machine": cpu_name(), "threads": args.threads, "layers": args.layers,
                           "rounds": runs, "llama_cpp": llama_build,
                           "llama_cmake_args": args.llama_cmake}, f, indent=1)
        return 1 if any("error" in x for v in runs.values() for x in v) else 0
    except BenchError as e:
        print(f"bench_llamacpp: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
