"""Session.run on the demo models and the exported PyTorch models: the same
outputs as `grove run`, and as PyTorch's references; sessions, options and
stats."""
import gc
import threading
import weakref

import numpy as np
import pytest

import grove
from conftest import grove_run


def demo_cases(demo_dir):
    def load(name):
        return np.load(demo_dir / name)
    return [
        ("mlp", {"x": load("mlp_x.npy")}),
        ("transformer", {"x": load("transformer_x_1x8.npy")}),
        ("transformer", {"x": load("transformer_x_2x16.npy")}),
        ("early_exit", {"x": load("early_exit_pos.npy")}),
        ("early_exit", {"x": load("early_exit_neg.npy")}),
        ("loop", {"trip_count": load("loop_trip_count.npy"), "x": load("loop_x.npy"),
                  "limit": load("loop_limit.npy")}),
        ("loop", {"trip_count": load("loop_trip_count.npy"), "x": load("loop_x.npy"),
                  "limit": load("loop_limit_small.npy")}),
    ]


def test_demo_models_equal_grove_run(grove_bin, demo_dir, tmp_path):
    sessions = {}
    for i, (name, inputs) in enumerate(demo_cases(demo_dir)):
        path = demo_dir / f"{name}.grove"
        if name not in sessions:
            sessions[name] = grove.Session(grove.Model.load(path), device="cpu")
        session = sessions[name]
        got = session.run(inputs)
        want = grove_run(grove_bin, path, inputs, [s.name for s in session.model.outputs], tmp_path / str(i))
        assert list(got) == list(want)
        for out in want:
            assert got[out].dtype == want[out].dtype and got[out].shape == want[out].shape, (name, out)
            np.testing.assert_allclose(got[out], want[out], rtol=1e-6, atol=1e-7, err_msg=f"{name} {out}")
    # Both If branches were taken (different output widths), so the test saw both paths.
    ee = [sessions["early_exit"].run(inputs)["y"].shape for name, inputs in demo_cases(demo_dir) if name == "early_exit"]
    assert ee[0] != ee[1]


def test_exported_models_equal_pytorch_and_grove_run(grove_bin, exported_models, tmp_path):
    checked = 0
    for name, (path, cases) in exported_models.items():
        session = grove.Session(grove.Model.load(path), device="cpu")
        specs_in, specs_out = session.model.inputs, session.model.outputs
        for case, input_files, output_files in cases:
            inputs = {spec.name: np.load(f) for spec, f in zip(specs_in, input_files)}
            got = session.run(inputs)
            for spec, f in zip(specs_out, output_files):
                ref = np.load(f)
                assert got[spec.name].shape == ref.shape, (name, case, spec.name)
                if ref.dtype.kind == "f":
                    assert np.all(np.abs(got[spec.name] - ref) <= 1e-4 * (1 + np.abs(ref))), (name, case, spec.name)
                else:
                    np.testing.assert_array_equal(got[spec.name], ref, err_msg=f"{name} {case} {spec.name}")
            if case.endswith("_again") or case == cases[0][0]:
                want = grove_run(grove_bin, path, inputs, [s.name for s in specs_out], tmp_path / name / case)
                for out in want:
                    np.testing.assert_allclose(got[out], want[out], rtol=1e-6, atol=1e-7, err_msg=f"{name} {case}")
            checked += 1
    assert len(exported_models) >= 7 and checked >= 25


