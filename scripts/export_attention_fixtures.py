#!/usr/bin/env python3
"""Exports tiny attention variants that the plan pass (lib/runtime/attention_fusion.cc)
must fuse, as PyTorch's two exporters write them, with onnxruntime's outputs (the
ONNX semantics; PyTorch's eager SDPA differs on a row whose keys are all masked).

    python3 scripts/export_attention_fixtures.py [--out test/onnx/attention_models]

Needs torch, onnx, onnxruntime and numpy (a throwaway venv; nothing here is a
build dependency). For each variant it writes OUT/<name>/: model.onnx, the
inputs and outputs of each case as .npy, and cases.txt (NAME INPUTS OUTPUTS per
line, the format of test/models). Embedding 16, 2 heads of 8: a few KiB each.
test/onnx/attention_fusion_test.cc checks that every attention is fused and the
outputs match, on the CPU and the emulated CUDA device.
"""

import argparse
import math
import os
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from torch import nn

H, D = 2, 8
E = H * D


class Proj(nn.Module):
  def __init__(self, kv_heads=H):
    super().__init__()
    self.q, self.k, self.v, self.o = nn.Linear(E, E), nn.Linear(E, kv_heads * D), nn.Linear(E, kv_heads * D), nn.Linear(E, E)
    self.kvh = kv_heads

  def qkv(self, x):
    b, s, _ = x.shape
    split = lambda t, h: t.view(b, s, h, D).transpose(1, 2)
    return split(self.q(x), H), split(self.k(x), self.kvh), split(self.v(x), self.kvh)

  def merge(self, y):
    b, h, s, d = y.shape
    return self.o(y.transpose(1, 2).reshape(b, s, h * d))


class SdpaKeyPadding(Proj):
  """F.scaled_dot_product_attention with a bool key padding mask [B,1,1,S]: the
  export ends the Softmax with Where(IsNaN(p), 0, p)."""

  def forward(self, x, keep):
    q, k, v = self.qkv(x)
    return self.merge(F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


class GqaExpand(Proj):
  """Grouped-query attention, K/V heads repeated as transformers' repeat_kv does."""

  def __init__(self):
    super().__init__(kv_heads=1)

  def forward(self, x):
    q, k, v = self.qkv(x)
    b, h, s, d = k.shape
    k = k[:, :, None].expand(b, h, H, s, d).reshape(b, H, s, d)
    v = v[:, :, None].expand(b, h, H, s, d).reshape(b, H, s, d)
    w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D)
    return self.merge(torch.softmax(w, dim=-1) @ v)


class KvCacheCausal(Proj):
  """A decoder step with past_key/past_value concatenated and a causal mask."""

  def forward(self, x, past_key, past_value):
    q, k, v = self.qkv(x)
    k = torch.cat([past_key, k], dim=2)
    v = torch.cat([past_value, v], dim=2)
    w = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    sq, sk = q.shape[2], k.shape[2]
    keep = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq)
    w = w.masked_fill(~keep, torch.finfo(w.dtype).min)
    return self.merge(torch.softmax(w, dim=-1) @ v), k, v


def normal(rng, *shape):
  return rng.standard_normal(shape).astype(np.float32)


def key_padding_cases(rng):
  cases = []
  for name, s, none_kept in (("s5", 5, False), ("s9_batch1_keeps_no_key", 9, True)):
    keep = np.ones((2, 1, 1, s), bool)
    keep[1, ..., s - 2:] = False
    if none_kept:
      keep[1] = False
    cases.append((name, {"x": normal(rng, 2, s, E), "keep": keep}))
  return cases


def gqa_cases(rng):
  return [(f"s{s}", {"x": normal(rng, 2, s, E)}) for s in (6, 1)]


def kv_cases(rng):
  return [(f"q{sq}_past{p}", {"x": normal(rng, 2, sq, E), "past_key": normal(rng, 2, H, p, D),
                              "past_value": normal(rng, 2, H, p, D)}) for sq, p in ((3, 4), (1, 6))]


# name: (module, cases, dynamo, outputs, dynamic axes)
VARIANTS = {
  "sdpa_key_padding": (SdpaKeyPadding, key_padding_cases, False, ["y"],
                       {"x": {0: "batch", 1: "seq"}, "keep": {0: "batch", 3: "seq"}}),
  "gqa_expand": (GqaExpand, gqa_cases, True, ["y"], {"x": {0: "batch", 1: "seq"}}),
  "kv_cache_causal": (KvCacheCausal, kv_cases, False, ["y", "present_key", "present_value"],
                      {"x": {0: "batch", 1: "seq"}, "past_key": {0: "batch", 2: "past"},
                       "past_value": {0: "batch", 2: "past"}}),
}


def export(name, out_root, seed):
  make, cases_fn, dynamo, outputs, axes = VARIANTS[name]
  torch.manual_seed(seed)
  model = make().eval()
  cases = cases_fn(np.random.default_rng(seed))
  names = list(cases[0][1].keys())
  d = os.path.join(out_root, name)
  os.makedirs(d, exist_ok=True)
  path = os.path.join(d, "model.onnx")
  args = tuple(torch.from_numpy(cases[0][1][n]) for n in names)
  with torch.no_grad():
    torch.onnx.export(model, args, path, input_names=names, output_names=outputs, opset_version=18 if dynamo else 17,
                      dynamic_axes=axes, dynamo=dynamo, **({"external_data": False} if dynamo else {}))
  sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
  lines = [f"# {name}: onnxruntime {ort.__version__}'s outputs, scripts/export_attention_fixtures.py "
           f"(seed {seed}, torch {torch.__version__.split('+')[0]}, {'dynamo' if dynamo else 'TorchScript'} exporter)",
           f"# name inputs({','.join(names)}) outputs({','.join(outputs)})"]
  for case, feed in cases:
    res = sess.run(outputs, feed)
    ins = []
    for n in names:
      ins.append(f"{case}_{n}.npy")
      np.save(os.path.join(d, ins[-1]), feed[n])
    outs = []
    for n, r in zip(outputs, res):
      outs.append(f"{case}_{n}.npy")
      np.save(os.path.join(d, outs[-1]), r)
    lines.append(f"{case} {','.join(ins)} {','.join(outs)}")
  with open(os.path.join(d, "cases.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")


def main():
  warnings.filterwarnings("ignore")
  p = argparse.ArgumentParser()
  p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                               "test", "onnx", "attention_models"))
  a = p.parse_args()
  for name in VARIANTS:
    export(name, a.out, 20261203)
    print("wrote", os.path.join(a.out, name))


if __name__ == "__main__":
  main()
