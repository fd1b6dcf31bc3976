#!/usr/bin/env python3
"""Writes the inputs and onnxruntime's reference outputs of Silero VAD.

    python3 scripts/make_silero_testdata.py [--model models/silero_vad/silero_vad.onnx]

Needs numpy and onnxruntime (a throwaway venv; nothing here is a build
dependency). Writes into models/silero_vad/testdata/:

  cases.txt            one line per case: NAME INPUTS OUTPUTS, the files of the
                       model's inputs (input, state, sr) and outputs (output,
                       stateN) in model order, comma separated
  references.txt       each case's `output` as text, for the demo to print
  <case>_*.npy         those files
  signal_16k.npy       a spoken phrase between two stretches of faint noise,
  signal_8k.npy        f32 in [-1, 1], at 16 and 8 kHz
  stream_<sr>_<n>_probs.npy
                       the speech probability of every chunk when the signal
                       is streamed through one stateful session the way the
                       silero-vad package does it: chunks of n new samples,
                       each with the last `context` samples of the previous
                       chunk in front (64 at 16 kHz, 32 at 8 kHz), the state
                       carried from stateN to the next chunk's state

The phrase is espeak-ng's "Hello from grove." (espeak-ng 1.51, Debian 12),
resampled to 16 kHz; signal_16k.npy is made once and reused, so the data does
not change with the local espeak-ng.
"""

import argparse
import os
import subprocess
import tempfile
import wave

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTEXT = {16000: 64, 8000: 32}
# The chunk sizes (new samples per call) the stream references are made for.
STREAM_CHUNKS = {16000: (512,), 8000: (256,)}