def test_inputs_as_a_list_and_outputs_independent_of_later_runs(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    first = session.run([x])["y"]
    kept = first.copy()
    session.run({"x": np.zeros((5, 16), np.float32)})
    np.testing.assert_array_equal(first, kept)
    # Non-contiguous, big-endian and list inputs are converted; same answers.
    wide = np.zeros((x.shape[0], 32), np.float32)
    wide[:, ::2] = x
    np.testing.assert_array_equal(session.run({"x": wide[:, ::2]})["y"], kept)
    np.testing.assert_array_equal(session.run({"x": x.astype(">f4")})["y"], kept)
    np.testing.assert_array_equal(session.run({"x": x.tolist()})["y"], kept)


def test_stats_count_runs_and_plans(demo_dir):
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    assert session.device == "cpu"
    assert session.stats()["runs"] == 0
    for batch in (1, 2, 2, 1):
        session.run({"x": np.ones((batch, 16), np.float32)})
    stats = session.stats()
    assert stats["runs"] == 4 and stats["plans_created"] == 2 and stats["plan_cache_hits"] == 2
    assert stats["kernels_run"] > 0 and stats["device_allocations"] == 0
    assert isinstance(stats["graph_fallback_reason"], str) and stats["graph_refreshes"] == 0
    # Control flow on the CPU is neither in graphs nor counted as host-driven.
    assert stats["control_flow_in_graphs"] == 0 and stats["control_flow_host_driven"] == 0
    assert stats["control_flow_fallback_reason"] == ""


def test_shape_buckets_reach_grove(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu", shape_buckets={"batch": "2,8,64", "*": "pow2"})
    session.run({"x": np.ones((3, 16), np.float32)})
    stats = session.stats()
    # The CPU has no graphs for a bucket to share: counted as none.
    assert stats["buckets_made"] == 0 and stats["bucket_padding_bytes"] == 0
    assert stats["bucket_fallback_reason"] == ""
    with pytest.raises(grove.Error, match="no symbol 'seq'"):
        grove.Session(model, device="cpu", shape_buckets={"seq": "pow2"})
    with pytest.raises(grove.Error, match="none of auto, pow2"):
        grove.Session(model, device="cpu", shape_buckets={"batch": "pow3"})
    with pytest.raises(grove.Error, match="not a symbol name and a rule"):
        grove.Session(model, device="cpu", shape_buckets={"batch=1": "pow2"})
    with pytest.raises(TypeError):
        grove.Session(model, device="cpu", shape_buckets=["batch"])


def test_options_reach_grove(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu", max_cached_plans=1)
    for batch in (1, 2, 1):
        session.run({"x": np.ones((batch, 16), np.float32)})
    assert session.stats()["plans_evicted"] == 2
    with grove.Session(model, device="auto") as auto:
        assert auto.device in ("cpu", "cuda")


def test_sessions_reuse_what_opening_does_not_change(demo_dir):
    # Opening is timed: a session copies the library's default options (set
    # ones do not reach the next session) and takes its descriptor array
    # types from a module cache (they outlive it, a collection included).
    model = grove.Model.load(demo_dir / "mlp.grove")
    first = grove.Session(model, device="cpu", max_cached_plans=1)
    first.run({"x": np.ones((1, 16), np.float32)})
    inputs_type = weakref.ref(first._inputs_type)
    first.close()
    del first
    gc.collect()
    assert inputs_type() is not None
    second = grove.Session(model, device="cpu")
    second.run({"x": np.ones((1, 16), np.float32)})
    assert second._inputs_type is inputs_type() and second.device == "cpu"
    for batch in (1, 2, 1):
        second.run({"x": np.ones((batch, 16), np.float32)})
    assert second.stats()["plans_evicted"] == 0


def test_sessions_share_options_built_once_per_combination(demo_dir):
    # Options without pointers are built once per combination of arguments
    # and shared; each session still gets exactly its own.
    model = grove.Model.load(demo_dir / "mlp.grove")
    x = {"x": np.ones((1, 16), np.float32)}
    for _ in range(2):
        for plans, evicted in ((1, 2), (0, 0), (2, 1), (1, 2)):
            session = grove.Session(model, device="cpu", max_cached_plans=plans)
            for batch in (1, 2, 3):
                session.run({"x": np.ones((batch, 16), np.float32)})
            assert session.stats()["plans_evicted"] == evicted, plans
            session.close()
    first = grove.Session(model, device="cpu", max_cached_plans=1)
    second = grove.Session(model, device="cpu", max_cached_plans=1)
    assert first._handle.contents is not None and second.device == first.device == "cpu"
    # A combination grove refuses is refused every time, and arguments that
    # cannot be a key (a list) reach the same checks as before.
    for _ in range(2):
        with pytest.raises(grove.Error, match="max_cached_plans is negative"):
            grove.Session(model, device="cpu", max_cached_plans=-1)
        with pytest.raises(TypeError):
            grove.Session(model, device="cpu", max_cached_plans=[1])
        with pytest.raises(ValueError, match="device must be one of"):
            grove.Session(model, device="tpu")
    # A session with a pointer-carrying option (a log) is built on its own
    # and does not change the shared options of the same other arguments.
    got = []
    logged = grove.Session(model, device="cpu", max_cached_plans=1, log=lambda level, msg: got.append(msg),
                           log_level="debug")
    for batch in (1, 2):
        logged.run({"x": np.ones((batch, 16), np.float32)})
    plain = grove.Session(model, device="cpu", max_cached_plans=1)
    assert plain._log_callback is None
    plain.run(x)
    assert logged.stats()["plans_evicted"] == 1


def test_opening_asks_the_library_nothing_a_run_does_not_need(demo_dir):
    # Model.load and Session ask for no description (inputs, outputs,
    # symbols); the first run looks up the names it needs, once, whichever
    # thread makes it.
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    assert model._inputs is None and model._outputs is None and model._output_names is None
    assert session._run_args is None
    x = np.load(demo_dir / "mlp_x.npy")
    results, errors = [], []

    def run():
        try:
            results.append(session.run({"x": x})["y"])
        except grove.Error as e:  # a second thread inside run() at once is refused by grove
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert session._run_args is not None and model._outputs is None
    assert [s.name for s in model.inputs] == ["x"] and model.inputs is model.inputs
    assert results and all(np.array_equal(r, results[0]) for r in results)
    assert all("another thread" in str(e) for e in errors), errors
    np.testing.assert_array_equal(session.run({"x": x})["y"], results[0])


def test_sessions_need_only_the_output_names(demo_dir):
    # Model.outputs describes the outputs' shapes (which the library infers
    # on first request): a session and its runs ask only for their names.
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    out = session.run({"x": np.ones((2, 16), np.float32)})
    assert list(out) == ["y"] and out["y"].shape == (2, 4)
    assert repr(model) == "grove.Model(inputs=['x'], outputs=['y'])"
    assert model._outputs is None
    assert [(s.name, s.dtype, s.shape, s.kind) for s in model.outputs] == [("y", "f32", ("batch", 4), "tensor")]
    assert model.outputs is model.outputs
    assert grove.Session(model, device="cpu").run({"x": np.ones((1, 16), np.float32)})["y"].shape == (1, 4)


def test_any_mapping_and_the_order_of_input_errors(demo_dir):
    # Session.run's fast path (a dict with every name) and its slow path
    # (another Mapping, a wrong key) give the same answers and errors.
    import types
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    want = session.run({"x": x})["y"]
    np.testing.assert_array_equal(session.run(types.MappingProxyType({"x": x}))["y"], want)
    np.testing.assert_array_equal(session.run((x,))["y"], want)
    # A read-only array is read in place as well.
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(session.run({"x": frozen})["y"], want)
    with pytest.raises(grove.Error, match="no model input is called 'z'"):
        session.run({"z": x})  # unknown before missing
    with pytest.raises(grove.Error, match="no model input is called 'z'"):
        session.run(types.MappingProxyType({"x": x, "z": x}))
    # Outputs are the caller's arrays, writable and owning their memory.
    y = session.run({"x": x})["y"]
    assert y.flags.owndata and y.flags.writeable and y.dtype == np.float32
