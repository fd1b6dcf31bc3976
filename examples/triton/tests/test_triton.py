"""The grove model repository served by the real tritonserver (from PyPI's
nvidia-pytriton wheel) on 127.0.0.1: HTTP and gRPC requests at several
shapes, from several client threads at once, each answer compared with
`grove run` (the C++ API through the command line) on that request's inputs
alone. run_tests.sh makes the venv and the repository and sets:

  TRITON_REPO   the prepared repository (prepare_repository.sh)
  GROVE_BIN     the grove tool
  SERVE         examples/triton/serve.sh
  TEST_TMP      scratch (server log, grove run files)
"""
import concurrent.futures
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

REPO = Path(os.environ["TRITON_REPO"])
GROVE_BIN = Path(os.environ["GROVE_BIN"])
SERVE = Path(os.environ["SERVE"])
TMP = Path(os.environ["TEST_TMP"])
READY_TIMEOUT_S = 120

TRITON_DTYPE = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}
SOURCE = Path(__file__).resolve().parents[3]
GENERATED = ["cnn", "early_exit", "list_decoder"]  # configs by make_config.py (run_tests.sh)


@contextlib.contextmanager
def connect(protocol: str, url: str, **kwargs):
    """A client closed on exit: a connection left open holds the server's
    shutdown for its whole exit timeout."""
    client = (httpclient if protocol == "http" else grpcclient).InferenceServerClient(url, **kwargs)
    try:
        yield client
    finally:
        client.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """tritonserver in a process group of its own, stopped (SIGTERM, then
    SIGKILL) at the end whatever happens; its pid is written to
    $TEST_TMP/server.pid so run_tests.sh's trap can end it if pytest dies."""
    http_port, grpc_port = _free_port(), _free_port()
    while grpc_port == http_port:
        grpc_port = _free_port()
    log_path = TMP / "tritonserver.log"
    log = open(log_path, "w")
    env = dict(os.environ, PYTHON=sys.executable, GROVE_TRITON_BACKENDS=str(TMP / "backends"))
    process = subprocess.Popen(
        [str(SERVE), str(REPO), "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
         f"--http-port={http_port}", f"--grpc-port={grpc_port}", "--allow-metrics=false",
         "--exit-timeout-secs=5", "--log-verbose=0"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    (TMP / "server.pid").write_text(str(process.pid))
    try:
        start = time.monotonic()
        ready = False
        with connect("http", f"127.0.0.1:{http_port}") as client:
            while time.monotonic() - start < READY_TIMEOUT_S:
                if process.poll() is not None:
                    break
                try:
                    if client.is_server_ready():
                        ready = True
                        break
                except Exception:
                    pass
                time.sleep(0.2)
        if not ready:
            pytest.fail(f"tritonserver not ready after {time.monotonic() - start:.1f} s (exit code "
                        f"{process.poll()}); its log:\n" + log_path.read_text()[-6000:])
        print(f"tritonserver ready in {time.monotonic() - start:.2f} s")
        yield {"http": f"127.0.0.1:{http_port}", "grpc": f"127.0.0.1:{grpc_port}", "log": log_path}
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        (TMP / "server.pid").unlink(missing_ok=True)


_run_lock = threading.Lock()
_run_count = [0]


def grove_run(model: str, inputs: dict) -> dict:
    """`grove run` on the CPU with these inputs: {output name: array}."""
    with _run_lock:
        _run_count[0] += 1
        work = TMP / "grove_run" / f"{model}_{_run_count[0]}"
    work.mkdir(parents=True, exist_ok=True)
    args = [str(GROVE_BIN), "run", str(REPO / model / "1" / "model.grove"), "--device", "cpu",
            "--output-dir", str(work / "out")]
    for name, array in inputs.items():
        np.save(work / f"{name}.npy", array)
        args += ["--input", f"{name}={work / f'{name}.npy'}"]
    subprocess.run(args, check=True, capture_output=True)
    return {p.stem: np.load(p) for p in (work / "out").glob("*.npy")}


# --- requests and their references --------------------------------------------

def encoder_request(rng, batch, seq):
    x = rng.standard_normal((batch, seq, 32)).astype(np.float32)
    return {"x": x}


def encoder_reference(request):
    return {"y": grove_run("transformer_encoder", request)["y"]}


def silero_request(rng, batch, samples, sr):
    audio = (0.3 * rng.standard_normal((batch, samples))).astype(np.float32)
    state = (0.1 * rng.standard_normal((batch, 2, 128))).astype(np.float32)  # Triton's layout: batch first
    return {"input": audio, "state": state, "sr": np.full((batch, 1), sr, np.int64)}


def silero_reference(request):
    # grove's layout: state [2, batch, 128], sr a scalar.
    out = grove_run("silero_vad", {"input": request["input"], "state": np.ascontiguousarray(
        np.moveaxis(request["state"], 0, 1)), "sr": np.array(request["sr"][0, 0], np.int64)})
    return {"output": out["output"], "stateN": np.moveaxis(out["stateN"], 1, 0)}


def infer(protocol: str, url: str, model: str, request: dict, client=None, outputs=None):
    module = httpclient if protocol == "http" else grpcclient
    if client is None:
        with connect(protocol, url) as own:
            return infer(protocol, url, model, request, own, outputs)
    inputs = []
    for name, array in request.items():
        tensor = module.InferInput(name, list(array.shape), TRITON_DTYPE[array.dtype])
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer(model, inputs)
    names = outputs or (["y"] if model == "transformer_encoder" else ["output", "stateN"])
    return {name: result.as_numpy(name) for name in names}


def assert_close(got: dict, want: dict, what: str):
    for name, expected in want.items():
        assert got[name].shape == expected.shape, f"{what}: {name} shape {got[name].shape} != {expected.shape}"
        # A batched run may sum in another order than the request alone.
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=f"{what}: {name}")


def make_cases():
    rng = np.random.default_rng(20261202)
    cases = []
    for batch, seq in [(1, 4), (2, 9), (3, 16), (1, 9), (2, 4), (1, 33)]:
        cases.append(("transformer_encoder", f"b{batch}_s{seq}", encoder_request(rng, batch, seq)))
    for batch, samples, sr in [(1, 576, 16000), (2, 576, 16000), (1, 512, 16000), (1, 288, 8000), (3, 288, 8000)]:
        cases.append(("silero_vad", f"b{batch}_{sr // 1000}k_{samples}", silero_request(rng, batch, samples, sr)))
    return cases


CASES = make_cases()


@pytest.fixture(scope="module")
def references():
    refs = {}
    for model, name, request in CASES:
        refs[(model, name)] = (encoder_reference if model == "transformer_encoder" else silero_reference)(request)
    return refs


# --- tests --------------------------------------------------------------------

def test_models_ready_with_batching_and_instances(server):
    with connect("http", server["http"]) as client:
        for model in ("silero_vad", "transformer_encoder"):
            assert client.is_model_ready(model), model
            config = client.get_model_config(model)
            assert config["backend"] == "python"
            assert config["max_batch_size"] == 8
            assert "dynamic_batching" in config
            assert config["instance_group"][0]["count"] == 2 and config["instance_group"][0]["kind"] == "KIND_CPU"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_shape_equals_grove_run(server, references, protocol):
    for model, name, request in CASES:
        got = infer(protocol, server[protocol], model, request)
        assert_close(got, references[(model, name)], f"{protocol} {model} {name}")


def test_exported_case_equals_pytorch(server):
    # The PyTorch outputs saved beside the export, through the server.
    folder = Path(__file__).resolve().parents[3] / "test" / "models" / "transformer_encoder"
    got = infer("grpc", server["grpc"], "transformer_encoder", {"x": np.load(folder / "b2_s9_x.npy")})
    np.testing.assert_allclose(got["y"], np.load(folder / "b2_s9_y.npy"), rtol=1e-4, atol=1e-5)


def test_concurrent_clients_http_and_grpc(server, references):
    """8 threads, each with its own HTTP and gRPC clients, send every case
    several times in different orders; all answers equal the references."""
    def worker(seed):
        rng = np.random.default_rng(seed)
        done = 0
        with connect("http", server["http"]) as http, connect("grpc", server["grpc"]) as grpc:
            clients = {"http": http, "grpc": grpc}
            for round_ in range(3):
                for index in rng.permutation(len(CASES)):
                    model, name, request = CASES[index]
                    protocol = "http" if (index + round_ + seed) % 2 == 0 else "grpc"
                    got = infer(protocol, server[protocol], model, request, clients[protocol])
                    assert_close(got, references[(model, name)], f"thread {seed} {protocol} {model} {name}")
                    done += 1
        return done

    before = _statistics(server)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        total = sum(pool.map(worker, range(8)))
    elapsed = time.monotonic() - start
    after = _statistics(server)
    assert total == 8 * 3 * len(CASES)
    requests = sum(after[m][0] - before[m][0] for m in after)
    executions = sum(after[m][1] - before[m][1] for m in after)
    print(f"{total} requests in {elapsed:.2f} s from 8 threads; the server ran {executions} batches "
          f"for {requests} batch rows")


def _statistics(server):
    """{model: (inference_count, execution_count)}: rows inferred and
    model executions (fewer executions than requests: batched)."""
    out = {}
    with connect("http", server["http"]) as client:
        for model in ("silero_vad", "transformer_encoder"):
            stats = client.get_inference_statistics(model)["model_stats"][0]
            out[model] = (int(stats["inference_count"]), int(stats["execution_count"]))
    return out


def test_dynamic_batching_joins_requests(server, references):
    """A burst of 16 same-shape requests at once: Triton's batcher hands
    model.py several per execute(), which runs them as one grove run; each
    request still gets its own rows back."""
    model, name, request = next(c for c in CASES if c[1] == "b1_s9")
    want = references[(model, name)]
    tensor = grpcclient.InferInput("x", list(request["x"].shape), "FP32")
    tensor.set_data_from_numpy(request["x"])
    before = _statistics(server)[model]
    results = []
    done = threading.Semaphore(0)

    def on_result(result, error):
        results.append((result, error))
        done.release()

    with connect("grpc", server["grpc"]) as client:
        for _ in range(16):
            client.async_infer(model, [tensor], on_result)
        for _ in range(16):
            assert done.acquire(timeout=60), "an answer did not come within 60 s"
    for result, error in results:
        assert error is None, error
        assert_close({"y": result.as_numpy("y")}, want, "burst")
    after = _statistics(server)[model]
    rows, executions = after[0] - before[0], after[1] - before[1]
    print(f"burst: 16 requests ran as {executions} executions")
    assert rows == 16
    assert executions < 16, "no two requests of the burst were batched"


def test_grove_error_reaches_the_client(server):
    # 40 samples is shorter than Silero's encoder takes: grove refuses it,
    # and the client gets grove's message (the server keeps serving).
    rng = np.random.default_rng(1)
    bad = silero_request(rng, 1, 40, 16000)
    for protocol in ("http", "grpc"):
        with pytest.raises(InferenceServerException, match="grove"):
            infer(protocol, server[protocol], "silero_vad", bad)
    # A request that Triton itself refuses (x's last dim is 32).
    with pytest.raises(InferenceServerException):
        infer("http", server["http"], "transformer_encoder", {"x": np.zeros((1, 4, 31), np.float32)})
    model, name, request = CASES[0]
    assert infer("http", server["http"], model, request)["y"].shape == request["x"].shape


def test_generated_configs_serve_exported_models(server):
    """Models added with make_config.py (a batched CNN, a model with a scalar
    output, one whose output shapes depend on the data) answer every case of
    test/models over HTTP and gRPC as `grove run` does."""
    import grove
    for model in GENERATED:
        folder = SOURCE / "test" / "models" / model
        grove_model = grove.Model.load(REPO / model / "1" / "model.grove")
        names = [s.name for s in grove_model.outputs]
        for line in (folder / "cases.txt").read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            case, inputs, _ = line.split()
            request = {spec.name: np.load(folder / f) for spec, f in zip(grove_model.inputs, inputs.split(","))}
            want = grove_run(model, request)
            for protocol in ("http", "grpc"):
                got = infer(protocol, server[protocol], model, request, outputs=names)
                for name in names:
                    expected = want[name].reshape(1) if want[name].ndim == 0 else want[name]  # a scalar travels as [1]
                    np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5,
                                               err_msg=f"{protocol} {model} {case} {name}")
