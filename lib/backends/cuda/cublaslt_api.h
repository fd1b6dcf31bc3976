// cuBLASLt, loaded with dlopen when the first CUDA device opens instead of
// linked (jit/shared_library.h says why); a machine without cuBLAS still
// loads grove, and its CUDA device reports what is missing.
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
// process ($GROVE_CUBLASLT_LIBRARY if set, else through the loader's search
// path, then the path the build found it at) and resolves the entry points.
// The error says which library or symbol is missing; it is remembered, so
// later calls fail the same way.
absl::StatusOr<const CublasLtApi*> LoadCublasLt();

}  // namespace grove::cuda

#endif  // GROVE_LIB_BACKENDS_CUDA_CUBLASLT_API_H_
