/* A stand-in for libcuda's memory calls over host memory, for
 * test_dlpack_outputs.py on machines without a GPU: grove.Tensor's device
 * path (allocation, device-to-device and device-to-host copies, frees, the
 * context pushed and popped around each call) runs against it and its
 * counters. Only the functions grove/_dlpack.py loads; device 0 only. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int allocations, frees, pushes, pops, depth;

int cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
int cuDeviceGet(int* device, int ordinal) {
  if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *device = ordinal;
  return 0;
}
int cuDevicePrimaryCtxRetain(void** ctx, int device) {
  *ctx = (void*)(uintptr_t)(0x1000 + device);
  return 0;
}
int cuCtxPushCurrent_v2(void* ctx) {
  if (ctx == NULL) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  ++pushes;
  ++depth;
  return 0;
}
int cuCtxPopCurrent_v2(void** ctx) {
  if (depth == 0) return 201;
  ++pops;
  --depth;
  if (ctx) *ctx = (void*)0x1000;
  return 0;
}
int cuCtxSynchronize(void) { return depth > 0 ? 0 : 201; }
int cuMemAlloc_v2(uint64_t* ptr, size_t bytes) {
  void* p;
  if (depth == 0) return 201;
  if (bytes == 0) return 1; /* CUDA_ERROR_INVALID_VALUE, as the driver */
  p = malloc(bytes);
  if (p == NULL) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  memset(p, 0xAB, bytes);
  *ptr = (uint64_t)(uintptr_t)p;
  ++allocations;
  return 0;
}
int cuMemFree_v2(uint64_t ptr) {
  if (depth == 0) return 201;
  free((void*)(uintptr_t)ptr);
  ++frees;
  return 0;
}
int cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t bytes) {
  if (depth == 0) return 201;
  memcpy((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return 0;
}
int cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t bytes) {
  if (depth == 0) return 201;
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return 0;
}
int cuGetErrorString(int error, const char** text) {
  *text = error == 101 ? "invalid device ordinal" : error == 201 ? "invalid device context" : "error";
  return 0;
}
/* allocations, frees, pushes, pops, depth */
void host_cuda_driver_counts(int* out) {
  out[0] = allocations;
  out[1] = frees;
  out[2] = pushes;
  out[3] = pops;
  out[4] = depth;
}
