"""A Triton Inference Server Python-backend model that runs a grove model.

prepare_repository.sh copies this file into each model of the repository as
<model>/1/model.py, beside the model's <model>/1/model.grove. Each Triton
model instance (instance_group) loads the .grove file and runs it in a grove
Session of its own; instances run in separate stub processes, so several
instances serve requests in parallel.

Dynamic batching: Triton hands execute() the requests it queued together;
they are concatenated along the batch axis, run as one grove run, and the
outputs split back per request. config.pbtxt parameters tell how the grove
model's tensors relate to Triton's [batch, ...] layout:

  grove_model       the .grove file in the version folder (default model.grove)
  device            "cpu" (default), "cuda" or "auto"; a KIND_GPU instance
                    runs on CUDA device model_instance_device_id
  intra_op_threads  CPU threads per run (default 1)
  dlpack_outputs    "on" (default): a request that ran alone gets grove's
                    outputs through DLPack (grove.Tensor ->
                    pb_utils.Tensor.from_dlpack, no NumPy copy; on a
                    KIND_GPU instance they stay on the device); "off": NumPy
  batch_axes        "NAME:AXIS,..." for tensors whose batch dim is not grove's
                    axis 0 (Silero VAD's state is [2, batch, 128]: "state:1")
  scalar_inputs     "NAME,..." grove scalars given per request as shape [1]
                    (Silero's sr): requests that disagree on them are run
                    separately within one execute(). A scalar output is
                    answered as shape [1]

A grove error (a shape the model refuses, ...) becomes that request's error
response carrying grove's message; the other requests still get answers.
"""
import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

import grove


def _parse_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


class TritonPythonModel:

    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        folder = Path(args["model_repository"]) / args["model_version"]
        self.model = grove.Model.load(folder / params.get("grove_model", "model.grove"))
        device = params.get("device", "cpu")
        options = {"intra_op_threads": int(params.get("intra_op_threads", "1"))}
        if args.get("model_instance_kind") == "GPU":
            device = "cuda"
            options["cuda_device"] = int(args["model_instance_device_id"])
            options["outputs_on_device"] = True
        self.session = grove.Session(self.model, device=device, **options)
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.batch_axes = {}
        for item in _parse_list(params.get("batch_axes", "")):
            name, axis = item.split(":")
            self.batch_axes[name.strip()] = int(axis)
        self.scalars = set(_parse_list(params.get("scalar_inputs", "")))
        self.input_names = [spec.name for spec in self.model.inputs]
        declared = {i["name"] for i in config["input"]}
        if declared != set(self.input_names):
            raise pb_utils.TritonModelException(
                f"config.pbtxt inputs {sorted(declared)} are not the grove model's {self.input_names}")
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]
        # DLPack has no strings.
        self.dlpack = params.get("dlpack_outputs", "on") == "on" and all(
            np.dtype(dtype) != np.dtype(object) for _, dtype in self.outputs)
        known = {spec.name for spec in self.model.outputs}
        for name, _ in self.outputs:
            if name not in known:
                raise pb_utils.TritonModelException(f"config.pbtxt output '{name}' is not a grove model output "
                                                    f"({sorted(known)})")

    def execute(self, requests):
        responses = [None] * len(requests)
        groups = {}
        for index, request in enumerate(requests):
            arrays = {}
            for name in self.input_names:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is None:
                    responses[index] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"input '{name}' is missing"))
                    break
                arrays[name] = tensor.as_numpy()
            if responses[index] is not None:
                continue
            if not self.batched:
                self._run(requests, [index], [arrays], responses)
                continue
            # Requests batch together when their scalars agree and their
            # non-batch dims match (Triton's batcher already ensures the
            # latter for non-ragged inputs).
            key = tuple((name, a.shape[1:], a.tobytes() if name in self.scalars else b"")
                        for name, a in arrays.items())
            groups.setdefault(key, ([], []))
            groups[key][0].append(index)
            groups[key][1].append(arrays)
        for indices, members in groups.values():
            self._run(requests, indices, members, responses)
        return responses

    def _run(self, requests, indices, members, responses):
        sizes = [next(iter(m.values())).shape[0] if self.batched and m else 1 for m in members]
        inputs = {}
        for name in self.input_names:
            if not self.batched:
                # A grove scalar travels as [1] (Triton's dims cannot be empty).
                inputs[name] = members[0][name].reshape(()) if name in self.scalars else members[0][name]
            elif name in self.scalars:
                inputs[name] = members[0][name].reshape(-1)[0]
            else:
                joined = np.concatenate([m[name] for m in members], axis=0) if len(members) > 1 else members[0][name]
                inputs[name] = np.moveaxis(joined, 0, self.batch_axes.get(name, 0))
        try:
            results = self.session.run({n: np.asarray(v) for n, v in inputs.items()},
                                       output_format="dlpack" if self.dlpack else "numpy")
        except grove.Error as e:
            for i in indices:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"grove: {e}"))
            return
        outputs = {}
        direct = {}
        for name, dtype in self.outputs:
            value = results[name]
            if isinstance(value, grove.Tensor):
                # One request, grove's layout is Triton's, same dtype: hand
                # grove's memory over as it is.
                if (len(members) == 1 and value.shape and self.batch_axes.get(name, 0) == 0
                        and value.numpy_dtype == np.dtype(dtype)):
                    direct[name] = value
                    continue
                value = value.numpy()
            if self.batched:
                value = np.moveaxis(value, self.batch_axes.get(name, 0), 0)
            elif value.ndim == 0:
                value = value.reshape(1)  # declared as [1]
            outputs[name] = value.astype(dtype, copy=False)
        start = 0
        for i, size in zip(indices, sizes):
            tensors = []
            for name, _ in self.outputs:
                if name in direct:
                    tensors.append(pb_utils.Tensor.from_dlpack(name, direct[name]))
                    continue
                part = outputs[name][start:start + size] if self.batched else outputs[name]
                tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(part)))
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            start += size

    def finalize(self):
        self.session.close()
