// PLACEHOLDER: the ONNX importer is being written.
