#!/usr/bin/env python3
"""Exports small, seeded, randomly initialised PyTorch models to ONNX for grove's
end-to-end tests, with PyTorch's outputs at several input shapes.

    python3 scripts/export_test_models.py [--out test/models] [--only NAME ...]

Needs torch, onnx, onnxruntime and numpy (a throwaway venv; nothing here is a
build dependency). For each model it writes test/models/<name>/:

  model.onnx     torch.onnx.export at opset 17 with dynamic dims named after what
                 they are (batch, seq, height, width); the exporter per model
                 is chosen in MODELS below
  <case>_<input>.npy, <case>_<output>.npy
                 the inputs of each case and PyTorch's outputs for them
  cases.txt      one case per line: NAME INPUTS OUTPUTS, the files of the
                 model's inputs and outputs in model order, comma separated

Every export is also run with onnxruntime and compared with PyTorch (a check
of the export, not of grove); the script fails if they disagree. Models with
data-dependent control flow check that no case sits on a knife edge (a branch
condition, an argmax or a stopping threshold within a small margin), so that
float rounding in another runtime cannot change the path.
"""

import argparse
import math
import os
import warnings
from typing import List

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 17
MARGIN = 1e-3  # the least distance of a data-dependent decision from its threshold


# --- the models ---------------------------------------------------------------


class TransformerEncoder(nn.Module):
  """Two post-norm nn.TransformerEncoderLayer, d_model 32, 4 heads."""

  def __init__(self):
    super().__init__()
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

  def forward(self, x):
    return self.encoder(x)


