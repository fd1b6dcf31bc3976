"""The GIL is released while grove runs: two threads, each with its own
session, are inside grove at the same moment, while the main thread runs
Python. Shown without timing ratios: both sessions watch one CancelToken
and run a Loop that never ends by itself; the main thread cancels it once.
A run that returns CANCELLED ended after that moment, and a run that ran
kernels before stopping started before it (a run that starts cancelled runs
none: checked first). So both runs were inside grove when the main thread,
holding the GIL, called cancel(); had either held the GIL through its run,
the main thread could not have, and the run would have ended at its
deadline instead."""
import threading
import time

import numpy as np

import grove

ENDLESS = {"trip_count": np.array(10**12, np.int64), "x": np.full(64, -1, np.float32),
           "limit": np.array(0, np.float32)}  # the sum stays below 0: the Loop goes on until stopped


def run_once(session, result):
    before = session.stats()["kernels_run"]
    try:
        session.run(ENDLESS)
        result["status"] = "OK"
    except grove.Error as e:
        result["status"] = e.code_name
    result["kernels"] = session.stats()["kernels_run"] - before


def test_two_sessions_run_at_once_with_the_gil_released(demo_dir):
    model = grove.Model.load(demo_dir / "loop.grove")
    token = grove.CancelToken()
    sessions = [grove.Session(model, device="cpu", cancel_token=token, max_body_runs=0, run_deadline_ms=30000)
                for _ in range(2)]

    # A run that starts with the token set runs no kernel.
    token.cancel()
    control = {}
    run_once(sessions[0], control)
    assert control == {"status": "CANCELLED", "kernels": 0}

    for attempt in range(3):
        token.reset()
        results = [{}, {}]
        threads = [threading.Thread(target=run_once, args=(s, r)) for s, r in zip(sessions, results)]
        for t in threads:
            t.start()
        time.sleep(0.5 * (attempt + 1))  # time for both threads to enter grove
        token.cancel()  # the main thread runs Python while both threads are in grove
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        statuses = [r["status"] for r in results]
        assert statuses == ["CANCELLED", "CANCELLED"], f"the runs ended {statuses}, not by the cancel"
        if all(r["kernels"] > 0 for r in results):
            return
        # A thread had not entered grove yet when cancel() came (a slow start): again, waiting longer.
    raise AssertionError(f"a thread never started its run before the cancel: {results}")
