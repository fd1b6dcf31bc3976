// cuBLASLt, loaded with dlopen on first use instead of linked.
//
// Linking libcublasLt costs every process that loads grove ~160 ms of
// start-up (half a million relocations in a ~500 MB library), also the ones
// that never touch a GPU: a CPU-only server, every `grove inspect`, every
// test process. Loading it when the first CUDA device opens moves that cost
// to the sessions that use it, and a machine without cuBLAS still loads grove
// (the CUDA device then reports why it cannot open).
#ifndef GROVE_LIB_BACKENDS_CUDA_CUBLASLT_API_H_
#define GROVE_LIB_BACKENDS_CUDA_CUBLASLT_API_H_

#include <cublasLt.h>

#include "absl/status/statusor.h"

namespace grove::cuda {

// The cuBLASLt entry points grove calls, with cuBLASLt's own signatures.
struct CublasLtApi {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
};

// Loads libcublasLt.so.<major of the headers grove was built with> once per
// process (through the loader's search path, then the path the build found
// it at) and resolves the entry points. The error says which library or
// symbol is missing; it is remembered, so later calls fail the same way.
absl::StatusOr<const CublasLtApi*> LoadCublasLt();

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUBLASLT_API_H_
