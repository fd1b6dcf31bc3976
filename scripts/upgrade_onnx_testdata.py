#!/usr/bin/env python3
"""Converts the ONNX backend node tests (opset 11 and up) to a newer opset with
onnx.version_converter, keeping their test data, so that grove_conformance can
check the newer forms of the same ops (opset 18 moved Reduce* axes to inputs,
gave Split num_outputs, Pad axes, ...):

    python3 scripts/upgrade_onnx_testdata.py /usr/share/libonnx-testdata/data OUT 21
    build/test/grove_conformance --data OUT --dirs node

Needs a Python onnx newer than the target opset (pip); not a build dependency.
"""
import onnx, sys, os, shutil, glob
from onnx import version_converter
src, dst, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
ok = fail = 0
for sub in ['node']:
  for case in sorted(glob.glob(os.path.join(src, sub, 'test_*'))):
    m = onnx.load(os.path.join(case, 'model.onnx'))
    opset = max([o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')] or [0])
    if opset < 11: continue
    try:
      c = version_converter.convert_version(m, target)
      onnx.checker.check_model(c)
    except Exception as e:
      fail += 1
      continue
    out = os.path.join(dst, sub, os.path.basename(case))
    os.makedirs(out, exist_ok=True)
    onnx.save(c, os.path.join(out, 'model.onnx'))
    for ds in glob.glob(os.path.join(case, 'test_data_set_*')):
      shutil.copytree(ds, os.path.join(out, os.path.basename(ds)), dirs_exist_ok=True)
    ok += 1
print('converted', ok, 'failed', fail)  # failures: the converter has no adapter
