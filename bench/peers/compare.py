#!/usr/bin/env python3
"""grove against ONNX Runtime, side by side, on the exported test models.

For each model under test/models (and the Silero VAD under models/silero_vad),
at several shapes per model and at each thread count, both runtimes get the
same inputs (made from the model's test data, its symbolic dims resized by
repeating values cyclically, so token ids and states stay valid); their
outputs are compared, then warm runs are timed in interleaved rounds (grove,
ORT, ORT, grove, ...) and the medians per runtime reported with the ratio
grove/ORT. Opening a model is measured too: grove's Model.load and Session
against ORT's InferenceSession (both median of interleaved repetitions).

Not a test: timings depend on the machine and its load. bench/peers/run.sh
makes the venv (numpy, onnxruntime, the grove package) and runs this.

  python bench/peers/compare.py [--quick] [--models cnn,lstm] [--threads 1,2]
                                [--json OUT] [--build DIR] [--no-spin]
                                [--models-dir DIR]

--models-dir DIR times the models of another folder laid out as test/models
(DIR/NAME/model.onnx and DIR/NAME/cases.txt with its .npy files) instead of
the list below, each at the shapes of its own cases.
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent

# Per model: the ONNX file, its test data folder, and the shapes to time:
# (label, base case in cases.txt, {symbol: value}). The symbols are grove's
# names for the model's dynamic dims (`grove inspect`); inputs are the base
# case's arrays resized to them. Shapes stay where the model allows: the GPT
# block's causal mask is a 64-row buffer (seq <= 64); the decoders' and the
# early exit's paths depend on the data, so their batches are multiples of a
# test case's (the same rows repeated).
MODELS = {
    "cnn": ("test/models/cnn/model.onnx", "test/models/cnn", [
        ("b1 16x16", "b1_16x16", {}),
        ("b1 32x32", "b1_16x16", {"height": 32, "width": 32}),
        ("b1 64x64", "b1_16x16", {"height": 64, "width": 64}),
        ("b8 64x64", "b2_24x20", {"batch": 8, "height": 64, "width": 64}),
        ("b1 128x128", "b1_16x16", {"height": 128, "width": 128}),
    ]),
    "early_exit": ("test/models/early_exit/model.onnx", "test/models/early_exit", [
        ("b1 deep", "deep_b1", {}),
        ("b5 shallow", "shallow_b5", {}),
        ("b48 deep", "deep_b3", {"batch": 48}),
        ("b50 shallow", "shallow_b5", {"batch": 50}),
    ]),
    "gpt_block": ("test/models/gpt_block/model.onnx", "test/models/gpt_block", [
        ("b1 s1", "b1_s64", {"seq": 1}),
        ("b1 s8", "b1_s64", {"seq": 8}),
        ("b1 s64", "b1_s64", {}),
        ("b4 s64", "b1_s64", {"batch": 4}),
    ]),
    "list_decoder": ("test/models/list_decoder/model.onnx", "test/models/list_decoder", [
        ("b1 9 steps", "b1_9steps", {}),
        ("b3 7 steps", "b3_7steps", {}),
        ("b24 7 steps", "b3_7steps", {"batch": 24}),
    ]),
    "loop_decoder": ("test/models/loop_decoder/model.onnx", "test/models/loop_decoder", [
        ("b1 9 steps", "b1_9steps", {}),
        ("b3 7 steps", "b3_7steps", {}),
        ("b24 7 steps", "b3_7steps", {"batch": 24}),
    ]),
    "lstm": ("test/models/lstm/model.onnx", "test/models/lstm", [
        ("b1 s1", "b1_s5", {"seq": 1}),
        ("b1 s16", "b1_s5", {"seq": 16}),
        ("b1 s128", "b1_s5", {"seq": 128}),
        ("b4 s64", "b3_s12", {"batch": 4, "seq": 64}),
    ]),
    "transformer_encoder": ("test/models/transformer_encoder/model.onnx", "test/models/transformer_encoder", [
        ("b1 s8", "b1_s4", {"seq": 8}),
        ("b1 s64", "b1_s4", {"seq": 64}),
        ("b1 s256", "b1_s4", {"seq": 256}),
        ("b4 s64", "b3_s16", {"batch": 4, "seq": 64}),
    ]),
    "silero_vad": ("models/silero_vad/silero_vad.onnx", "models/silero_vad/testdata", [
        ("b1 16k 512", "b1_16k_512", {}),
        ("b1 8k 256", "b1_8k_256", {}),
        ("b8 16k 512", "b1_16k_512", {"input_d0": 8, "state_d1": 8}),
    ]),
}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Time grove against ONNX Runtime (CPU) on the exported test models, "
        "interleaved, and print the ratio table. Run through bench/peers/run.sh, which makes "
        "the venv this needs.")
    p.add_argument("--build", default=os.environ.get("GROVE_BUILD_DIR", str(REPO / "build")),
                   help="grove's build folder, with the CLI (grove) and libgrove.so (default: "
                   "$GROVE_BUILD_DIR or <repo>/build)")
    p.add_argument("--models", help="comma-separated models (default: all: " + ",".join(MODELS) + ")")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="few, short rounds (about a minute in all)")
    p.add_argument("--rounds", type=int, help="interleaved rounds per shape (default 15; --quick 5)")
    p.add_argument("--round-ms", type=float,
                   help="time each runtime runs per round, in ms (default 30; --quick 10)")
    p.add_argument("--open-reps", type=int, help="repetitions of opening each model (default 15; --quick 7)")
    p.add_argument("--open-warmup", type=int, default=2,
                   help="untimed openings by each runtime before those (default %(default)s): a process's "
                   "first openings set up the libraries and warm the interpreter's paths")
    p.add_argument("--tol", type=float, default=1e-4,
                   help="outputs agree when |grove - ort| <= tol * (1 + |ort|) (default %(default)g; "
                   "integer outputs exactly)")
    p.add_argument("--no-spin", action="store_true",
                   help="threads sleep instead of spinning between runs: ORT's "
                   "session.intra_op.allow_spinning=0 and OMP_WAIT_POLICY=passive for grove's oneDNN")
    p.add_argument("--no-settle", dest="settle", action="store_false",
                   help="do not wait before each runtime's runs until the other's threads are idle "
                   "(by default the harness does: ORT's workers spin ~50 ms after a run and would "
                   "take a core from grove's runs after it)")
    p.add_argument("--no-core", dest="core", action="store_false",
                   help="do not also time grove through its C ABI directly (the 'core' columns: "
                   "Session.run without the Python package's per-run work)")
    p.add_argument("--models-dir", metavar="DIR",
                   help="time the models in DIR instead (DIR/NAME/model.onnx and cases.txt, laid out as "
                   "test/models), each at the shapes of its own cases; --models picks among them")
    p.add_argument("--json", metavar="OUT", help="also write every measurement to this JSON file")
    p.add_argument("--list", action="store_true", help="list the models and shapes, then exit")
    args = p.parse_args(argv)
    if args.models_dir:
        try:
            MODELS.clear()
            MODELS.update(models_in(Path(args.models_dir)))
        except (OSError, ValueError) as e:
            p.error(f"--models-dir: {e}")
    args.models = args.models or ",".join(MODELS)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        p.error(f"--threads: want comma-separated integers, got {args.threads!r}")
    if not args.threads or any(t < 1 for t in args.threads):
        p.error("--threads: want thread counts of at least 1")
    args.rounds = args.rounds or (5 if args.quick else 15)
    args.round_ms = args.round_ms or (10.0 if args.quick else 30.0)
    args.open_reps = args.open_reps or (7 if args.quick else 15)
    if args.rounds < 1 or args.round_ms <= 0 or args.open_reps < 1:
        p.error("--rounds, --round-ms and --open-reps must be positive")
    if args.open_warmup < 0:
        p.error("--open-warmup must be 0 or more")
    return args


def models_in(folder):
    """MODELS' entries for each DIR/NAME holding model.onnx and cases.txt: every
    case once, at its own shape."""
    found = {}
    for d in sorted(folder.iterdir()):
        if (d / "model.onnx").is_file() and (d / "cases.txt").is_file():
            found[d.name] = (str(d.resolve() / "model.onnx"), str(d.resolve()),
                             [(case, case, {}) for case in read_cases(d)])
    if not found:
        raise ValueError(f"no NAME/model.onnx with NAME/cases.txt under {folder}")
    return found


def check_build(build):
    """The CLI and libgrove.so, or exit 2 saying what to build."""
    build = Path(build)
    cli, lib = build / "grove", build / "libgrove.so"
    missing = [str(p) for p in (cli, lib) if not p.is_file()]
    if missing:
        sys.exit(f"compare.py: no {' or '.join(missing)}: build grove first "
                 f"(cmake -S . -B {build} && cmake --build {build} --target grove grove_cli), "
                 "or point --build / GROVE_BUILD_DIR at a build folder")
    return cli, lib


class Progress:
    def __init__(self, total):
        self.total, self.done, self.tty = total, 0, sys.stderr.isatty()

    def step(self, what):
        self.done += 1
        line = f"[{self.done}/{self.total}] {what}"
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def end(self):
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def read_cases(folder):
    cases = {}
    for line in (folder / "cases.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, inputs, outputs = line.split()
        cases[name] = [folder / f for f in inputs.split(",")]
    return cases


def resize(np, a, shape):
    """`a` at `shape`: each axis cut or extended by repeating its values cyclically."""
    for axis, n in enumerate(shape):
        if a.shape[axis] != n:
            a = np.take(a, np.arange(n) % a.shape[axis], axis=axis)
    return np.require(a, requirements="C")  # ascontiguousarray would make a scalar 1-d


def make_inputs(np, model, base_files, dims):
    inputs = {}
    for spec, path in zip(model.inputs, base_files):
        a = np.load(path)
        shape = [dims.get(d, a.shape[i]) if isinstance(d, str) else d for i, d in enumerate(spec.shape)]
        inputs[spec.name] = resize(np, a, shape)
    return inputs


def compare_outputs(np, got, want, tol):
    """(ok, max abs difference, what differs)."""
    worst, problems = 0.0, []
    for name, o in want.items():
        g = got.get(name)
        if g is None:
            problems.append(f"{name}: missing from grove's outputs")
            continue
        g, o = np.asarray(g), np.asarray(o)
        if g.shape != o.shape:
            problems.append(f"{name}: shape {list(g.shape)} vs ORT's {list(o.shape)}")
            continue
        if o.dtype.kind == "f":
            d = np.abs(g.astype(np.float64) - o.astype(np.float64))
            if d.size:
                worst = max(worst, float(np.nanmax(d)) if not np.isnan(d).all() else math.inf)
            bad = ~(d <= tol * (1 + np.abs(o.astype(np.float64))))
            if bad.any():
                problems.append(f"{name}: {int(bad.sum())} of {d.size} differ, max |d| {float(np.nanmax(d)):.3g}")
        elif not np.array_equal(g, o):
            problems.append(f"{name}: {int((g != o).sum())} of {o.size} differ")
    return not problems, worst, "; ".join(problems)


def grove_core_runner(grove, session, inputs):
    """A run through grove's C ABI with the input descriptors made once: what
    Session.run costs without the Python package's per-run work (outputs are
    still copied into NumPy arrays, as ORT's are: out of views over the
    session's buffers, made again when a run reports other buffers). Each
    run asks grove for its own buffers (data NULL), as Session.run does.
    Uses the package's private helpers; None if they changed."""
    try:
        capi, lib = grove._capi, grove._lib
        specs, outs = session.model.inputs, session.model.outputs
        tensors = (capi.Tensor * len(specs))()
        keep = []
        for i, spec in enumerate(specs):
            grove._fill_numpy(tensors[i], inputs[spec.name], spec, keep)
        outputs = (capi.Tensor * len(outs))()
        slots = tuple(outputs)
        names = [o.name for o in outs]
        run, check, host_view, handle = lib.grove_session_run, grove._check, grove._host_view, session._handle
        n, m = len(specs), len(outs)
    except (AttributeError, TypeError):
        return None
    last = [None, ()]  # the outputs' descriptor bytes and the views over them

    def fn(keep=keep):
        for slot in slots:
            slot.data = None
        check(run(handle, tensors, n, outputs, m))
        raw = bytes(outputs)
        if raw != last[0]:
            views = [host_view(t) for t in outputs]
            if any(v is None for v in views):
                return {name: grove._to_numpy(t) for name, t in zip(names, outputs)}
            last[:] = [raw, views]
        return {name: v.copy() for name, v in zip(names, last[1])}
    return fn


