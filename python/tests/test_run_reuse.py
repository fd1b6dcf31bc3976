"""Session.run reuses its ctypes descriptors from run to run (an input of the
same dtype and shape as the last changes only its data pointer; outputs are
copied out of views kept while grove reports the same buffers). Every run of
a long session must give what a fresh session gives, whatever changed
between the runs."""
import numpy as np
import pytest

import grove


def fresh(model, inputs):
    """The reference: a new session, so nothing is reused."""
    with grove.Session(model, device="cpu") as session:
        return session.run(inputs)


def assert_same(got, want):
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_inputs_that_change_between_runs(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    rng = np.random.default_rng(14)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    frozen = x.copy()
    frozen.flags.writeable = False
    wide = np.zeros((4, 32), np.float32)
    wide[:, ::2] = x + 1
    steps = [
        x,                                        # fills the slot
        rng.standard_normal((4, 16)).astype(np.float32),  # same shape, another array: data only
        x,                                        # the first again
        "in place",                               # the same array, its values changed
        frozen,                                   # same shape, read-only
        wide[:, ::2],                             # same shape, strided (copied)
        x.astype(">f4"),                          # same shape, another byte order
        rng.standard_normal((7, 16)).astype(np.float32),  # another batch
        x,                                        # back
        (x + 2).tolist(),                         # a list
        x[:1],                                    # one row, a view of x
        x,
    ]
    for i, value in enumerate(steps):
        if isinstance(value, str):
            x *= -0.5
            value = x
        got = session.run({"x": value})
        assert_same(got, fresh(model, {"x": value}))
        assert got["y"].shape[0] == np.asarray(value).shape[0], i
    assert session.stats()["runs"] == len(steps)


def test_a_wrong_input_after_a_reused_one_is_refused_and_the_session_goes_on(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    want = session.run({"x": x})
    session.run({"x": x})
    # Same shape, another dtype: grove checks it, as on a first run.
    with pytest.raises(grove.Error) as e:
        session.run({"x": x.astype(np.float64)})
    with pytest.raises(grove.Error) as first:
        fresh(model, {"x": x.astype(np.float64)})
    assert e.value.code == first.value.code and e.value.message == first.value.message
    with pytest.raises(grove.Error):
        session.run({"x": np.ones((x.shape[0], 15), np.float32)})
    assert_same(session.run({"x": x}), want)
    assert_same(session.run([x]), want)


def test_outputs_are_the_callers_own_copies(demo_dir):
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    a, b = np.ones((3, 16), np.float32), np.full((3, 16), -2.0, np.float32)
    runs = [session.run({"x": v})["y"] for v in (a, b, a, b)]  # the later ones copy out of kept views
    for y in runs:
        assert y.flags.owndata and y.flags.writeable and y.flags.c_contiguous
    kept = [y.copy() for y in runs]
    runs[2][...] = 7  # writing one result touches neither another result nor the session
    session.run({"x": a})
    np.testing.assert_array_equal(runs[0], kept[0])
    np.testing.assert_array_equal(runs[1], kept[1])
    np.testing.assert_array_equal(runs[3], kept[3])
    assert not np.array_equal(kept[0], kept[1])
    np.testing.assert_array_equal(session.run({"x": a})["y"], kept[0])


def test_outputs_whose_shape_follows_the_branch_taken(demo_dir):
    # The early exit's If gives outputs of different widths per branch: the
    # kept views must follow the buffers grove reports.
    model = grove.Model.load(demo_dir / "early_exit.grove")
    session = grove.Session(model, device="cpu")
    pos, neg = np.load(demo_dir / "early_exit_pos.npy"), np.load(demo_dir / "early_exit_neg.npy")
    want = {"pos": fresh(model, {"x": pos}), "neg": fresh(model, {"x": neg})}
    assert want["pos"]["y"].shape != want["neg"]["y"].shape
    for which in ("pos", "pos", "neg", "neg", "pos", "neg", "pos"):
        assert_same(session.run({"x": pos if which == "pos" else neg}), want[which])


def test_a_run_while_another_holds_the_descriptors(demo_dir):
    # A second thread's run() takes descriptors of its own (grove then
    # refuses it if the first is still inside grove); here nothing else runs,
    # so it succeeds with the same answer.
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu")
    x = np.load(demo_dir / "mlp_x.npy")
    want = session.run({"x": x})
    with session._run_lock:
        assert_same(session.run({"x": x}), want)
        assert_same(session.run([x.tolist()]), want)
    assert_same(session.run({"x": x}), want)
    session.close()
    with pytest.raises(grove.Error, match="closed"):
        session.run({"x": x})
