#!/usr/bin/env python3
"""Lays out the "light" real-architecture models that the Python onnx package
ships (AlexNet, DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet,
SqueezeNet, VGG-19, ZFNet-512; opset 9, constant weights) as backend test
cases, with the deterministic input ONNX's own runner makes for them and the
reference output shipped beside each model:

    python3 scripts/onnx_light_models.py OUT
    build/test/grove_conformance --data OUT --dirs node

Needs the Python onnx package (pip); not a build dependency.
"""
import glob
import os
import shutil
import sys

import onnx
from onnx.backend.test.runner import Runner

out = os.path.join(sys.argv[1], 'node')
src = os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/light')
for path in sorted(glob.glob(os.path.join(src, '*.onnx'))):
  name = os.path.basename(path)[:-len('.onnx')]
  data = os.path.join(out, 'test_' + name, 'test_data_set_0')
  os.makedirs(data, exist_ok=True)
  shutil.copy(path, os.path.join(out, 'test_' + name, 'model.onnx'))
  model = onnx.load(path)
  weights = {i.name for i in model.graph.initializer}
  inputs = [x for x in model.graph.input if x.name not in weights]
  for i, x in enumerate(inputs):
    value = Runner.generate_dummy_data(x, seed=0, name=name, random=False)
    with open(os.path.join(data, f'input_{i}.pb'), 'wb') as f:
      f.write(onnx.numpy_helper.from_array(value).SerializeToString())
  shutil.copy(path[:-len('.onnx')] + '_output_0.pb', os.path.join(data, 'output_0.pb'))
  print(name)
