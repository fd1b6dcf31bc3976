# Finds grove's dependencies (Debian packages) and sets GROVE_PUBLIC_DEPS and
# GROVE_PRIVATE_DEPS. Included by the build and by the installed package
# config, so a consumer's find_package(grove) finds the same libraries.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(absl)
find_dependency(FlatBuffers)
# OpenBLAS: its headers only. The library is loaded on the first GEMM of a
# reference kernel (lib/backends/cpu/blas_gemm.h), never linked: a linked one
# starts its threads and maps its buffers before main in every process that
# loads grove (`grove version` included).
if(NOT TARGET grove_openblas)
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    add_library(grove_openblas INTERFACE IMPORTED)
    set_target_properties(grove_openblas PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
      INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
  else()
    message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev (scripts/setup.sh does)")
  endif()
endif()

# oneDNN (Debian's libdnnl-dev) for the CPU backend's heavy ops. Found by hand:
# its dnnl-config.cmake requires the OpenCL headers for a GPU runtime grove does
# not use. Debian builds it on OpenMP (libgomp), whose thread count grove sets
# per call (lib/backends/cpu/onednn.h), so libgomp is linked too.
if(NOT TARGET grove_dnnl)
  find_path(GROVE_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(GROVE_DNNL_LIBRARY NAMES dnnl)
  find_library(GROVE_GOMP_LIBRARY NAMES gomp libgomp.so.1)
  if(NOT GROVE_DNNL_INCLUDE_DIR OR NOT GROVE_DNNL_LIBRARY OR NOT GROVE_GOMP_LIBRARY)
    message(FATAL_ERROR "oneDNN not found: install libdnnl-dev (scripts/install_deps.sh does)")
  endif()
  add_library(grove_dnnl INTERFACE IMPORTED)
  set_target_properties(grove_dnnl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${GROVE_DNNL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${GROVE_DNNL_LIBRARY};${GROVE_GOMP_LIBRARY}")
endif()

# The CUDA toolkit: the runtime and NVRTC are linked, cuBLASLt is loaded on
# first use (never libcuda); no GPU or driver is needed to build, link or load.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_dependency(CUDAToolkit)
# NVRTC's headers (grove_nvrtc): the library is loaded on first use
# (jit/shared_library.h), never linked, so no binary needs libnvrtc (or,
# through CMake's CUDA::nvrtc, the libcuda stub); GROVE_NVRTC_BUILD_PATH is
# where this build found it, tried after the loader's search path. (The
# check: test/no_libcuda_test.sh, ctest build.no_libcuda.)
if(NOT TARGET grove_nvrtc)
  get_target_property(GROVE_NVRTC_BUILD_PATH CUDA::nvrtc IMPORTED_LOCATION)
  if(NOT GROVE_NVRTC_BUILD_PATH)
    get_target_property(GROVE_NVRTC_BUILD_PATH CUDA::nvrtc LOCATION)
  endif()
  add_library(grove_nvrtc INTERFACE IMPORTED)
  set_target_properties(grove_nvrtc PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()

set(GROVE_PUBLIC_DEPS absl::status absl::statusor absl::span absl::strings)
set(GROVE_PRIVATE_DEPS absl::flat_hash_map absl::flat_hash_set absl::strings absl::str_format
    absl::synchronization absl::hash absl::inlined_vector absl::cleanup
    flatbuffers::flatbuffers grove_openblas Threads::Threads CUDA::cudart_static grove_nvrtc ${CMAKE_DL_LIBS})
list(APPEND GROVE_PRIVATE_DEPS grove_dnnl)