def median(xs):
    return statistics.median(xs) if xs else math.nan


def time_per_run(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


SETTLE_POLL_S = 0.001
SETTLE_MAX_S = 0.3


def running_threads():
    """How many of this process's threads other than the caller are running or
    runnable (state R in /proc/self/task/*/stat); None without /proc."""
    me = threading.get_native_id()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    n = 0
    for t in tasks:
        if t == str(me):
            continue
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended
        n += state == "R"
    return n


def settle(stats):
    """Waits (at most SETTLE_MAX_S) until no other thread of this process is
    running: ONNX Runtime's intra-op workers spin for some 40-50 ms after each
    run by default (measured here in /proc/self/task/*/schedstat), so
    whichever runtime ran next would share a core with them, which no
    application running one runtime sees; a 2-thread grove session then
    waited for its worker at every step. Counts the waits in `stats`. (Not
    the process's CPU time: the kernel adds another thread's time to it only
    at a scheduler tick, every 4-10 ms.)"""
    t0 = time.perf_counter()
    while True:
        n = running_threads()
        if not n:  # none, or no /proc
            break
        if time.perf_counter() - t0 > SETTLE_MAX_S:
            stats["timeouts"] = stats.get("timeouts", 0) + 1
            break
        time.sleep(SETTLE_POLL_S)
    stats["waits"] = stats.get("waits", 0) + 1
    stats["seconds"] = stats.get("seconds", 0.0) + time.perf_counter() - t0


def interleaved(fns, rounds, round_s, settle_stats=None):
    """Median seconds per run of each fn over `rounds` interleaved rounds; each
    round runs each fn for about round_s, starting with a different fn every
    round. With settle_stats (a dict), each fn's runs start when the
    process's threads are idle (settle)."""
    reps = []
    for fn in fns:  # calibrate on warm runs
        t = min(time_per_run(fn, 1) for _ in range(3))
        reps.append(max(1, min(100000, int(round_s / max(t, 1e-7)))))
    samples = [[] for _ in fns]
    for r in range(rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            if settle_stats is not None:
                settle(settle_stats)
                fns[i]()  # the first run after the wait touches cold caches: untimed
            samples[i].append(time_per_run(fns[i], reps[i]))
    return [median(s) for s in samples], reps


def main(argv):
    args = parse_args(argv)
    if args.list:
        for name in args.models:
            print(name + ": " + ", ".join(label for label, _, _ in MODELS[name][2]))
        return 0
    cli, lib = check_build(args.build)
    if args.no_spin:
        os.environ["OMP_WAIT_POLICY"] = "passive"  # read when libgrove (its OpenMP) loads
    os.environ.setdefault("GROVE_LIBRARY", str(lib))  # the build's library, not a stale copy
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        sys.exit(f"compare.py: {e}: run through bench/peers/run.sh, which makes a venv with numpy, "
                 "onnxruntime and the grove package")
    try:
        import grove
    except ImportError as e:
        sys.exit(f"compare.py: {e}: run through bench/peers/run.sh, which installs the grove package")
    except Exception as e:  # noqa: BLE001 - e.g. a symbol the package declares that the library lacks
        sys.exit(f"compare.py: the grove package cannot use {os.environ['GROVE_LIBRARY']}: "
                 f"{type(e).__name__}: {e}. Is the library older than python/? Rebuild it "
                 "(cmake --build build --target grove)")
    import gc

    out_dir = Path(args.build) / "peers"
    out_dir.mkdir(parents=True, exist_ok=True)
    round_s = args.round_ms / 1000.0
    meta = {
        "grove": grove.version(), "grove_library": grove.library_path,
        "onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "cpu": cpu_name(), "cores": os.cpu_count(), "load_before": os.getloadavg(),
        "rounds": args.rounds, "round_ms": args.round_ms, "open_reps": args.open_reps,
        "open_warmup": args.open_warmup,
        "tolerance": args.tol, "no_spin": args.no_spin, "settle": args.settle, "threads": args.threads,
        "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    print(f"grove {meta['grove']} ({meta['grove_library']}) vs onnxruntime {meta['onnxruntime']} "
          f"(CPUExecutionProvider); {meta['cpu']}, {meta['cores']} cores, load "
          f"{' '.join(f'{x:.1f}' for x in meta['load_before'])}; {args.rounds} rounds of ~{args.round_ms:g} ms"
          f"{'; no spinning' if args.no_spin else ''}"
          f"{'; each runtime starts when the threads of the other are idle' if args.settle else ''}")
    sys.stdout.flush()

    settle_stats = {}
    total = sum(1 + len(MODELS[m][2]) * len(args.threads) for m in args.models)
    progress = Progress(total)
    opens, runs = [], []
    for name in args.models:
        onnx_rel, data_rel, shapes = MODELS[name]
        onnx_path, data = REPO / onnx_rel, REPO / data_rel
        grove_path = out_dir / f"{name}.grove"
        progress.step(f"{name}: import and open")
        t0 = time.perf_counter()
        imp = subprocess.run([str(cli), "import", str(onnx_path), "-o", str(grove_path)],
                             capture_output=True, text=True)
        import_ms = (time.perf_counter() - t0) * 1e3
        if imp.returncode != 0:
            err = (imp.stderr or imp.stdout).strip().splitlines()[-1:] or ["?"]
            opens.append({"model": name, "error": f"grove import: {err[0]}"})
            for label, _, _ in shapes:
                for threads in args.threads:
                    progress.step(f"{name} {label} t{threads}: skipped")
                    runs.append({"model": name, "shape": label, "threads": threads, "error": "import failed"})
            continue

        def ort_session(threads):
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            if args.no_spin:
                so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(str(onnx_path), sess_options=so, providers=["CPUExecutionProvider"])

        # Opening: grove's Model.load + Session against ORT's InferenceSession, interleaved.
        # The first --open-warmup rounds are not counted.
        load_s, sess_s, ort_s = [], [], []
        try:
            for r in range(args.open_warmup + args.open_reps):
                timed = r >= args.open_warmup
                gc.collect()
                for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                    if which == 0:
                        t0 = time.perf_counter()
                        m = grove.Model.load(str(grove_path))
                        t1 = time.perf_counter()
                        s = grove.Session(m, device="cpu", intra_op_threads=1)
                        t2 = time.perf_counter()
                        if timed:
                            load_s.append(t1 - t0)
                            sess_s.append(t2 - t1)
                        s.close()
                        del s, m
                    else:
                        t0 = time.perf_counter()
                        s = ort_session(1)
                        if timed:
                            ort_s.append(time.perf_counter() - t0)
                        del s
            o = {"model": name, "import_ms": import_ms, "load_ms": median(load_s) * 1e3,
                 "session_ms": median(sess_s) * 1e3, "ort_session_ms": median(ort_s) * 1e3}
            o["open_ms"] = o["load_ms"] + o["session_ms"]
            o["open_over_ort"] = o["open_ms"] / o["ort_session_ms"]
        except Exception as e:  # noqa: BLE001 - reported, the rest goes on
            o = {"model": name, "import_ms": import_ms, "error": f"{type(e).__name__}: {e}"}
        opens.append(o)

        model = grove.Model.load(str(grove_path))
        cases = read_cases(data)
        for threads in args.threads:
            try:
                gs = grove.Session(model, device="cpu", intra_op_threads=threads)
                os_ = ort_session(threads)
            except Exception as e:  # noqa: BLE001
                for label, _, _ in shapes:
                    progress.step(f"{name} {label} t{threads}: no session")
                    runs.append({"model": name, "shape": label, "threads": threads,
                                 "error": f"session: {type(e).__name__}: {e}"})
                continue
            ort_outputs = [o.name for o in os_.get_outputs()]
            for label, base, dims in shapes:
                progress.step(f"{name} {label} t{threads}")
                row = {"model": name, "shape": label, "threads": threads}
                runs.append(row)
                try:
                    inputs = make_inputs(np, model, cases[base], dims)
                    row["inputs"] = {k: list(v.shape) for k, v in inputs.items()}

                    def run_grove(inputs=inputs):
                        return gs.run(inputs)

                    def run_ort(inputs=inputs):
                        return os_.run(None, inputs)

                    t0 = time.perf_counter()
                    got = run_grove()
                    row["grove_first_ms"] = (time.perf_counter() - t0) * 1e3
                    t0 = time.perf_counter()
                    want = dict(zip(ort_outputs, run_ort()))
                    row["ort_first_ms"] = (time.perf_counter() - t0) * 1e3
                    ok, worst, what = compare_outputs(np, got, want, args.tol)
                    row.update(agree=ok, max_abs_diff=worst)
                    if not ok:
                        row["mismatch"] = what
                    fns = [run_grove, run_ort]
                    run_core = grove_core_runner(grove, gs, inputs) if args.core else None
                    if run_core is not None:
                        same, _, what = compare_outputs(np, run_core(), got, args.tol)
                        if not same:
                            raise RuntimeError(f"grove's C ABI path gave other outputs than Session.run: {what}")
                        fns.append(run_core)
                    for _ in range(2):
                        for fn in fns:
                            fn()
                    gc.disable()
                    try:
                        times, reps = interleaved(fns, args.rounds, round_s,
                                                  settle_stats if args.settle else None)
                    finally:
                        gc.enable()
                    tg, to = times[0], times[1]
                    row.update(grove_ms=tg * 1e3, ort_ms=to * 1e3, ratio=tg / to, reps=reps)
                    if run_core is not None:
                        row.update(grove_core_ms=times[2] * 1e3, core_ratio=times[2] / to)
                except Exception as e:  # noqa: BLE001
                    row["error"] = f"{type(e).__name__}: {e}"
            gs.close()
            del os_
        del model
    progress.end()
    meta["load_after"] = os.getloadavg()
    meta["settle"] = dict(settle_stats) if args.settle else False

    print_tables(runs, opens, args.tol)
    if args.settle and settle_stats.get("waits"):
        print(f"waited for idle threads {settle_stats['waits']} times, {settle_stats['seconds']:.1f} s in all"
              + (f"; {settle_stats['timeouts']} waits gave up after {SETTLE_MAX_S * 1e3:.0f} ms (a thread of this "
                 "process still running)" if settle_stats.get("timeouts") else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "open": opens, "runs": runs}, indent=1) + "\n")
        print(f"\nwrote {args.json}")
    return 0


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def fmt_ms(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def print_tables(runs, opens, tol):
    core = any("core_ratio" in r for r in runs)
    print()
    header = f"{'model':<20} {'shape':<12} {'thr':>3} {'grove ms':>9} {'ORT ms':>9} {'grove/ORT':>9}"
    if core:
        header += f" {'core ms':>9} {'core/ORT':>8}"
    print(header + "  outputs")
    print("-" * (len(header) + 9))
    for r in runs:
        if "ratio" in r:
            agree = "agree" if r.get("agree") else "DIFFER: " + r.get("mismatch", "")
            line = (f"{r['model']:<20} {r['shape']:<12} {r['threads']:>3} {fmt_ms(r['grove_ms']):>9} "
                    f"{fmt_ms(r['ort_ms']):>9} {r['ratio']:>8.2f}x")
            if core:
                line += (f" {fmt_ms(r['grove_core_ms']):>9} {r['core_ratio']:>7.2f}x" if "core_ratio" in r
                         else f" {'-':>9} {'-':>8}")
            print(f"{line}  {agree}")
        else:
            print(f"{r['model']:<20} {r['shape']:<12} {r['threads']:>3} {'error':>9}: {r.get('error', '?')}")

    print()
    print("per model: geometric mean of grove/ORT over its shapes and thread counts; worst and best"
          + (" (core: grove through its C ABI, without the Python package's per-run work)" if core else ""))
    models = list(dict.fromkeys(r["model"] for r in runs))
    every = {"ratio": [], "core_ratio": []}
    for m in models:
        rs = [r for r in runs if r["model"] == m and "ratio" in r]
        if not rs:
            continue
        parts = []
        for key, what in (("ratio", "grove"), ("core_ratio", "core")):
            ks = [r for r in rs if key in r]
            if not ks:
                continue
            ratios = [r[key] for r in ks]
            every[key] += ratios
            worst, best = max(ks, key=lambda r: r[key]), min(ks, key=lambda r: r[key])
            parts.append(f"{what} {geomean(ratios):5.2f}x (worst {worst[key]:.2f}x {worst['shape']} "
                         f"t{worst['threads']}, best {best[key]:.2f}x {best['shape']} t{best['threads']})")
        print(f"  {m:<20} " + "; ".join(parts))
    for key, what in (("ratio", "grove"), ("core_ratio", "core")):
        xs = every[key]
        if xs:
            print(f"  {'all':<20} {what} {geomean(xs):5.2f}x, slower than ORT in {sum(x > 1.0 for x in xs)} "
                  f"of {len(xs)}, above 1.5x in {sum(x > 1.5 for x in xs)}")
    print("  (the issue's goal: every model at most 1.0x, no shape above 1.5x)")
    differ = [r for r in runs if "agree" in r and not r["agree"]]
    errors = [r for r in runs if "error" in r]
    if differ:
        print(f"  outputs differ beyond {tol:g}*(1+|ort|) in {len(differ)} case(s): see above")
    if errors:
        print(f"  {len(errors)} case(s) failed: see above")

    print()
    header = (f"{'model':<20} {'import ms':>9} {'load ms':>8} {'session ms':>10} {'open ms':>8} "
              f"{'ORT session ms':>14} {'open/ORT':>8}")
    print("opening a model (grove: Model.load + Session, 1 thread; ORT: InferenceSession; medians of the "
          "interleaved openings after --open-warmup untimed ones; import: `grove import` of the ONNX file, "
          "a process, once):")
    print(header)
    print("-" * len(header))
    for o in opens:
        if "open_ms" in o:
            print(f"{o['model']:<20} {fmt_ms(o['import_ms']):>9} {fmt_ms(o['load_ms']):>8} "
                  f"{fmt_ms(o['session_ms']):>10} {fmt_ms(o['open_ms']):>8} {fmt_ms(o['ort_session_ms']):>14} "
                  f"{o['open_over_ort']:>7.3f}x")
        else:
            print(f"{o['model']:<20} error: {o.get('error', '?')}")
    ok = [o["open_over_ort"] for o in opens if "open_over_ort" in o]
    if ok:
        print(f"  worst open/ORT {max(ok):.3f}x (goal: at most 0.1x)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
