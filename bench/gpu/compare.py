#!/usr/bin/env python3
"""grove on the GPU against PyTorch eager and torch.compile, same inputs.

For each exported test model (scripts/export_test_models.py: the module is
rebuilt with the export's seed, so its weights are the ONNX file's), at
several shapes, this times on one CUDA device:
  - PyTorch eager (torch.no_grad);
  - torch.compile, mode "default" and "reduce-overhead" (CUDA graphs), with
    dynamic shapes, counting the graphs dynamo compiled (recompiles);
  - grove, graphs off and graphs on (shape buckets at their default), through
    the Python package, inputs in NumPy, outputs copied back (as the
    PyTorch runs copy theirs with .cpu()).
Each timing is the median of --repeats runs after --warmup, the stream
synchronized per run. Outputs are checked against PyTorch eager (1e-3).
The GPT block also runs a decode sweep: batch 1 and 4, sequence 1..--decode.

Not a test and not CI: it needs a GPU, PyTorch with CUDA, and a grove build
with the Python package on PYTHONPATH (bench/gpu/check.sh runs it when
PyTorch is importable). Writes JSON (--json) with the medians per shape and
the ratios grove-graphs / each peer.

  python bench/gpu/compare.py --build build [--models gpt_block,early_exit]
                              [--repeats 30] [--warmup 5] [--decode 64] [--json OUT]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def load_export_script():
    """scripts/export_test_models.py, whose imports of onnx and onnxruntime are
    only needed for exporting: stand-ins where they are not installed."""
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
    sys.path.insert(0, str(REPO / "scripts"))
    import export_test_models  # noqa: E402
    return export_test_models


def cases(name):
    """The model's test inputs: [(case, [arrays])] from test/models/NAME/cases.txt."""
    import numpy as np
    folder = REPO / "test" / "models" / name
    out = []
    for line in (folder / "cases.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        case, ins, _ = line.split()
        out.append((case, [np.load(folder / f) for f in ins.split(",")]))
    return out


def median_ms(fn, warmup, repeats, sync):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--models", default="gpt_block,transformer_encoder,early_exit,loop_decoder,cnn,lstm")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--decode", type=int, default=64, help="the GPT block's longest sequence in the sweep")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("compare.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    sys.path.insert(0, str(REPO / "python"))
    os.environ.setdefault("GROVE_LIBRARY", str(Path(args.build) / "libgrove.so"))
    import grove
    export = load_export_script()
    grove_cli = str(Path(args.build) / "grove")
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    results = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "models": {}}
    tmp = tempfile.mkdtemp(prefix="grove-compare-")

    for name in args.models.split(","):
        try:
            results["models"][name] = compare_model(args, name, export, grove, grove_cli, tmp, dev, sync)
        except Exception as e:  # one model's failure does not lose the others' numbers
            print(f"{name}: failed: {e!r}", file=sys.stderr, flush=True)
            results["models"][name] = {"failed": repr(e)[:500], "shapes": []}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all("failed" not in m for m in results["models"].values()) else 1


def compare_model(args, name, export, grove, grove_cli, tmp, dev, sync):
    """One model's rows: medians per shape and the speedups of grove graphs."""
    import numpy as np
    import torch
    import torch._dynamo
    spec = export.MODELS[name]
    torch.manual_seed(args.seed)
    module = spec["cls"]().eval().to(dev)
    grove_file = os.path.join(tmp, f"{name}.grove")
    subprocess.run([grove_cli, "import", str(REPO / "test" / "models" / name / "model.onnx"), "-o", grove_file],
                   check=True, capture_output=True)
    model = grove.Model.load(grove_file)
    sessions = {mode: grove.Session(model, device="cuda", cuda_graphs=mode) for mode in ("off", "on")}
    inputs = cases(name)
    if name == "gpt_block":
        rng = np.random.default_rng(args.seed)
        inputs += [(f"decode_b{b}_s{s}", [rng.integers(0, 64, (b, s)).astype(np.int64)])
                   for b in (1, 4) for s in range(1, args.decode + 1)]
    compiled = {}
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        compiled[mode] = torch.compile(module, mode=mode, dynamic=True)
    per_shape = []
    for case, arrays in inputs:
        feeds = dict(zip(spec["inputs"], arrays))
        tensors = [torch.from_numpy(a).to(dev) for a in arrays]

        def torch_run(fn):
            with torch.no_grad():
                out = fn(*tensors)
            return [o.detach().cpu().numpy() for o in export.flatten([out])]

        row = {"case": case}
        want = torch_run(module)
        row["torch_eager_ms"] = median_ms(lambda: torch_run(module), args.warmup, args.repeats, sync)
        for mode, fn in compiled.items():
            try:
                before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
                got = torch_run(fn)
                row[f"torch_compile_{mode}_ms"] = median_ms(lambda: torch_run(fn), args.warmup, args.repeats, sync)
                row[f"torch_compile_{mode}_graphs_compiled"] = (
                    torch._dynamo.utils.counters["stats"]["unique_graphs"] - before)
                row[f"torch_compile_{mode}_error"] = max(
                    float(np.max(np.abs(g - w), initial=0)) for g, w in zip(got, want))
            except Exception as e:  # a model torch.compile cannot take is a result too
                row[f"torch_compile_{mode}_failed"] = str(e)[:300]
        for mode, session in sessions.items():
            got = list(session.run(feeds).values())
            row[f"grove_graphs_{mode}_error"] = max(
                float(np.max(np.abs(np.asarray(g, np.float64) - w), initial=0)) for g, w in zip(got, want))
            row[f"grove_graphs_{mode}_ms"] = median_ms(lambda: session.run(feeds), args.warmup, args.repeats,
                                                      lambda: None)
        g = row["grove_graphs_on_ms"]
        for peer in ("torch_eager_ms", "torch_compile_default_ms", "torch_compile_reduce-overhead_ms",
                     "grove_graphs_off_ms"):
            if peer in row and row[peer] > 0:
                row[f"speedup_vs_{peer[:-3]}"] = round(row[peer] / g, 3)
        per_shape.append(row)
        print(f"{name} {case}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()
                                             if k.endswith("_ms") or k.startswith("speedup")), flush=True)
    return {"shapes": per_shape, "grove_stats": sessions["on"].stats()}


if __name__ == "__main__":
    sys.exit(main())
