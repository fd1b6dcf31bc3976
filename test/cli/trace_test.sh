# `grove run --trace` and `grove bench --trace`: the file is a Chrome trace
# event file (valid JSON, complete events), with one step event per step
# run, each inside its run's event, as many per run as `grove inspect`
# plans steps and as `grove run` counts kernels; the CUDA path (emulated)
# lists a replayed graph's steps; bad paths and values are clear errors.
source "$(dirname "$0")/common.bash"
make_models
make_inputs
G=$GROVE_BIN
T="$TEST_TMP/traces"
mkdir -p "$T"

# trace_check FILE CODE: python3 with the trace's complete events as `ev`,
# its runs as `runs` and, per run, the events inside it as `inside[i]`.
trace_check() {
  if ! python3 - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["traceEvents"], list), d
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
for e in ev:
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["name"] and "pid" in e and "tid" in e, e
ns = lambda us: round(us * 1000)
within = lambda e, r: ns(e["ts"]) >= ns(r["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= ns(r["ts"]) + ns(r["dur"])
runs = [e for e in ev if e["cat"] == "run"]
inside = [[e for e in ev if e["cat"] != "run" and within(e, r)] for r in runs]
assert sum(len(i) for i in inside) == len(ev) - len(runs), "an event outside every run"
exec(sys.argv[2])
EOF
  then
    fail "trace check failed on $1: $2"
  fi
}

# --- grove run on the CPU ----------------------------------------------------
if expect_ok "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --device cpu --repeat 3 \
    --trace "$T/mlp.json"; then
  expect_stdout "^trace: .*mlp\.json$"
  KERNELS=$(sed -n 's/.*kernels run \([0-9]*\).*/\1/p' "$OUT")
  [ -n "$KERNELS" ] || fail "no kernel count in grove run's output"
  if expect_ok "$G" inspect "$MODELS/mlp.grove" --json --shape x=2x16 --device cpu; then
    cp "$OUT" "$T/mlp_inspect.json"
    trace_check "$T/mlp.json" "
plan = json.load(open('$T/mlp_inspect.json'))['segments']['paths'][0]['steps']
assert len(runs) == 3, runs
for r, i in zip(runs, inside):
    steps = [e for e in i if e['cat'] == 'step']
    assert len(steps) == len(plan), (len(steps), len(plan))
    assert [s['args']['op'] for s in steps] == [p['op'] for p in plan], (steps, plan)
    assert sum(ns(s['dur']) for s in steps) <= ns(r['dur']), r
    assert all(s['args']['backend'] == 'cpu' and s['args']['inputs'] for s in steps), steps
assert sum(e['cat'] == 'step' for e in ev) == $KERNELS, $KERNELS
assert runs[0]['args']['plan'] == 'created' and runs[1]['args']['plan'] == 'cache hit', runs
assert runs[0]['args']['inputs'] == ['f32[2,16]'], runs[0]
assert sum(e['cat'] == 'plan' for e in ev) == 1"
  fi
fi

# A Loop: one event per body call, enclosing the body's steps.
if expect_ok "$G" run "$MODELS/loop.grove" --input trip_count="$INPUTS/loop_trip_count.npy" \
    --input x="$INPUTS/loop_x.npy" --input limit="$INPUTS/loop_limit.npy" --device cpu --trace "$T/loop.json"; then
  KERNELS=$(sed -n 's/.*kernels run \([0-9]*\).*/\1/p' "$OUT")
  trace_check "$T/loop.json" "
bodies = [e for e in ev if e['cat'] == 'subgraph']
assert len(bodies) >= 1, bodies
for s in ev:
    if s['cat'] == 'step' and s['args']['subgraph'] != 'main':
        assert any(within(s, b) for b in bodies), s
assert sum(e['cat'] == 'step' for e in ev) == $KERNELS, $KERNELS
steps = sorted((e for e in ev if e['cat'] == 'step'), key=lambda e: e['ts'])
assert all(ns(a['ts']) + ns(a['dur']) <= ns(b['ts']) for a, b in zip(steps, steps[1:])), 'step events overlap'
assert sum(ns(s['dur']) for s in steps) <= ns(runs[0]['dur'])"
fi

# --- the CUDA path (emulated): a replayed graph's steps are untimed events ---
if expect_ok "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --device emulated-cuda --repeat 2 \
    --trace "$T/mlp_cuda.json"; then
  KERNELS=$(sed -n 's/.*kernels run \([0-9]*\).*/\1/p' "$OUT")
  trace_check "$T/mlp_cuda.json" "
assert len(runs) == 2, runs
graphs = [[e for e in i if e['cat'] == 'graph'] for i in inside]
assert [g[0]['args']['graph'] for g in graphs] == ['captured', 'replayed'], graphs
assert sum(len(e['args']['steps']) for g in graphs for e in g) == $KERNELS, $KERNELS
steps = [e for e in ev if e['cat'] == 'step']
assert len(steps) == $KERNELS, (len(steps), $KERNELS)
assert all(s['dur'] == 0 and s['args']['timed'] is False for s in steps), steps
assert sum(e['cat'] == 'capture' for e in ev) >= 1
assert all(r['args']['device'] == 'cuda' for r in runs)"
fi

# --- grove bench: the last --trace-runs runs ----------------------------------
if expect_ok "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --iterations 5 --warmup 1 --device cpu \
    --trace "$T/bench.json" --trace-runs 4; then
  trace_check "$T/bench.json" "
assert len(runs) == 4, len(runs)
assert [r['name'] for r in runs] == ['run 3', 'run 4', 'run 5', 'run 6'], [r['name'] for r in runs]
plan = json.load(open('$T/mlp_inspect.json'))['segments']['paths'][0]['steps']
assert all(sum(e['cat'] == 'step' for e in i) == len(plan) for i in inside), [len(i) for i in inside]"
fi

# --- --log: the session's messages on stderr at a level or above -------------
if expect_ok "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --device cpu --log debug; then
  grep -Eq "^grove: debug: plan made for subgraph 'main' at f32\[2,16\]: [0-9]+ steps, 1 segments$" "$ERR" ||
    { fail "no debug line for the plan"; show run --log debug; }
fi
if expect_ok "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --device cpu --log warning; then
  [ ! -s "$ERR" ] || { fail "messages below warning were printed"; show run --log warning; }
fi
expect_fail 2 "--log wants debug, info, warning or error, not 'loud'" \
  "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --log loud

# --- errors ------------------------------------------------------------------
expect_fail 1 "trace file '$TEST_TMP/no-such-dir/t.json' cannot be written" \
  "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --device cpu --trace "$TEST_TMP/no-such-dir/t.json"
expect_fail 1 "trace file '$T' cannot be written" \
  "$G" bench "$MODELS/mlp.grove" --shape x=2x16 --iterations 1 --device cpu --trace "$T"
expect_fail 2 "--trace wants a file name" "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --trace ""
expect_fail 2 "--trace-runs wants a positive number of runs, not '0'" \
  "$G" run "$MODELS/mlp.grove" --input x="$INPUTS/mlp_x.npy" --trace "$T/x.json" --trace-runs 0

finish
