"""examples/python/run_mlp.py runs and prints what it says."""
import subprocess
import sys

from conftest import REPO


def test_run_mlp_example(demo_dir):
    out = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "run_mlp.py"), str(demo_dir / "mlp.grove")],
                         check=True, capture_output=True, text=True).stdout
    assert "inputs:  x f32['batch', 16]" in out
    assert "batch 16: y[16, 4]" in out
    assert "same output" in out
    assert "outputs through DLPack: grove.Tensor(shape=(16, 4), dtype='f32', device='cpu'), same, no copy" in out
    assert "session: runs 5, plans created 3, plan cache hits 2" in out
    assert "a wrong shape: grove.Error INVALID_ARGUMENT: grove_session_run: input 'x'" in out
