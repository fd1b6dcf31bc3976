#!/usr/bin/env python3
"""Writes OUTDIR/summary.json from what bench/gpu/check.sh left in OUTDIR (the
GPU tests' report, gpu_bench.json, jit_bench.json and the logs) and prints
its start:

    python3 bench/gpu/summarize.py OUTDIR TESTS_EXIT

A file that is missing or unreadable is named in its section, and a
benchmark that failed (Google Benchmark's error_occurred, or no time) is
listed under gpu_bench with its error and left out of every ratio, so one
failed benchmark costs its rows, not the summary. The standard library only.
"""
import json, os, re, sys

if len(sys.argv) != 3:
    sys.exit("usage: summarize.py OUTDIR TESTS_EXIT")
out, tests_rc = sys.argv[1], int(sys.argv[2])


def read(name, default=""):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return default


summary = {"gpu": read("gpu.txt", "no gpu.txt").strip(), "tests_exit": tests_rc}
try:
    t = json.load(open(os.path.join(out, "gpu_tests.json")))
    failed = [f"{s['name']}.{c['name']}" for s in t["testsuites"] for c in s["testsuite"] if c.get("failures")]
    summary["tests"] = {"total": t["tests"], "failed": t["failures"], "errors": t.get("errors", 0), "failed_names": failed}
except Exception as e:
    summary["tests"] = {"error": f"no test report ({e})"}
def bench(name):
    """{benchmark name: its entry}, or {"error": why} when the file is not a report."""
    try:
        with open(os.path.join(out, name)) as f:
            return {b["name"]: b for b in json.load(f)["benchmarks"]}
    except Exception as e:
        return {"error": str(e)}


def timed(v):
    """A benchmark that ran: a positive time and no error."""
    return isinstance(v, dict) and not v.get("error_occurred") and v.get("real_time", 0) > 0


everything = bench("gpu_bench.json")
g = {k: v for k, v in everything.items() if timed(v)}  # what the ratios below read
ratios = {}
for k, v in g.items():
    if k.startswith("BM_MatMul_Grove") and "/" in k:
        base = g.get(k.replace("Grove", "Cublas"))
        if base and "real_time" in base:
            ratios[k.split("/", 1)[1]] = {"grove_us": round(v["real_time"], 2), "cublas_us": round(base["real_time"], 2),
                                         "ratio": round(v["real_time"] / base["real_time"], 3)}
summary["matmul_vs_cublas"] = ratios
# Small-M products (issue 13's goal: the gemv family >= 1.0x cuBLASLt's first
# heuristic pick for M = 1..64): speedup = cuBLASLt's time / the family's.
small = {}
for k, v in g.items():
    if k.startswith("BM_SmallM_Cuda/") and k.count("/") >= 5 and k.split("/")[4] == "1":
        base = g.get("/".join(k.split("/")[:4] + ["0"] + k.split("/")[5:]))
        if base and "real_time" in base:
            small["M=%s N=%s K=%s" % tuple(k.split("/")[1:4])] = {
                "gemv_us": round(v["real_time"] / 16, 2), "cublaslt_us": round(base["real_time"] / 16, 2),
                "variant": v.get("label", ""), "speedup": round(base["real_time"] / v["real_time"], 3)}
summary["small_m_gemv_vs_cublaslt"] = small
# Fused attention (issue 13's goal: >= 2x unfused at S >= 256), prefill (f32,
# f16, f16 causal) and decode: the step as it picks its form (/1/), its fused kernel
# (/2/: on tensor cores in f16), its GEMM form (/3/) and, f16, the CUDA-core
# kernel (/4/) against the unfused chain (/0/).
attn = {}
for k, v in g.items():
    for bench_name in ("BM_Attention_Cuda/", "BM_AttentionF16_Cuda/", "BM_CausalAttentionF16_Cuda/",
                       "BM_DecodeAttention_Cuda/"):
        if k.startswith(bench_name) and k.count("/") >= 3 and k.split("/")[2] == "1":
            base = g.get(k.replace("/1/", "/0/"))
            if base and "real_time" in base:
                row = {"fused_us": round(v["real_time"], 2), "unfused_us": round(base["real_time"], 2),
                       "speedup": round(base["real_time"] / v["real_time"], 3)}
                for form, label in (("2", "kernel_form_us"), ("3", "gemm_form_us"), ("4", "cuda_core_kernel_us")):
                    f = g.get(k.replace("/1/", "/%s/" % form))
                    if f and "real_time" in f:
                        row[label] = round(f["real_time"], 2)
                attn[bench_name[3:-6] + "/S=" + k.split("/")[1]] = row
