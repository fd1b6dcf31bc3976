"""Session(..., trace_path=...) and log=: a Chrome trace event file written
at close and by write_trace(), with one step event per kernel the session
counted, each inside its run's event; the log callable gets the session's
messages at its level; bad values are grove's errors."""
import json

import numpy as np
import pytest

import grove


def complete_events(path):
    trace = json.loads(path.read_text())
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_trace_has_one_event_per_step_inside_its_run(demo_dir, tmp_path):
    path = tmp_path / "mlp.json"
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu", trace_path=str(path),
                            trace_max_runs=2)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    for _ in range(3):
        session.run({"x": x})
    kernels = session.stats()["kernels_run"]
    copy = tmp_path / "copy.json"
    session.write_trace(str(copy))
    session.close()  # writes trace_path
    for file in (path, copy):
        events = complete_events(file)
        runs = [e for e in events if e["cat"] == "run"]
        steps = [e for e in events if e["cat"] == "step"]
        assert [r["name"] for r in runs] == ["run 2", "run 3"]  # the last trace_max_runs
        assert len(steps) == 2 * kernels // 3
        for r in runs:
            mine = [s for s in steps if r["ts"] <= s["ts"] and s["ts"] + s["dur"] <= r["ts"] + r["dur"] + 1e-3]
            assert len(mine) == kernels // 3
            assert sum(s["dur"] for s in mine) <= r["dur"] + 1e-3
            assert all(s["args"]["inputs"] and s["args"]["backend"] == "cpu" for s in mine)


def test_log_gets_messages_at_its_level(demo_dir):
    got = []
    model = grove.Model.load(demo_dir / "mlp.grove")
    session = grove.Session(model, device="cpu", max_cached_plans=1, log=lambda level, msg: got.append((level, msg)),
                            log_level="info")
    for batch in (2, 4):
        session.run({"x": np.zeros((batch, 16), np.float32)})
    session.close()
    assert [level for level, _ in got] == ["info"]
    assert "a plan was dropped" in got[0][1]


def test_trace_errors(demo_dir, tmp_path):
    model = grove.Model.load(demo_dir / "mlp.grove")
    with pytest.raises(grove.Error, match="cannot be written") as e:
        grove.Session(model, device="cpu", trace_path=str(tmp_path / "no-such-dir" / "t.json"))
    assert e.value.code_name == "INVALID_ARGUMENT"
    with pytest.raises(grove.Error, match="trace_max_runs is 0"):
        grove.Session(model, device="cpu", trace_path=str(tmp_path / "t.json"), trace_max_runs=0)
    with pytest.raises(ValueError, match="log_level"):
        grove.Session(model, device="cpu", log_level="loud")
    with pytest.raises(TypeError, match="log must be a callable"):
        grove.Session(model, device="cpu", log="stderr")
    session = grove.Session(model, device="cpu")
    with pytest.raises(grove.Error, match="does not trace"):
        session.write_trace()
    session.close()
