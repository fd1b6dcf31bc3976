"""grove.Model: declarations equal `grove inspect --json`'s; load errors."""
import json
import os
import subprocess

import pytest

import grove


@pytest.mark.parametrize("name", ["mlp", "transformer", "early_exit", "loop"])
def test_declarations_match_grove_inspect(grove_bin, demo_dir, name):
    path = demo_dir / f"{name}.grove"
    model = grove.Model.load(path)
    inspect = json.loads(subprocess.run([str(grove_bin), "inspect", str(path), "--json"], check=True,
                                        capture_output=True, text=True).stdout)
    for mine, theirs in ((model.inputs, inspect["inputs"]), (model.outputs, inspect["outputs"])):
        assert [(s.name, s.kind, s.dtype, list(s.shape)) for s in mine] == \
               [(t["name"], t["kind"], t["dtype"], t["shape"]) for t in theirs]
    assert [(s.name, s.min, s.max) for s in model.symbols] == \
           [(t["name"], t["min"], t["max"]) for t in inspect["symbols"]]


def test_from_bytes_equals_load(demo_dir):
    path = demo_dir / "transformer.grove"
    a, b = grove.Model.load(path), grove.Model.from_bytes(path.read_bytes())
    assert (a.inputs, a.outputs, a.symbols) == (b.inputs, b.outputs, b.symbols)
    assert a.inputs[0].numpy_dtype == "float32"


def test_load_takes_str_bytes_and_paths(demo_dir):
    path = demo_dir / "transformer.grove"
    want = grove.Model.load(path).inputs
    for given in (str(path), os.fsencode(path), path):
        model = grove.Model.load(given)
        assert type(model) is grove.Model and model.inputs == want
    with pytest.raises(TypeError):
        grove.Model.load(3)


def test_load_runs_a_subclass_init(demo_dir):
    class Mine(grove.Model):
        def __init__(self, handle):
            super().__init__(handle)
            self.made_by_init = True

    model = Mine.load(demo_dir / "transformer.grove")
    assert type(model) is Mine and model.made_by_init and model.inputs == grove.Model.load(
        demo_dir / "transformer.grove").inputs


def test_load_errors_carry_groves_message(tmp_path):
    with pytest.raises(grove.Error) as e:
        grove.Model.load(tmp_path / "absent.grove")
    assert "absent.grove" in e.value.message and e.value.message.startswith("grove_model_load_file: ")
    assert e.value.code_name in ("NOT_FOUND", "INVALID_ARGUMENT")
    bad = tmp_path / "bad.grove"
    bad.write_bytes(b"not a grove model at all, just some bytes" * 4)
    with pytest.raises(grove.Error) as e:
        grove.Model.load(bad)
    assert e.value.code_name == "INVALID_ARGUMENT" and "grove_model_load_file" in str(e.value)
    with pytest.raises(grove.Error) as e:
        grove.Model.from_bytes(b"")
    assert "grove_model_load_buffer" in e.value.message
    with pytest.raises(TypeError):
        grove.Model(None)


def test_installed_package_carries_its_library():
    # Under ctest (python/tests/run_tests.sh) the package is pip-installed and
    # must load the libgrove.so copied into it, not the build folder's.
    if os.environ.get("GROVE_EXPECT_INSTALLED") != "1":
        pytest.skip("not run from the installed package (ctest python.package sets GROVE_EXPECT_INSTALLED=1)")
    assert "site-packages" in grove.library_path and grove.library_path.endswith("grove/libgrove.so")
    assert "site-packages" in grove.__file__
    assert grove.version().count(".") == 2
