#!/usr/bin/env python3
"""Exports models unlike the test models (test/models) the way
scripts/export_test_models.py exports those, for bench/peers/run.sh
--models-dir: a check on models no kernel was tuned on.

    python3 bench/peers/export_variants.py --out DIR [--only NAME ...] [--seed N]
    bench/peers/run.sh --models-dir DIR

Needs torch, onnx, onnxscript, onnxruntime and numpy (a throwaway venv, as
export_test_models.py). Writes DIR/<name>/ as that script writes
test/models/<name>/ (model.onnx, cases.txt, the cases' .npy files, ORT
checked against PyTorch):

  cnn_b           a MobileNet-like CNN: stride-2 stem + Hardswish, depthwise 3x3 +
                  ReLU6, pointwise 1x1, a residual Add, AvgPool, SiLU, global pool
  encoder_b       3 pre-norm nn.TransformerEncoderLayer, d 64, 8 heads, GELU
  gpt_b           a GPT block with SDPA(is_causal=True) and the tanh GELU, d 64
  gru             a 2-layer nn.GRU (16 -> 48) with a Linear head
  lstm_b          a bidirectional 1-layer nn.LSTM (24 -> 64)
  early_exit_cnn  a conv stem whose gate picks a linear head or two more Convs (If)
  greedy_b        the greedy Loop decoder of test/models/loop_decoder at d 64, vocab 50

and larger ones, nearer what people deploy (--only resnet_c bert_c gpt_c lstm_c
encoder_c unet_d mobilenet_e):

  resnet_c        a ResNet-18-like stem and stages (7x7/2 stem, MaxPool 3/2, basic
                  blocks to 128 channels with strided 1x1 shortcuts) at up to 224x224
  bert_c          a BERT-like encoder written out by hand (post-norm, erf GELU, an
                  attention-mask input turned into an additive mask), d 128, 2 layers
  gpt_c           the GPT block at d 128, 8 heads, 256 positions, vocabulary 512
  lstm_c          a 2-layer nn.LSTM (32 -> 128) with a Linear head
  mobilenet_e     MobileNetV3-like inverted residuals: 1x1 expansion, depthwise 3x3,
                  squeeze-and-excitation, Hardswish/Hardsigmoid, residual Adds
  unet_d          a small U-Net: Conv+BN+ReLU stages, MaxPool down, ConvTranspose
                  up, skips concatenated, a Sigmoid head
  encoder_c       2 post-norm nn.TransformerEncoderLayer with ReLU, d 96, 6 heads
                  (the TorchScript exporter bakes its sequence length in: dynamo)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts"))
import export_test_models as E


class CnnB(nn.Module):
  """MobileNet-ish: stride-2 stem, depthwise + pointwise, Hardswish/SiLU/ReLU6,
  a residual add, AvgPool, global pool, Linear."""

  def __init__(self):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.Hardswish())
    self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU6())
    self.pw = nn.Sequential(nn.Conv2d(16, 16, 1), nn.BatchNorm2d(16))
    self.down = nn.AvgPool2d(2)
    self.conv = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.SiLU(),
                              nn.Conv2d(32, 32, 3, padding=1, dilation=1), nn.BatchNorm2d(32), nn.ReLU())
    self.fc = nn.Linear(32, 10)
    for m in self.modules():
      if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)

  def forward(self, image):
    x = self.stem(image)
    x = x + self.pw(self.dw(x))
    x = self.conv(self.down(x))
    return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class EncoderB(nn.Module):
  def __init__(self):
    super().__init__()
    layer = nn.TransformerEncoderLayer(64, 8, 128, dropout=0.0, batch_first=True, activation="gelu",
                                       norm_first=True)
    self.encoder = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)

  def forward(self, x):
    return self.encoder(x)


class GptB(E.GptBlock):
  """The test models' GPT block at d 64 and 128 positions, its attention
  through SDPA(is_causal=True) (no mask buffer) and its MLP's GELU the tanh
  approximation."""

  def __init__(self):
    super().__init__(vocab=100, d=64, heads=4, max_len=128)
    self.mlp[1] = nn.GELU(approximate="tanh")

  def attend(self, q, k, v, t):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Gru(nn.Module):
  def __init__(self):
    super().__init__()
    self.gru = nn.GRU(16, 48, num_layers=2, batch_first=True)
    self.out = nn.Linear(48, 8)

  def forward(self, x, h0):
    y, h = self.gru(x, h0)
    return self.out(y), h


class LstmB(nn.Module):
  def __init__(self):
    super().__init__()
    self.lstm = nn.LSTM(24, 64, num_layers=1, batch_first=True, bidirectional=True)

  def forward(self, x):
    y, _ = self.lstm(x)
    return y


class EarlyExitCnn(nn.Module):
  def __init__(self):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    self.gate = nn.Linear(8, 1)
    self.shallow = nn.Linear(8, 5)
    self.deep = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
    self.deep_fc = nn.Linear(16, 5)

  def confidence(self, x):
    h = self.stem(x)
    return torch.sigmoid(self.gate(h.mean(dim=(2, 3)))).mean()

  def forward(self, x):
    h = self.stem(x)
    pooled = h.mean(dim=(2, 3))
    confidence = torch.sigmoid(self.gate(pooled)).mean()
    if bool(confidence > 0.5):
      y = self.shallow(pooled)
    else:
      y = self.deep_fc(self.deep(h).mean(dim=(2, 3)))
    return y, confidence


class GreedyB(E.LoopDecoder):
  def __init__(self):
    super().__init__(vocab=50, d=64)


class BasicBlock(nn.Module):
  def __init__(self, cin, cout, stride):
    super().__init__()
    self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                              nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
    self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                  if stride != 1 or cin != cout else nn.Identity())

  def forward(self, x):
    return torch.relu(self.body(x) + self.short(x))


class ResnetC(nn.Module):
  def __init__(self):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 32, 7, 2, 3, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.MaxPool2d(3, 2, 1))
    self.stages = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 128, 2))
    self.fc = nn.Linear(128, 100)
    for m in self.modules():
      if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)

  def forward(self, image):
    x = self.stages(self.stem(image))
    return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class BertLayer(nn.Module):
  def __init__(self, d, heads, ff):
    super().__init__()
    self.heads = heads
    self.qkv = nn.ModuleList([nn.Linear(d, d) for _ in range(3)])
    self.out = nn.Linear(d, d)
    self.ln1 = nn.LayerNorm(d, eps=1e-12)
    self.ff1 = nn.Linear(d, ff)
    self.ff2 = nn.Linear(ff, d)
    self.ln2 = nn.LayerNorm(d, eps=1e-12)

  def forward(self, x, mask):
    b, t, d = x.shape
    split = lambda z: z.view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)
    q, k, v = (split(p(x)) for p in self.qkv)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads) + mask
    ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
    x = self.ln1(x + self.out(ctx))
    return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class BertC(nn.Module):
  def __init__(self, vocab=1000, d=128, heads=4, ff=512, layers=2, max_len=256):
    super().__init__()
    self.tok = nn.Embedding(vocab, d)
    self.pos = nn.Embedding(max_len, d)
    self.ln = nn.LayerNorm(d, eps=1e-12)
    self.layers = nn.ModuleList([BertLayer(d, heads, ff) for _ in range(layers)])

  def forward(self, ids, attention_mask):
    positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
    x = self.ln(self.tok(ids) + self.pos(positions))
    mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
    for layer in self.layers:
      x = layer(x, mask)
    return x


class GptC(E.GptBlock):
  def __init__(self):
    super().__init__(vocab=512, d=128, heads=8, max_len=256)


class LstmC(nn.Module):
  def __init__(self):
    super().__init__()
    self.lstm = nn.LSTM(32, 128, num_layers=2, batch_first=True)
    self.head = nn.Linear(128, 16)

  def forward(self, x):
    y, _ = self.lstm(x)
    return self.head(y)


class EncoderC(nn.Module):
  def __init__(self):
    super().__init__()
    layer = nn.TransformerEncoderLayer(96, 6, 384, dropout=0.0, batch_first=True, activation="relu")
    self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

  def forward(self, x):
    return self.encoder(x)


class UnetD(nn.Module):
  """A small U-Net: two 3x3 Conv+BN+ReLU stages down (MaxPool), a bottleneck,
  ConvTranspose 2x2 stride 2 up, the skip concatenated, a 1x1 head and a
  Sigmoid."""

  def __init__(self):
    super().__init__()
    block = lambda cin, cout: nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                                            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())
    self.down1 = block(3, 16)
    self.down2 = block(16, 32)
    self.mid = block(32, 64)
    self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
    self.dec2 = block(64, 32)
    self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
    self.dec1 = block(32, 16)
    self.head = nn.Conv2d(16, 2, 1)
    for m in self.modules():
      if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)

  def forward(self, image):
    d1 = self.down1(image)
    d2 = self.down2(F.max_pool2d(d1, 2))
    m = self.mid(F.max_pool2d(d2, 2))
    u2 = self.dec2(torch.cat([self.up2(m), d2], 1))
    u1 = self.dec1(torch.cat([self.up1(u2), d1], 1))
    return torch.sigmoid(self.head(u1))


class InvertedResidual(nn.Module):
  """MobileNetV3's block: 1x1 expansion + Hardswish, depthwise 3x3, a
  squeeze-and-excitation (global pool, two 1x1 Convs, ReLU, Hardsigmoid, a
  channel-wise Mul), 1x1 projection, the residual Add when the shapes allow."""

  def __init__(self, cin, expand, cout, stride):
    super().__init__()
    self.residual = stride == 1 and cin == cout
    self.expand = nn.Sequential(nn.Conv2d(cin, expand, 1, bias=False), nn.BatchNorm2d(expand), nn.Hardswish())
    self.dw = nn.Sequential(nn.Conv2d(expand, expand, 3, stride, 1, groups=expand, bias=False),
                            nn.BatchNorm2d(expand), nn.Hardswish())
    self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(expand, expand // 4, 1), nn.ReLU(),
                            nn.Conv2d(expand // 4, expand, 1), nn.Hardsigmoid())
    self.project = nn.Sequential(nn.Conv2d(expand, cout, 1, bias=False), nn.BatchNorm2d(cout))

  def forward(self, x):
    h = self.dw(self.expand(x))
    h = self.project(h * self.se(h))
    return x + h if self.residual else h


class MobileNetE(nn.Module):
  def __init__(self):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
    self.blocks = nn.Sequential(InvertedResidual(16, 64, 24, 2), InvertedResidual(24, 72, 24, 1),
                                InvertedResidual(24, 96, 40, 2), InvertedResidual(40, 120, 40, 1))
    self.head = nn.Sequential(nn.Conv2d(40, 128, 1), nn.Hardswish())
    self.fc = nn.Linear(128, 10)
    for m in self.modules():
      if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)

  def forward(self, image):
    x = self.head(self.blocks(self.stem(image)))
    return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def mobilenet_cases(rng, model):
  shapes = [("b1_64x64", 1, 64, 64), ("b1_160x160", 1, 160, 160), ("b4_96x96", 4, 96, 96)]
  return [(name, [E.normal(rng, b, 3, h, w)]) for name, b, h, w in shapes]


def unet_cases(rng, model):
  shapes = [("b1_32x32", 1, 32, 32), ("b1_64x96", 1, 64, 96), ("b2_128x128", 2, 128, 128)]
  return [(name, [E.normal(rng, b, 3, h, w)]) for name, b, h, w in shapes]


def resnet_cases(rng, model):
  shapes = [("b1_64x64", 1, 64, 64), ("b2_96x96", 2, 96, 96), ("b1_160x128", 1, 160, 128), ("b1_224x224", 1, 224, 224)]
  return [(name, [E.normal(rng, b, 3, h, w)]) for name, b, h, w in shapes]


def bert_cases(rng, model):
  cases = []
  for name, b, s in [("b1_s16", 1, 16), ("b2_s64", 2, 64), ("b1_s128", 1, 128), ("b4_s256", 4, 256)]:
    ids = rng.integers(0, 1000, (b, s)).astype(np.int64)
    mask = np.ones((b, s), np.int64)
    for row in range(1, b):
      mask[row, s - s // (row + 2):] = 0  # later rows padded
    cases.append((name, [ids, mask]))
  return cases


def gptc_cases(rng, model):
  shapes = [("b1_s1", 1, 1), ("b1_s7", 1, 7), ("b4_s32", 4, 32), ("b1_s200", 1, 200), ("b1_s256", 1, 256)]
  return [(name, [rng.integers(0, 512, (b, s)).astype(np.int64)]) for name, b, s in shapes]


def lstmc_cases(rng, model):
  shapes = [("b1_s1", 1, 1), ("b1_s50", 1, 50), ("b8_s100", 8, 100)]
  return [(name, [E.normal(rng, b, s, 32)]) for name, b, s in shapes]


def encc_cases(rng, model):
  shapes = [("b1_s10", 1, 10), ("b1_s50", 1, 50), ("b2_s200", 2, 200)]
  return [(name, [E.normal(rng, b, s, 96)]) for name, b, s in shapes]


def cnn_cases(rng, model):
  shapes = [("b1_32x32", 1, 32, 32), ("b2_48x40", 2, 48, 40), ("b4_64x64", 4, 64, 64)]
  return [(name, [E.normal(rng, b, 3, h, w)]) for name, b, h, w in shapes]


def enc_cases(rng, model):
  shapes = [("b1_s8", 1, 8), ("b2_s32", 2, 32), ("b4_s128", 4, 128), ("b1_s256", 1, 256)]
  return [(name, [E.normal(rng, b, s, 64)]) for name, b, s in shapes]


def gpt_cases(rng, model):
  shapes = [("b1_s1", 1, 1), ("b1_s16", 1, 16), ("b2_s64", 2, 64), ("b1_s128", 1, 128)]
  return [(name, [rng.integers(0, 100, (b, s)).astype(np.int64)]) for name, b, s in shapes]


def gru_cases(rng, model):
  shapes = [("b1_s1", 1, 1), ("b1_s20", 1, 20), ("b4_s64", 4, 64)]
  return [(name, [E.normal(rng, b, s, 16), E.normal(rng, 2, b, 48, scale=0.5)]) for name, b, s in shapes]


def lstmb_cases(rng, model):
  shapes = [("b1_s1", 1, 1), ("b1_s20", 1, 20), ("b4_s64", 4, 64)]
  return [(name, [E.normal(rng, b, s, 24)]) for name, b, s in shapes]


def eecnn_cases(rng, model):
  return E.branch_cases(rng, model, {"shallow": [1, 4], "deep": [1, 4]},
                        lambda batch: E.normal(rng, batch, 3, 32, 32, scale=float(rng.uniform(0.2, 3.0))) +
                        np.float32(rng.uniform(-2, 2)), tries=20000)


def greedy_cases(rng, model):
  return E.loop_decoder_cases(rng, model, batches=(1, 4), width=64)


VARIANTS = {
    "cnn_b": dict(cls=CnnB, exporter="torchscript", inputs=["image"], outputs=["logits"],
                  dims={"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}},
                  cases=cnn_cases),
    "encoder_b": dict(cls=EncoderB, exporter="dynamo", inputs=["x"], outputs=["y"],
                      dims={"x": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 512)},
                      cases=enc_cases),
    "gpt_b": dict(cls=GptB, exporter="dynamo", inputs=["ids"], outputs=["logits"],
                  dims={"ids": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 128)},
                  cases=gpt_cases),
    "gru": dict(cls=Gru, exporter="dynamo", inputs=["x", "h0"], outputs=["y", "hn"],
                dims={"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"}},
                ranges={"batch": (1, 64), "seq": (1, 512)}, cases=gru_cases),
    "lstm_b": dict(cls=LstmB, exporter="dynamo", inputs=["x"], outputs=["y"],
                   dims={"x": {0: "batch", 1: "seq"}},
                   ranges={"batch": (1, 64), "seq": (1, 512)}, cases=lstmb_cases),
    "early_exit_cnn": dict(cls=EarlyExitCnn, exporter="torchscript", script=True, inputs=["x"],
                           outputs=["y", "confidence"],
                           dims={"x": {0: "batch", 2: "height", 3: "width"}, "y": {0: "batch"}},
                           cases=eecnn_cases),
    "greedy_b": dict(cls=GreedyB, exporter="torchscript", script=True, inputs=["h0"], outputs=["tokens", "h"],
                     dims={"h0": {0: "batch"}}, cases=greedy_cases),
    "resnet_c": dict(cls=ResnetC, exporter="torchscript", inputs=["image"], outputs=["logits"],
                     dims={"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}},
                     cases=resnet_cases),
    "mobilenet_e": dict(cls=MobileNetE, exporter="torchscript", inputs=["image"], outputs=["logits"],
                        dims={"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}},
                        cases=mobilenet_cases),
    "unet_d": dict(cls=UnetD, exporter="torchscript", inputs=["image"], outputs=["mask"],
                   dims={"image": {0: "batch", 2: "height", 3: "width"}, "mask": {0: "batch", 2: "height", 3: "width"}},
                   cases=unet_cases),
    "bert_c": dict(cls=BertC, exporter="torchscript", inputs=["ids", "attention_mask"], outputs=["hidden"],
                   dims={"ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                         "hidden": {0: "batch", 1: "seq"}}, cases=bert_cases),
    "gpt_c": dict(cls=GptC, exporter="dynamo", inputs=["ids"], outputs=["logits"],
                  dims={"ids": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 256)},
                  cases=gptc_cases),
    "lstm_c": dict(cls=LstmC, exporter="dynamo", inputs=["x"], outputs=["y"],
                   dims={"x": {0: "batch", 1: "seq"}},
                   ranges={"batch": (1, 64), "seq": (1, 512)}, cases=lstmc_cases),
    "encoder_c": dict(cls=EncoderC, exporter="dynamo", inputs=["x"], outputs=["y"],
                      dims={"x": {0: "batch", 1: "seq"}}, ranges={"batch": (1, 64), "seq": (1, 512)},
                      cases=encc_cases),
}
E.MODELS.update(VARIANTS)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", required=True, help="the folder to write DIR/<name>/ into")
  parser.add_argument("--only", nargs="*", default=list(VARIANTS))
  parser.add_argument("--seed", type=int, default=7)
  args = parser.parse_args()
  torch.set_num_threads(1)
  failed = []
  for name in args.only:
    try:
      E.export(name, args.out, args.seed)
    except Exception as e:  # noqa: BLE001 - report and go on with the others
      print(f"{name}: FAILED {type(e).__name__}: {str(e)[:400]}")
      failed.append(name)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
