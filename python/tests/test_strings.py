"""Text tensors: NumPy str/bytes/object arrays in, str arrays out, on the
string model of test/cli/strings_test.sh (its ONNX bytes are read from that
script, so both tests run the same model)."""
import re
import subprocess

import numpy as np
import pytest

import grove
from conftest import REPO, grove_run


@pytest.fixture(scope="module")
def strings_model(grove_bin, tmp_path_factory):
    script = (REPO / "test" / "cli" / "strings_test.sh").read_text()
    escaped = "".join(re.findall(r"^STRINGS_ONNX\+='([^']*)'$", script, re.M))
    onnx = bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-f]{2})", escaped))
    assert len(onnx) == 376, "test/cli/strings_test.sh's STRINGS_ONNX changed"
    out = tmp_path_factory.mktemp("strings")
    (out / "strings.onnx").write_bytes(onnx)
    subprocess.run([str(grove_bin), "import", str(out / "strings.onnx"), "-o", str(out / "strings.grove")],
                   check=True, capture_output=True)
    return out / "strings.grove"


def test_string_inputs_and_outputs(grove_bin, strings_model, tmp_path):
    session = grove.Session(grove.Model.load(strings_model), device="cpu")
    assert [(s.name, s.dtype) for s in session.model.inputs] == [("words", "string"), ("idx", "i64"), ("x", "f32")]
    inputs = {"words": np.array(["a", "Müller", ""]), "idx": np.array([1, 0], np.int64),
              "x": np.array([0.5, -0.25, 1.5], np.float32)}
    got = session.run(inputs)
    assert got["picked"].tolist() == ["Müller", "a"]
    assert got["named"].tolist() == ["Müller", "zero"]
    assert got["shaped"].tolist() == [["a"], ["Müller"], [""]]
    assert got["x_text"].tolist() == ["0.5", "-0.25", "1.5"]
    assert all(v.dtype.kind == "U" for v in got.values())
    want = grove_run(grove_bin, strings_model, inputs, list(got), tmp_path)
    for name in got:
        np.testing.assert_array_equal(got[name], want[name])
    # bytes (UTF-8) and object arrays give the same.
    as_bytes = dict(inputs, words=np.array([w.encode() for w in ["a", "Müller", ""]]))
    as_objects = dict(inputs, words=np.array(["a", b"M\xc3\xbcller", ""], dtype=object))
    for other in (as_bytes, as_objects):
        assert session.run(other)["picked"].tolist() == ["Müller", "a"]
    with pytest.raises(grove.Error, match="given dtype f32"):
        session.run(dict(inputs, words=np.zeros(3, np.float32)))
