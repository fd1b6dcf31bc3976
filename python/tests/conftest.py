"""Fixtures: the grove tool and the demo model writer of the CMake build
(GROVE_BIN / MAKE_MODELS as ctest sets them, else <build>/grove and
<build>/examples/grove_make_models), the demo models, the exported PyTorch
models of test/models imported with `grove import`, and `grove run` as the
reference the package's results must equal."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GROVE_BUILD_DIR") or REPO / "build")
EXPORTED = REPO / "test" / "models"


def _tool(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    if not path.is_file():
        pytest.skip(f"{path} is not built (set {env})")
    return path


@pytest.fixture(scope="session")
def grove_bin() -> Path:
    return _tool("GROVE_BIN", BUILD / "grove")


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory) -> Path:
    make_models = _tool("MAKE_MODELS", BUILD / "examples" / "grove_make_models")
    out = tmp_path_factory.mktemp("demo")
    subprocess.run([str(make_models), str(out)], check=True, capture_output=True)
    return out


def read_cases(folder: Path):
    """test/models/<model>/cases.txt: (name, input files, output files) per case."""
    cases = []
    for line in (folder / "cases.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, inputs, outputs = line.split()
            cases.append((name, [folder / f for f in inputs.split(",")], [folder / f for f in outputs.split(",")]))
    return cases


@pytest.fixture(scope="session")
def exported_models(grove_bin, tmp_path_factory):
    """{name: (model.grove path, cases)} for every test/models/<name>/model.onnx."""
    out = tmp_path_factory.mktemp("exported")
    models = {}
    for folder in sorted(p for p in EXPORTED.iterdir() if (p / "model.onnx").is_file()):
        target = out / f"{folder.name}.grove"
        subprocess.run([str(grove_bin), "import", str(folder / "model.onnx"), "-o", str(target)], check=True,
                       capture_output=True)
        models[folder.name] = (target, read_cases(folder))
    return models


def grove_run(grove_bin: Path, model: Path, inputs: dict, outputs: list, workdir: Path) -> dict:
    """`grove run` on the CPU: {output name: array} from the .npy files it writes."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = [str(grove_bin), "run", str(model), "--device", "cpu", "--output-dir", str(workdir / "out")]
    for name, array in inputs.items():
        path = workdir / f"in_{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    subprocess.run(args, check=True, capture_output=True)
    return {name: np.load(workdir / "out" / f"{name}.npy") for name in outputs}