summary["attention_fused_vs_unfused"] = attn
# P1 (issue 12): the 200-op chain replayed vs launched (goal <= 0.15x), and
# the floor: 200 tiny kernels as a bare graph vs launched.
def us(name):
    v = g.get(name + "/real_time")
    return v["real_time"] if isinstance(v, dict) and "real_time" in v else None
p1 = {k: us(k) for k in ("BM_Chain200_Graphs", "BM_Chain200_Eager", "BM_Fill200_BareGraph", "BM_Fill200_Launched")}
if p1["BM_Chain200_Graphs"] and p1["BM_Chain200_Eager"]:
    p1["chain_replay_over_launched"] = round(p1["BM_Chain200_Graphs"] / p1["BM_Chain200_Eager"], 3)
if p1["BM_Fill200_BareGraph"] and p1["BM_Fill200_Launched"]:
    p1["bare_graph_over_launched"] = round(p1["BM_Fill200_BareGraph"] / p1["BM_Fill200_Launched"], 3)
summary["graphs_p1"] = p1
# A growing sequence (issue 12): buckets and exact-shape graphs against graphs
# off, with the graphs captured and the shared arena against the largest plan's.
grow = {}
eager = g.get("BM_GrowingSeq_Eager/real_time", {})
for mode in ("Buckets", "Exact", "Eager"):
    v = g.get(f"BM_GrowingSeq_{mode}/real_time")
    if isinstance(v, dict) and "real_time" in v:
        grow[mode.lower()] = {"ms_per_64_tokens": round(v["real_time"], 3),
                              "vs_eager": round(v["real_time"] / eager["real_time"], 3) if "real_time" in eager else None,
                              "graphs_captured": v.get("graphs_captured"), "arena_bytes": v.get("arena_bytes"),
                              "largest_plan_arena_bytes": v.get("largest_plan_arena_bytes")}
summary["growing_sequence"] = grow
try:
    summary["tune"] = {"tables": sorted(os.listdir(os.path.join(out, "tables"))),
                       "log_tail": open(os.path.join(out, "tune.log")).read().splitlines()[-40:]}
except Exception as e:
    summary["tune"] = {"error": str(e)}
try:
    c = json.load(open(os.path.join(out, "compare.json")))
    summary["peers"] = {m: [{k: v for k, v in r.items() if k == "case" or k.startswith("speedup")} for r in d["shapes"]]
                        for m, d in c["models"].items()}
except Exception as e:
    summary["peers"] = {"not run": open(os.path.join(out, "compare.log")).read()[-300:] if os.path.exists(os.path.join(out, "compare.log")) else str(e)}
summary["gpu_bench"] = ({k: {"real_time_us": round(v.get("real_time", -1), 2), "error": v.get("error_message", "")}
                         for k, v in everything.items() if isinstance(v, dict)}
                        if "error" not in everything else {"error": everything["error"]})
j = bench("jit_bench.json")
per_us = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
summary["jit_bench"] = ({k: {"real_time_us": round(v.get("real_time", -1) * per_us.get(v.get("time_unit", "ns"), 1.0), 3)}
                         for k, v in j.items() if isinstance(v, dict)}
                        if "error" not in j else {"error": j["error"]})
summary["sanitizer"] = [l for l in read("sanitizer.log", "no sanitizer.log: not run").splitlines()
                        if "SUMMARY" in l or "not run" in l or "PASSED" in l or "FAILED" in l][:40]
summary["roundtrip"] = [l for l in read("roundtrip.log").splitlines()
                        if re.match(r"(compiled|cuda:|time:|session:|== |grove: error)", l)]
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1)[:6000])