class GptBlock(nn.Module):
  """Token and position embeddings, one pre-norm decoder block (causal
  self-attention, GELU MLP), final LayerNorm and the vocabulary projection.
  The causal mask is a buffer sliced to the sequence length, as in GPT-2."""

  def __init__(self, vocab=64, d=48, heads=4, max_len=64):
    super().__init__()
    self.heads = heads
    self.tok = nn.Embedding(vocab, d)
    self.pos = nn.Embedding(max_len, d)
    self.ln1 = nn.LayerNorm(d)
    # Separate projections: dynamo's Split at opset 18 keeps its num_outputs
    # attribute when converted down to 17, which opset 17 does not have.
    self.q = nn.Linear(d, d)
    self.k = nn.Linear(d, d)
    self.v = nn.Linear(d, d)
    self.proj = nn.Linear(d, d)
    self.ln2 = nn.LayerNorm(d)
    self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    self.ln_f = nn.LayerNorm(d)
    self.head = nn.Linear(d, vocab, bias=False)
    self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

  def attend(self, q, k, v, t):
    """Causal attention of the heads q, k, v [b, heads, t, d]."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v

  def forward(self, ids):
    b, t = ids.shape
    positions = torch.arange(t, device=ids.device)
    x = self.tok(ids) + self.pos(positions)
    h = self.ln1(x)
    split = lambda z: z.reshape(b, t, self.heads, -1).transpose(1, 2)
    q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
    attn = self.attend(q, k, v, t)
    x = x + self.proj(attn.transpose(1, 2).reshape(b, t, -1))
    x = x + self.mlp(self.ln2(x))
    return self.head(self.ln_f(x))


class Cnn(nn.Module):
  """Conv/BatchNorm/ReLU/MaxPool twice, global average pool, Linear. The second
  BatchNorm follows the ReLU, so the exporter cannot fold it into the Conv."""

  def __init__(self):
    super().__init__()
    self.features = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(16), nn.MaxPool2d(2))
    self.pool = nn.AdaptiveAvgPool2d(1)
    self.fc = nn.Linear(16, 10)
    for bn in (self.features[1], self.features[6]):  # statistics as after training
      bn.running_mean.uniform_(-0.5, 0.5)
      bn.running_var.uniform_(0.5, 2.0)
      bn.weight.data.uniform_(0.5, 1.5)
      bn.bias.data.uniform_(-0.2, 0.2)

  def forward(self, image):
    return self.fc(torch.flatten(self.pool(self.features(image)), 1))


class Lstm(nn.Module):
  """A stacked two-layer nn.LSTM (16 -> 32), batch first, with initial states."""

  def __init__(self):
    super().__init__()
    self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)

  def forward(self, x, h0, c0):
    return self.lstm(x, (h0, c0))


class EarlyExit(nn.Module):
  """A gate on the first layer's features picks the exit: confident inputs
  leave through a shallow head, the others go through two more layers. The
  data-dependent `if` becomes an ONNX If through torch.jit.script."""

  def __init__(self):
    super().__init__()
    self.stem = nn.Linear(16, 32)
    self.gate = nn.Linear(32, 1)
    self.shallow = nn.Linear(32, 4)
    self.deep = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

  def confidence(self, x):
    return torch.sigmoid(self.gate(torch.relu(self.stem(x)))).mean()

  def forward(self, x):
    h = torch.relu(self.stem(x))
    confidence = torch.sigmoid(self.gate(h)).mean()
    if bool(confidence > 0.5):
      y = self.shallow(h)
    else:
      y = self.deep(h)
    return y, confidence


class LoopDecoder(nn.Module):
  """A greedy autoregressive decoder that decides when to stop: each step feeds
  the previous token back, appends the argmax token, and adds a halting
  probability; it stops when the halting total reaches 1 (or after 48 steps).
  The scripted while loop becomes an ONNX Loop whose trip count depends on the
  data, with a token tensor that grows by one column per trip."""

  def __init__(self, vocab=16, d=32):
    super().__init__()
    self.max_steps = 48
    self.embed = nn.Embedding(vocab, d)
    self.cell = nn.Linear(2 * d, d)
    self.out = nn.Linear(d, vocab)
    self.halt = nn.Linear(d, 1)
    # A sharp halting unit, so that the number of steps depends on the input
    # (3 to 15 for these weights) rather than averaging out.
    with torch.no_grad():
      self.halt.weight.mul_(6.0)
      self.halt.bias.fill_(-3.5)

  def forward(self, h):
    batch = h.size(0)
    token = torch.zeros(batch, dtype=torch.long, device=h.device)
    tokens = torch.zeros(batch, 0, dtype=torch.long, device=h.device)
    halted = torch.zeros(1, device=h.device)
    step = 0
    while step < self.max_steps and bool(halted.sum() < 1.0):
      h = torch.tanh(self.cell(torch.cat([self.embed(token), h], 1)))
      token = torch.argmax(self.out(h), 1)
      tokens = torch.cat([tokens, token.unsqueeze(1)], 1)
      halted = halted + torch.sigmoid(self.halt(h)).mean()
      step += 1
    return tokens, h

  def margins(self, h):
    """The smallest argmax gap and distance of the halting total from 1 (eager)."""
    batch = h.size(0)
    token = torch.zeros(batch, dtype=torch.long)
    halted, step, least_gap, least_halt = 0.0, 0, float("inf"), float("inf")
    while step < self.max_steps and halted < 1.0:
      h = torch.tanh(self.cell(torch.cat([self.embed(token), h], 1)))
      top2 = torch.topk(self.out(h), 2, dim=1).values
      least_gap = min(least_gap, float((top2[:, 0] - top2[:, 1]).min()))
      token = torch.argmax(self.out(h), 1)
      halted += float(torch.sigmoid(self.halt(h)).mean())
      least_halt = min(least_halt, abs(halted - 1.0))
      step += 1
    return least_gap, least_halt, step


class ListDecoder(LoopDecoder):
  """The same decoder written as scripted PyTorch usually is: each step
  appends its token and hidden state to Python lists, stacked at the end.
  The lists become ONNX sequences carried through the Loop (SequenceEmpty,
  SequenceInsert in the body, ConcatFromSequence after it)."""

  def forward(self, h):
    batch = h.size(0)
    token = torch.zeros(batch, dtype=torch.long)
    tokens: List[torch.Tensor] = []
    states: List[torch.Tensor] = []
    halted = torch.zeros(1)
    step = 0
    while step < self.max_steps and bool(halted.sum() < 1.0):
      h = torch.tanh(self.cell(torch.cat([self.embed(token), h], 1)))
      token = torch.argmax(self.out(h), 1)
      tokens.append(token)
      states.append(h)
      halted = halted + torch.sigmoid(self.halt(h)).mean()
      step += 1
    return torch.stack(tokens, 1), torch.stack(states, 0)


# --- the cases -----------------------------------------------------------------


def normal(rng, *shape, scale=1.0):
  return (scale * rng.standard_normal(shape)).astype(np.float32)


def transformer_cases(rng, model):
  shapes = [("b1_s4", 1, 4), ("b2_s9", 2, 9), ("b3_s16", 3, 16), ("b2_s9_again", 2, 9)]
  return [(name, [normal(rng, b, s, 32)]) for name, b, s in shapes]


def gpt_cases(rng, model):
  shapes = [("b1_s5", 1, 5), ("b2_s12", 2, 12), ("b4_s32", 4, 32), ("b1_s64", 1, 64),
            ("b2_s12_again", 2, 12)]
  return [(name, [rng.integers(0, 64, (b, s)).astype(np.int64)]) for name, b, s in shapes]


def cnn_cases(rng, model):
  shapes = [("b1_16x16", 1, 16, 16), ("b2_24x20", 2, 24, 20), ("b1_33x17", 1, 33, 17),
            ("b2_24x20_again", 2, 24, 20)]
  return [(name, [normal(rng, b, 3, h, w)]) for name, b, h, w in shapes]


def lstm_cases(rng, model):
  shapes = [("b1_s5", 1, 5), ("b3_s12", 3, 12), ("b2_s1", 2, 1), ("b3_s12_again", 3, 12)]
  return [(name, [normal(rng, b, s, 16), normal(rng, 2, b, 32, scale=0.5), normal(rng, 2, b, 32, scale=0.5)])
          for name, b, s in shapes]


def branch_cases(rng, model, wanted, sample, tries=10000):
  """Inputs taking each branch of a gated early exit ({branch: [batch, ...]}),
  none near the gate's threshold: `sample(batch)` draws an input, and the
  model's confidence(x) above 0.5 takes "shallow", else "deep"."""
  cases = []
  with torch.no_grad():
    for branch, batches in wanted.items():
      for batch in batches:
        for _ in range(tries):
          x = sample(batch)
          confidence = float(model.confidence(torch.from_numpy(x)))
          taken = "shallow" if confidence > 0.5 else "deep"
          if taken == branch and abs(confidence - 0.5) > MARGIN:
            cases.append((f"{branch}_b{batch}", [x]))
            break
        else:
          raise RuntimeError(f"{type(model).__name__}: found no input for the {branch} branch")
  return cases


