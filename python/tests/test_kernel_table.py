"""Session(..., kernel_table=...): the path of a kernel dispatch table written
by `grove tune` reaches the session (C ABI options version 6). Tables are read
by CUDA sessions only: a CPU session runs whatever the path holds; a GPU
session refuses a file that is not a table (skipped without a GPU)."""
import numpy as np
import pytest

import grove


def test_a_cpu_session_takes_the_option_and_does_not_read_it(demo_dir, tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a kernel table")
    session = grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu", kernel_table=str(bad))
    y = session.run({"x": np.ones((2, 16), np.float32)})
    assert y["y"].shape == (2, 4)


def test_kernel_table_must_be_a_path(demo_dir):
    with pytest.raises(TypeError):
        grove.Session(grove.Model.load(demo_dir / "mlp.grove"), device="cpu", kernel_table=3)


def test_a_gpu_session_refuses_a_corrupt_table(demo_dir, tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x10\x00\x00\x00" + b"\x00" * 12)
    model = grove.Model.load(demo_dir / "mlp.grove")
    try:
        grove.Session(model, device="cuda")
    except grove.Error as e:
        pytest.skip(f"no CUDA device: {e}")
    with pytest.raises(grove.Error, match="not a valid kernel table"):
        grove.Session(model, device="cuda", kernel_table=str(bad))
