"""Runs the demo MLP from Python: one session, three batch sizes, NumPy in
and out, then the same input through DLPack (a PyTorch tensor when PyTorch
is installed, else NumPy's own __dlpack__), the output through DLPack
(np.from_dlpack of a grove.Tensor), and what the session did.

    cmake --build build --target grove grove_make_models
    build/examples/grove_make_models /tmp/demo
    pip install ./python
    python examples/python/run_mlp.py /tmp/demo/mlp.grove
"""
import sys

import numpy as np

import grove


class DlpackOf:
    """Exposes only an array's DLPack interface, as another framework's tensor would."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def main(path: str) -> int:
    model = grove.Model.load(path)
    print("inputs: ", ", ".join(f"{s.name} {s.dtype}{list(s.shape)}" for s in model.inputs))
    print("outputs:", ", ".join(f"{s.name} {s.dtype}{list(s.shape)}" for s in model.outputs))
    session = grove.Session(model, device="cpu")
    rng = np.random.default_rng(0)
    for batch in (1, 4, 16):
        x = rng.standard_normal((batch, 16), dtype=np.float32)
        y = session.run({"x": x})["y"]
        print(f"batch {batch:2}: y{list(y.shape)} first row {np.round(y[0], 4).tolist()}")
    try:
        import torch
        tensor, via = torch.from_numpy(x), "a PyTorch tensor"
    except ImportError:
        tensor, via = DlpackOf(x), "NumPy's __dlpack__"
    same = np.array_equal(session.run({"x": tensor})["y"], y)
    print(f"through DLPack ({via}): {'same' if same else 'DIFFERENT'} output")
    # Outputs through DLPack: grove.Tensor objects any consumer reads in place
    # (torch.from_dlpack(t) gives a tensor over the same memory).
    out = session.run({"x": x}, output_format="dlpack")["y"]
    taken = np.from_dlpack(out)
    zero_copy = np.shares_memory(taken, out.numpy())
    same = same and np.array_equal(taken, y) and zero_copy
    print(f"outputs through DLPack: {out}, {'same, no copy' if zero_copy else 'COPIED'}")
    stats = session.stats()
    print(f"session: runs {stats['runs']}, plans created {stats['plans_created']}, "
          f"plan cache hits {stats['plan_cache_hits']}")
    try:
        session.run({"x": np.ones((2, 15), np.float32)})
    except grove.Error as e:
        print(f"a wrong shape: grove.Error {e.code_name}: {e.message}")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} MODEL.grove (the demo MLP: build/examples/grove_make_models DIR)")
    sys.exit(main(sys.argv[1]))
