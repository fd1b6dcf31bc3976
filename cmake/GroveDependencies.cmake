# Finds grove's dependencies (Debian packages) and sets GROVE_PUBLIC_DEPS and
# GROVE_PRIVATE_DEPS. Included by the build and by the installed package
# config, so a consumer's find_package(grove) finds the same libraries.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(absl)
find_dependency(FlatBuffers)
if(NOT TARGET grove_openblas)
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    add_library(grove_openblas INTERFACE IMPORTED)
    set_target_properties(grove_openblas PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
      INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
  else()
    message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev (scripts/setup.sh does)")
  endif()
endif()

# The CUDA toolkit: the runtime, NVRTC and cuBLASLt are linked (never
# libcuda); no GPU or driver is needed to build, link or load.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_dependency(CUDAToolkit)

set(GROVE_PUBLIC_DEPS absl::status absl::statusor absl::span absl::strings)
set(GROVE_PRIVATE_DEPS absl::flat_hash_map absl::flat_hash_set absl::strings absl::str_format
    absl::synchronization absl::hash absl::inlined_vector absl::cleanup
    flatbuffers::flatbuffers grove_openblas Threads::Threads CUDA::cudart_static CUDA::nvrtc CUDA::cublasLt)