def resample(x, src_rate, dst_rate):
  """Band-limited resampling through the FFT (the signal is short)."""
  n_out = int(round(len(x) * dst_rate / src_rate))
  spectrum = np.fft.rfft(x)
  keep = min(len(spectrum), n_out // 2 + 1)
  out = np.fft.irfft(spectrum[:keep], n_out) * (n_out / len(x))
  return out.astype(np.float32)


def make_signal_16k():
  with tempfile.TemporaryDirectory() as tmp:
    wav_path = os.path.join(tmp, "phrase.wav")
    subprocess.run(["espeak-ng", "-s", "150", "-w", wav_path, "Hello from grove."], check=True)
    with wave.open(wav_path) as w:
      rate = w.getframerate()
      pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
  speech = resample(pcm.astype(np.float64) / 32768.0, rate, 16000)
  rng = np.random.default_rng(7)
  quiet = lambda n: (0.002 * rng.standard_normal(n)).astype(np.float32)
  signal = np.concatenate([quiet(4000), 0.8 * speech / np.abs(speech).max(), quiet(4000)])
  return np.clip(signal, -1, 1).astype(np.float32)


class Writer:
  def __init__(self, out_dir, session):
    self.out_dir = out_dir
    self.session = session
    self.lines = []
    self.summary = []

  def case(self, name, x, state, sr):
    inputs = {"input": x.astype(np.float32), "state": state.astype(np.float32),
              "sr": np.array(sr, dtype=np.int64)}
    outputs = self.session.run(None, inputs)
    in_files, out_files = [], []
    for key, value in inputs.items():
      in_files.append(f"{name}_{key}.npy")
      np.save(os.path.join(self.out_dir, in_files[-1]), value)
    for key, value in zip(("output", "stateN"), outputs):
      out_files.append(f"{name}_{key}.npy")
      np.save(os.path.join(self.out_dir, out_files[-1]), value)
    self.lines.append(f"{name} {','.join(in_files)} {','.join(out_files)}")
    probs = ", ".join(f"{p:.4f}" for p in outputs[0].ravel())
    self.summary.append(f"{name}: onnxruntime's output (speech probability per row): {probs}")
    return outputs


def stream(session, signal, sr, chunk):
  """The silero-vad package's OnnxWrapper loop; returns inputs and outputs per call."""
  context = np.zeros((1, CONTEXT[sr]), np.float32)
  state = np.zeros((2, 1, 128), np.float32)
  calls = []
  for start in range(0, len(signal) - chunk + 1, chunk):
    x = np.concatenate([context, signal[None, start:start + chunk]], axis=1)
    prob, state_n = session.run(None, {"input": x, "state": state, "sr": np.array(sr, np.int64)})
    calls.append((x, state, prob, state_n))
    context = x[:, -CONTEXT[sr]:]
    state = state_n
  return calls


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--model", default=os.path.join(ROOT, "models/silero_vad/silero_vad.onnx"))
  parser.add_argument("--out", default=os.path.join(ROOT, "models/silero_vad/testdata"))
  args = parser.parse_args()
  os.makedirs(args.out, exist_ok=True)
  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])

  signal_path = os.path.join(args.out, "signal_16k.npy")
  signal_16k = np.load(signal_path) if os.path.exists(signal_path) else make_signal_16k()
  np.save(signal_path, signal_16k)
  signal_8k = resample(signal_16k.astype(np.float64), 16000, 8000)
  np.save(os.path.join(args.out, "signal_8k.npy"), signal_8k)
  signals = {16000: signal_16k, 8000: signal_8k}

  rng = np.random.default_rng(1234)
  w = Writer(args.out, session)
  zeros = lambda batch: np.zeros((2, batch, 128), np.float32)
  # Independent calls at several shapes and both rates, zero state: slices of
  # the phrase (speech) and of noise, with the package's context size and without.
  speech_at = lambda sr, n, start: signals[sr][None, start:start + n]
  w.case("b1_16k_576", speech_at(16000, 576, 16000), zeros(1), 16000)
  w.case("b1_16k_512", speech_at(16000, 512, 20000), zeros(1), 16000)
  w.case("b2_16k_576", np.concatenate([speech_at(16000, 576, 12000),
                                       0.1 * rng.standard_normal((1, 576))]), zeros(2), 16000)
  w.case("b1_8k_288", speech_at(8000, 288, 8000), zeros(1), 8000)
  w.case("b1_8k_256", speech_at(8000, 256, 10000), zeros(1), 8000)
  w.case("b3_8k_288", np.concatenate([speech_at(8000, 288, 6000), speech_at(8000, 288, 9000),
                                      0.1 * rng.standard_normal((1, 288))]), zeros(3), 8000)
  # A non-zero state, as in the middle of a stream.
  w.case("b1_16k_576_state", speech_at(16000, 576, 18000),
         0.5 * np.tanh(rng.standard_normal((2, 1, 128))), 16000)

  # Streams: the probabilities per chunk for the stream test and the example,
  # and the first calls of the 16 kHz stream as cases (input state = the
  # previous call's stateN).
  for sr, chunks in STREAM_CHUNKS.items():
    for chunk in chunks:
      calls = stream(session, signals[sr], sr, chunk)
      probs = np.array([c[2][0, 0] for c in calls], np.float32)
      np.save(os.path.join(args.out, f"stream_{sr // 1000}k_{chunk}_probs.npy"), probs)
      print(f"stream {sr} Hz, {chunk} samples per chunk: {len(probs)} chunks, "
            f"max prob {probs.max():.3f} at chunk {probs.argmax()}")
  calls = stream(session, signal_16k, 16000, 512)
  for i in (0, 1, 2, 30):
    x, state, _, _ = calls[i]
    w.case(f"stream_16k_{i:02d}", x, state, 16000)

  with open(os.path.join(args.out, "cases.txt"), "w") as f:
    f.write("# Silero VAD 6.2.3 (silero_vad.onnx), references from onnxruntime "
            f"{ort.__version__} (CPU), written by scripts/make_silero_testdata.py.\n")
    f.write("# name inputs(input,state,sr) outputs(output,stateN)\n")
    f.write("\n".join(w.lines) + "\n")
  with open(os.path.join(args.out, "references.txt"), "w") as f:
    f.write("\n".join(w.summary) + "\n")


if __name__ == "__main__":
  main()