def early_exit_cases(rng, model):
  """Two cases through each branch, at different batch sizes."""
  return branch_cases(rng, model, {"shallow": [2, 5], "deep": [1, 3]},
                      lambda batch: normal(rng, batch, 16, scale=float(rng.uniform(0.2, 3.0))) +
                      np.float32(rng.uniform(-2, 2)))


def loop_decoder_cases(rng, model, batches=(1, 2, 3, 1, 2), width=32):
  """Inputs ([batch, width] each) whose decoding stops on its own after
  different numbers of steps, none near a tie."""
  cases, steps_seen = [], set()
  with torch.no_grad():
    for batch in batches:
      for _ in range(10000):
        h = normal(rng, batch, width, scale=float(rng.uniform(0.3, 3.0)))
        gap, halt, steps = model.margins(torch.from_numpy(h))
        if gap > MARGIN and halt > MARGIN and steps < model.max_steps and steps not in steps_seen:
          steps_seen.add(steps)
          cases.append((f"b{batch}_{steps}steps", [h]))
          break
      else:
        raise RuntimeError("loop_decoder: found no input without a near tie")
  return cases


# How each model is exported. `exporter` is "dynamo" (torch.export, the default
# exporter of torch 2.x) or "torchscript" (dynamo=False), chosen per model by
# what exports cleanly at opset 17 with dynamic dims:
#   - dynamo: nn.TransformerEncoderLayer (the TorchScript exporter bakes
#     batch x heads of nn.MultiheadAttention into a Reshape), the GPT block
#     and the LSTM;
#   - torchscript: the CNN and the early exit (dynamo writes opset 18 and its
#     conversion to 17 fails on their ReduceMean, or leaves ReduceMean's
#     opset-18 attribute behind inside torch.cond's If), and the scripted
#     while loop (-> Loop; dynamo has no ONNX Loop).
# `dims`: the dynamic axes of each input (and, for TorchScript, output) by
# symbol; `ranges`: the symbols' ranges that torch.export checks (dynamo).
MODELS = {
    "transformer_encoder": dict(
        cls=TransformerEncoder, exporter="dynamo", inputs=["x"], outputs=["y"],
        dims={"x": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 512)},
        cases=transformer_cases),
    "gpt_block": dict(
        cls=GptBlock, exporter="dynamo", inputs=["ids"], outputs=["logits"],
        dims={"ids": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 64)},
        cases=gpt_cases),
    "cnn": dict(
        cls=Cnn, exporter="torchscript", inputs=["image"], outputs=["logits"],
        dims={"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}},
        cases=cnn_cases),
    "lstm": dict(
        cls=Lstm, exporter="dynamo", inputs=["x", "h0", "c0"], outputs=["y", "hn", "cn"],
        dims={"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"}, "c0": {1: "batch"}},
        ranges={"batch": (1, 64), "seq": (1, 512)}, cases=lstm_cases),
    "early_exit": dict(
        cls=EarlyExit, exporter="torchscript", script=True, inputs=["x"], outputs=["y", "confidence"],
        dims={"x": {0: "batch"}, "y": {0: "batch"}}, cases=early_exit_cases),
    "loop_decoder": dict(
        cls=LoopDecoder, exporter="torchscript", script=True, inputs=["h0"], outputs=["tokens", "h"],
        dims={"h0": {0: "batch"}}, cases=loop_decoder_cases),
    "list_decoder": dict(
        cls=ListDecoder, exporter="torchscript", script=True, inputs=["h0"], outputs=["tokens", "states"],
        dims={"h0": {0: "batch"}}, cases=loop_decoder_cases),
}


def export(name, out_root, seed):
  spec = MODELS[name]
  input_names, output_names = spec["inputs"], spec["outputs"]
  torch.manual_seed(seed)
  model = spec["cls"]().eval()
  rng = np.random.default_rng(seed)
  cases = spec["cases"](rng, model)
  runnable = torch.jit.script(model) if spec.get("script") else model
  out_dir = os.path.join(out_root, name)
  os.makedirs(out_dir, exist_ok=True)
  for stale in os.listdir(out_dir):
    if stale.endswith(".npy"):
      os.remove(os.path.join(out_dir, stale))
  path = os.path.join(out_dir, "model.onnx")
  # Trace with the largest case: a dim of 1 in the example can be baked into
  # the graph as a constant.
  largest = max(cases, key=lambda c: c[1][0].size)[1]
  example = tuple(torch.from_numpy(a) for a in largest)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if spec["exporter"] == "dynamo":
      symbols = {s: torch.export.Dim(s, min=lo, max=hi) for s, (lo, hi) in spec["ranges"].items()}
      dynamic_shapes = {n: {axis: symbols[s] for axis, s in spec["dims"].get(n, {}).items()}
                        for n in input_names}
      program = torch.onnx.export(model, example, None, dynamo=True, opset_version=OPSET,
                                  input_names=input_names, output_names=output_names,
                                  dynamic_shapes=dynamic_shapes, verbose=False)
      program.save(path, external_data=False)
    else:
      torch.onnx.export(runnable, example, path, dynamo=False, opset_version=OPSET,
                        input_names=input_names, output_names=output_names,
                        dynamic_axes=spec["dims"], do_constant_folding=True)
  onnx_model = onnx.load(path)
  opset = {o.domain: o.version for o in onnx_model.opset_import}.get("", 0)
  if opset != OPSET:
    raise RuntimeError(f"{name}: exported at opset {opset}, wanted {OPSET}")
  onnx.checker.check_model(onnx_model, full_check=True)
  onnx_model.doc_string = (f"grove test model '{name}': scripts/export_test_models.py, seed {seed}, "
                           f"torch {torch.__version__.split('+')[0]} ({spec['exporter']} exporter)")
  onnx.save(onnx_model, path)

  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
  lines = []
  worst = 0.0
  for case, inputs in cases:
    with torch.no_grad():
      reference = runnable(*[torch.from_numpy(a) for a in inputs])
    # nn.LSTM returns (y, (hn, cn)).
    reference = [r.detach().numpy() for r in flatten([reference])]
    got = session.run(None, dict(zip(input_names, inputs)))
    for ref, value, output in zip(reference, got, output_names):
      if ref.shape != value.shape or ref.dtype != value.dtype:
        raise RuntimeError(f"{name}/{case}/{output}: onnxruntime gives {value.dtype}{value.shape}, "
                           f"PyTorch {ref.dtype}{ref.shape}")
      error = float(np.max(np.abs(ref.astype(np.float64) - value) / (1 + np.abs(ref)), initial=0))
      worst = max(worst, error)
      if error > 1e-5:
        raise RuntimeError(f"{name}/{case}/{output}: onnxruntime differs from PyTorch by {error}")
    in_files = [f"{case}_{n}.npy" for n in input_names]
    out_files = [f"{case}_{n}.npy" for n in output_names]
    for f, a in zip(in_files + out_files, list(inputs) + reference):
      np.save(os.path.join(out_dir, f), a)  # not ascontiguousarray: it makes 0-d arrays 1-d
      if np.load(os.path.join(out_dir, f)).shape != a.shape:
        raise RuntimeError(f"{name}/{f}: the saved array has another shape")
    lines.append(f"{case} {','.join(in_files)} {','.join(out_files)}")
  with open(os.path.join(out_dir, "cases.txt"), "w") as f:
    f.write(f"# {name}: PyTorch's outputs, scripts/export_test_models.py (seed {seed}, torch "
            f"{torch.__version__.split('+')[0]}, {spec['exporter']} exporter, opset {OPSET}).\n")
    f.write(f"# name inputs({','.join(input_names)}) outputs({','.join(output_names)})\n")
    f.write("\n".join(lines) + "\n")
  size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
  print(f"{name}: {len(cases)} cases ({', '.join(c for c, _ in cases)}), {size} bytes, "
        f"onnxruntime vs PyTorch {worst:.1e}")


def flatten(values):
  for v in values:
    if isinstance(v, (tuple, list)):
      yield from flatten(v)
    else:
      yield v


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", default=os.path.join(ROOT, "test/models"))
  parser.add_argument("--only", nargs="*", default=list(MODELS))
  parser.add_argument("--seed", type=int, default=20261129)
  args = parser.parse_args()
  torch.set_num_threads(1)
  print(f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
        f"numpy {np.__version__}")
  for name in args.only:
    export(name, args.out, args.seed)


if __name__ == "__main__":
  main()
