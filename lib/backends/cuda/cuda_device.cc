// The real CUDA device: the CUDA runtime (linked statically; it loads the
// driver itself, so a machine without one still loads grove), kernels from
// the JIT kernel cache loaded with the runtime's library API
// (cudaLibraryLoadData / cudaLibraryGetKernel, never libcuda directly), and
// GEMMs through cuBLASLt (loaded when the first device opens:
// cublaslt_api.h).
#include <cuda.h>  // the driver's types only: its calls are looked up through the runtime
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jit/dispatch_table.h"
#include "jit/kernel_cache.h"
#include "jit/kernels/graph_cond_params.h"
#include "lib/backends/cuda/cublaslt_api.h"
#include "lib/backends/cuda/device.h"

namespace grove::cuda {
namespace {

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status LtError(cublasStatus_t st, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": cuBLASLt status ", static_cast<int>(st)));
}

#define GROVE_CUDA_RETURN(expr, what)                  \
  do {                                                 \
    cudaError_t grove_err_ = (expr);                   \
    if (grove_err_ != cudaSuccess) {                   \
      (void)cudaGetLastError();                        \
      return CudaError(grove_err_, what);              \
    }                                                  \
  } while (0)
#define GROVE_LT_RETURN(expr, what)                        \
  do {                                                     \
    cublasStatus_t grove_st_ = (expr);                     \
    if (grove_st_ != CUBLAS_STATUS_SUCCESS) return LtError(grove_st_, what); \
  } while (0)

// Errors of cudaLibraryLoadData that mean "this code is not for this driver
// or device": the cached cubin is stale and is rebuilt.
bool IsStaleCodeError(cudaError_t err) {
  return err == cudaErrorInvalidKernelImage || err == cudaErrorNoKernelImageForDevice ||
         err == cudaErrorInvalidPtx || err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidSource ||
         err == cudaErrorSharedObjectInitFailed;
}

struct LoadedModule {
  cudaLibrary_t library = nullptr;
  absl::flat_hash_map<std::string, cudaKernel_t> kernels;
};

struct GemmKey {
  DType dtype, c_dtype;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
  int epilogue;
  bool bias, beta;
  // Alignment (bytes, a power of two up to 256) of the A, B, C pointers:
  // cuBLASLt's heuristic assumes 256 unless told, and op kernels hand in
  // slices (group columns, gate columns) that are less aligned.
  uint32_t align_a, align_b, align_c;
  int math;
  int algorithm;  // GemmDesc::algorithm
  bool operator==(const GemmKey& o) const {
    return std::tie(dtype, c_dtype, ta, tb, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, epilogue, bias, beta, align_a, align_b,
                    align_c, math, algorithm) ==
           std::tie(o.dtype, o.c_dtype, o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.sa, o.sb, o.sc, o.batch, o.epilogue,
                    o.bias, o.beta, o.align_a, o.align_b, o.align_c, o.math, o.algorithm);
  }
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& g) {
    return H::combine(std::move(h), g.dtype, g.c_dtype, g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc,
                      g.batch, g.epilogue, g.bias, g.beta, g.align_a, g.align_b, g.align_c, g.math, g.algorithm);
  }
};

// One matmul's cuBLASLt descriptors and the algorithm its heuristic chose,
// made once per GEMM shape and reused.
struct GemmPlan {
  explicit GemmPlan(const CublasLtApi& lt) : lt(lt) {}
  ~GemmPlan() {
    if (a) lt.MatrixLayoutDestroy(a);
    if (b) lt.MatrixLayoutDestroy(b);
    if (c) lt.MatrixLayoutDestroy(c);
    if (op) lt.MatmulDescDestroy(op);
  }
  const CublasLtApi& lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// The driver's virtual memory management calls (CUDA 10.2+), found through
// the runtime (cudaGetDriverEntryPointByVersion), so libcuda is never
// linked; null members where the driver lacks them.
struct VmmApi {
  CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;

  bool ok() const {
    return address_reserve && address_free && create && release && map && unmap && set_access && granularity;
  }
  static const VmmApi& Get() {
    static const VmmApi api = [] {
      VmmApi a;
      auto find = [](const char* name, auto* fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) == cudaSuccess &&
            found == cudaDriverEntryPointSuccess) {
          *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
        } else {
          (void)cudaGetLastError();
        }
      };
      find("cuMemAddressReserve", &a.address_reserve);
      find("cuMemAddressFree", &a.address_free);
      find("cuMemCreate", &a.create);
      find("cuMemRelease", &a.release);
      find("cuMemMap", &a.map);
      find("cuMemUnmap", &a.unmap);
      find("cuMemSetAccess", &a.set_access);
      find("cuMemGetAllocationGranularity", &a.granularity);
      return a;
    }();
    return api;
  }
};

absl::Status DriverError(CUresult r, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": CUDA driver error ", static_cast<int>(r));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

// Device memory mapped, a granule at a time, into addresses reserved once.
class CudaRange final : public AddressRange {
 public:
  CudaRange(const VmmApi& api, int ordinal, CUdeviceptr base, uint64_t size, uint64_t granularity,
            std::function<void(int64_t)> on_bytes)
      : api_(api), ordinal_(ordinal), granularity_(granularity), on_bytes_(std::move(on_bytes)) {
    base_ = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base));
    reserved_ = size;
  }
  ~CudaRange() override {
    cudaSetDevice(ordinal_);
    cudaDeviceSynchronize();  // no replay may still use the memory
    const CUdeviceptr base = reinterpret_cast<uintptr_t>(base_);
    if (mapped_ > 0) api_.unmap(base, mapped_);
    for (CUmemGenericAllocationHandle h : handles_) api_.release(h);
    api_.address_free(base, reserved_);
    if (on_bytes_ && mapped_ > 0) on_bytes_(-static_cast<int64_t>(mapped_));
  }
  absl::Status Grow(uint64_t bytes) override {
    if (bytes <= mapped_) return absl::OkStatus();
    const uint64_t add = (bytes - mapped_ + granularity_ - 1) / granularity_ * granularity_;
    if (mapped_ + add > reserved_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", bytes, " bytes in an address range of ", reserved_));
    }
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    CUmemGenericAllocationHandle h{};
    if (CUresult r = api_.create(&h, add, &prop, 0); r != CUDA_SUCCESS) return DriverError(r, "cuMemCreate");
    const CUdeviceptr at = reinterpret_cast<uintptr_t>(base_) + mapped_;
    if (CUresult r = api_.map(at, add, 0, h, 0); r != CUDA_SUCCESS) {
      api_.release(h);
      return DriverError(r, "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = api_.set_access(at, add, &access, 1); r != CUDA_SUCCESS) {
      api_.unmap(at, add);
      api_.release(h);
      return DriverError(r, "cuMemSetAccess");
    }
    handles_.push_back(h);
    mapped_ += add;
    if (on_bytes_) on_bytes_(static_cast<int64_t>(add));
    return absl::OkStatus();
  }

 private:
  const VmmApi& api_;
  const int ordinal_;
  const uint64_t granularity_;
  std::function<void(int64_t)> on_bytes_;
  std::vector<CUmemGenericAllocationHandle> handles_;
};

// An executable CUDA graph and the graph it was made from, destroyed on the
// device that made them.
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(int ordinal, cudaGraph_t graph, cudaGraphExec_t exec, int64_t nodes)
      : ordinal_(ordinal), graph_(graph), exec_(exec), nodes_(nodes) {}
  ~CudaGraph() override {
    cudaSetDevice(ordinal_);
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  cudaGraphExec_t exec() const { return exec_; }
  cudaGraph_t graph() const { return graph_; }
  int64_t num_nodes() const override { return nodes_; }
  // The driver keeps the nodes and their parameters; an estimate of what
  // that costs per node (a kernel node's parameters and launch record).
  int64_t bytes() const override { return nodes_ * 256; }

 private:
  const int ordinal_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  const int64_t nodes_;
};

struct CudaEvent final : DeviceEvent {
  CudaEvent(int ordinal, cudaEvent_t e) : ordinal(ordinal), event(e) {}
  ~CudaEvent() override {
    cudaSetDevice(ordinal);
    cudaEventDestroy(event);
  }
  const int ordinal;
  cudaEvent_t event;
};

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal) {
    auto d = std::unique_ptr<CudaDevice>(new CudaDevice(ordinal));
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal), absl::StrCat("cudaSetDevice(", ordinal, ")"));
    cudaDeviceProp prop{};
    GROVE_CUDA_RETURN(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
    d->arch_ = prop.major * 10 + prop.minor;
    d->sm_count_ = prop.multiProcessorCount;
    d->name_ = absl::StrFormat("%s (sm_%d, %.0f GiB)", prop.name, d->arch_,
                               static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
    absl::StatusOr<const CublasLtApi*> lt = LoadCublasLt();
    if (!lt.ok()) return lt.status();
    d->lt_api_ = *lt;
    GROVE_LT_RETURN(d->lt_api_->Create(&d->lt_), "cublasLtCreate");
    return d;
  }

  std::string Describe() const override { return name_; }
  bool emulated() const override { return false; }
  int arch() const override { return arch_; }
  int sm_count() const override { return sm_count_; }
  int driver_version() const override {
    int v = 0;
    return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
  }
  // Each run between two CUDA events on the stream.
  absl::StatusOr<std::vector<double>> TimeRuns(Stream stream, const std::function<absl::Status()>& work, int warmup,
                                               int repeats) override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaEvent_t start = nullptr, stop = nullptr;
    GROVE_CUDA_RETURN(cudaEventCreate(&start), "cudaEventCreate");
    if (cudaError_t err = cudaEventCreate(&stop); err != cudaSuccess) {
      cudaEventDestroy(start);
      GROVE_CUDA_RETURN(err, "cudaEventCreate");
    }
    auto destroy = [&] {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    };
    std::vector<double> times;
    auto s = static_cast<cudaStream_t>(stream);
    for (int i = 0; i < warmup + repeats; ++i) {
      cudaError_t err = cudaEventRecord(start, s);
      absl::Status w = err == cudaSuccess ? work() : absl::OkStatus();
      if (err == cudaSuccess && w.ok()) err = cudaEventRecord(stop, s);
      if (err == cudaSuccess && w.ok()) err = cudaEventSynchronize(stop);
      float ms = 0;
      if (err == cudaSuccess && w.ok()) err = cudaEventElapsedTime(&ms, start, stop);
      if (!w.ok()) {
        destroy();
        return w;
      }
      if (err != cudaSuccess) {
        destroy();
        GROVE_CUDA_RETURN(err, "timing with CUDA events");
      }
      if (i >= warmup) times.push_back(static_cast<double>(ms) * 1000.0);
    }
    destroy();
    return times;
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    counters_.CountAllocation();
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // allocation failure is not sticky: the device stays usable
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes on ", name_, ": ",
                                                       cudaGetErrorString(err)));
    }
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    stats_.bytes_allocated += static_cast<int64_t>(bytes);
    stats_.peak_bytes_allocated = std::max(stats_.peak_bytes_allocated, stats_.bytes_allocated);
    return p;
  }

  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    counters_.CountFree();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(ptr);
      if (it == sizes_.end()) return;
      stats_.bytes_allocated -= static_cast<int64_t>(it->second);
      sizes_.erase(it);
    }
    cudaSetDevice(ordinal_);
    cudaFree(ptr);
  }

  absl::StatusOr<std::unique_ptr<AddressRange>> ReserveRange(uint64_t max_bytes) override {
    const VmmApi& api = VmmApi::Get();
    if (!api.ok()) return absl::UnimplementedError(absl::StrCat(name_, ": the driver has no virtual memory calls"));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    size_t granularity = 0;
    if (CUresult r = api.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        r != CUDA_SUCCESS || granularity == 0) {
      return DriverError(r, "cuMemGetAllocationGranularity");
    }
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    if (max_bytes == 0) {
      size_t free_bytes = 0, total_bytes = 0;
      GROVE_CUDA_RETURN(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      max_bytes = total_bytes;
    }
    const uint64_t size = (std::max<uint64_t>(max_bytes, 1) + granularity - 1) / granularity * granularity;
    CUdeviceptr base = 0;
    if (CUresult r = api.address_reserve(&base, size, 0, 0, 0); r != CUDA_SUCCESS) {
      return DriverError(r, absl::StrCat("cuMemAddressReserve of ", size, " bytes"));
    }
    return std::unique_ptr<AddressRange>(new CudaRange(api, ordinal_, base, size, granularity, [this](int64_t delta) {
      if (delta > 0) counters_.CountAllocation();
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_allocated += delta;
      stats_.peak_bytes_allocated = std::max(stats_.peak_bytes_allocated, stats_.bytes_allocated);
    }));
  }

  bool IsDevicePointer(const void* ptr) const override {
    if (ptr == nullptr) return false;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  }

  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, Stream stream) override {
    if (bytes == 0) return absl::OkStatus();
    // Two pointer-attribute queries (host calls, no device work) tell the
    // direction for the counters; cudaMemcpyDefault finds it again itself.
    counters_.CountCopy(IsDevicePointer(dst), IsDevicePointer(src), bytes);
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    GROVE_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                      "cudaMemcpyAsync");
    return absl::OkStatus();
  }

  absl::Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream) override {
    if (bytes == 0) return absl::OkStatus();
    GROVE_CUDA_RETURN(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
    return absl::OkStatus();
  }

  absl::Status Launch(const jit::ModuleSpec& module, absl::string_view kernel, const LaunchDims& dims,
                      const void* params, size_t, Stream stream) override {
    absl::StatusOr<cudaKernel_t> k = GetKernel(module, kernel);
    if (!k.ok()) return k.status();
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* args[] = {const_cast<void*>(params)};
    GROVE_CUDA_RETURN(cudaLaunchKernel(reinterpret_cast<const void*>(*k), dim3(dims.grid[0], dims.grid[1], dims.grid[2]),
                                       dim3(dims.block[0], dims.block[1], dims.block[2]), args, 0,
                                       static_cast<cudaStream_t>(stream)),
                      absl::StrCat("launch of ", jit::EntryName(kernel, module)));
    counters_.CountLaunch();
    return absl::OkStatus();
  }

  absl::Status Gemm(const GemmDesc& g, Stream stream) override;

  // Graphs: stream capture, then an executable graph instantiated once.
  // Relaxed mode: a segment's first run is its capture, so a module loaded
  // or a cuBLASLt workspace allocated on first use happens inside it (not
  // recorded: host-side work); other threads' streams are not affected.
  bool captures_graphs() const override { return true; }
  absl::Status BeginCapture(Stream stream) override {
    if (stream == nullptr) {
      return absl::FailedPreconditionError("cannot capture a graph on the legacy default stream");
    }
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    GROVE_CUDA_RETURN(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed),
                      "cudaStreamBeginCapture");
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture(Stream stream) override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
    if (err != cudaSuccess || graph == nullptr) {
      (void)cudaGetLastError();
      if (graph != nullptr) cudaGraphDestroy(graph);
      return absl::FailedPreconditionError(absl::StrCat("cudaStreamEndCapture: ", cudaGetErrorName(err), " (",
                                                        cudaGetErrorString(err), ")"));
    }
    size_t nodes = 0;
    (void)cudaGraphGetNodes(graph, nullptr, &nodes);
    cudaGraphExec_t exec = nullptr;
    err = cudaGraphInstantiate(&exec, graph, 0);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      cudaGraphDestroy(graph);
      return absl::InternalError(absl::StrCat("cudaGraphInstantiate: ", cudaGetErrorName(err), " (",
                                              cudaGetErrorString(err), ")"));
    }
    return std::unique_ptr<DeviceGraph>(new CudaGraph(ordinal_, graph, exec, static_cast<int64_t>(nodes)));
  }
  absl::Status LaunchGraph(const DeviceGraph& graph, Stream stream) override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    GROVE_CUDA_RETURN(cudaGraphLaunch(static_cast<const CudaGraph&>(graph).exec(), static_cast<cudaStream_t>(stream)),
                      "cudaGraphLaunch");
    counters_.CountGraphLaunch();
    return absl::OkStatus();
  }

  // Conditional nodes: IF and WHILE from driver 12.4, an IF with an ELSE
  // body from 12.8 (before, the else body is a second IF node whose handle
  // the same kernel sets to the negated flag).
  int conditional_level() const override {
    const int v = driver_version();
    return v >= 12080 ? 2 : v >= 12040 ? 1 : 0;
  }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> ComposeGraph(std::vector<GraphPiece> pieces, Stream stream) override {
    const int level = conditional_level();
    if (level == 0) return Device::ComposeGraph(std::move(pieces), stream);
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaGraph_t g = nullptr;
    GROVE_CUDA_RETURN(cudaGraphCreate(&g, 0), "cudaGraphCreate");
    struct Owned {
      cudaGraph_t g;
      ~Owned() {
        if (g != nullptr) cudaGraphDestroy(g);
      }
    } owned{g};
    // Appends `child` (a clone of its graph) after *tail in `graph`.
    auto add_child = [](cudaGraph_t graph, cudaGraphNode_t* tail, const DeviceGraph& child) -> absl::Status {
      const auto* cg = dynamic_cast<const CudaGraph*>(&child);
      if (cg == nullptr) return absl::InvalidArgumentError("ComposeGraph: a graph of another device");
      cudaGraphNode_t n = nullptr;
      GROVE_CUDA_RETURN(cudaGraphAddChildGraphNode(&n, graph, *tail != nullptr ? tail : nullptr,
                                                   *tail != nullptr ? 1 : 0, cg->graph()),
                        "cudaGraphAddChildGraphNode");
      *tail = n;
      return absl::OkStatus();
    };
    cudaGraphNode_t last = nullptr;
    for (GraphPiece& piece : pieces) {
      if (piece.kind == PieceKind::kGraph) {
        if (piece.graph == nullptr) return absl::InvalidArgumentError("ComposeGraph: a graph piece without a graph");
        if (absl::Status s = add_child(g, &last, *piece.graph); !s.ok()) return s;
        continue;
      }
      const bool is_if = piece.kind == PieceKind::kIf;
      if (piece.bodies.empty() || piece.bodies.size() > (is_if ? 2u : 1u)) {
        return absl::InvalidArgumentError(absl::StrCat("ComposeGraph: ", piece.bodies.size(), " bodies for a ",
                                                       is_if ? "IF" : "WHILE", " node"));
      }
      const bool else_node = is_if && piece.bodies.size() == 2 && level < 2;
      cudaGraphConditionalHandle handle = 0, negated = 0;
      GROVE_CUDA_RETURN(cudaGraphConditionalHandleCreate(&handle, g, 0, 0), "cudaGraphConditionalHandleCreate");
      if (else_node) {
        GROVE_CUDA_RETURN(cudaGraphConditionalHandleCreate(&negated, g, 0, 0), "cudaGraphConditionalHandleCreate");
      }
      // The kernel that sets the handles from the flag, captured as a graph.
      grove_k::SetConditionalParams params{};
      params.handle = handle;
      params.negated = negated;
      params.flag = static_cast<const grove_k::u8*>(piece.flag);
      if (absl::Status s = BeginCapture(stream); !s.ok()) return s;
      absl::Status launched = Launch(jit::ModuleSpec{"graph_cond", {DType::kU8}}, "set_conditional",
                                     LaunchDims{{1, 1, 1}, {1, 1, 1}}, &params, sizeof(params), stream);
      absl::StatusOr<std::unique_ptr<DeviceGraph>> set = EndCapture(stream);
      if (!launched.ok()) return launched;
      if (!set.ok()) return set.status();
      if (absl::Status s = add_child(g, &last, **set); !s.ok()) return s;
      // A conditional node running bodies[first, first + size).
      auto add_node = [&](cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type, size_t first,
                          unsigned size) -> absl::Status {
        cudaGraphNodeParams np{};
        np.type = cudaGraphNodeTypeConditional;
        np.conditional.handle = h;
        np.conditional.type = type;
        np.conditional.size = size;
        cudaGraphNode_t n = nullptr;
#if CUDART_VERSION >= 13000
        GROVE_CUDA_RETURN(cudaGraphAddNode(&n, g, last != nullptr ? &last : nullptr, nullptr, last != nullptr ? 1 : 0,
                                           &np),
                          "cudaGraphAddNode (conditional)");
#else
        GROVE_CUDA_RETURN(cudaGraphAddNode(&n, g, last != nullptr ? &last : nullptr, last != nullptr ? 1 : 0, &np),
                          "cudaGraphAddNode (conditional)");
#endif
        for (unsigned i = 0; i < size; ++i) {
          cudaGraphNode_t tail = nullptr;
          if (absl::Status s = add_child(np.conditional.phGraph_out[i], &tail, *piece.bodies[first + i]); !s.ok()) {
            return s;
          }
          // A WHILE body ends by setting the handle for the next trip.
          if (type == cudaGraphCondTypeWhile) {
            if (absl::Status s = add_child(np.conditional.phGraph_out[i], &tail, **set); !s.ok()) return s;
          }
        }
        last = n;
        return absl::OkStatus();
      };
      absl::Status added;
      if (!is_if) {
        added = add_node(handle, cudaGraphCondTypeWhile, 0, 1);
      } else if (!else_node) {
        added = add_node(handle, cudaGraphCondTypeIf, 0, static_cast<unsigned>(piece.bodies.size()));
      } else {
        added = add_node(handle, cudaGraphCondTypeIf, 0, 1);
        if (added.ok()) added = add_node(negated, cudaGraphCondTypeIf, 1, 1);
      }
      if (!added.ok()) return added;
    }
    size_t nodes = 0;
    (void)cudaGraphGetNodes(g, nullptr, &nodes);
    cudaGraphExec_t exec = nullptr;
    cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::InternalError(absl::StrCat("cudaGraphInstantiate (conditional nodes): ", cudaGetErrorName(err),
                                              " (", cudaGetErrorString(err), ")"));
    }
    owned.g = nullptr;
    return std::unique_ptr<DeviceGraph>(new CudaGraph(ordinal_, g, exec, static_cast<int64_t>(nodes)));
  }

  absl::StatusOr<Stream> CreateStream() override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaStream_t s = nullptr;
    GROVE_CUDA_RETURN(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return static_cast<Stream>(s);
  }
  void DestroyStream(Stream stream) override {
    if (stream == nullptr) return;
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = workspaces_.find(stream);
      if (it != workspaces_.end()) {
        cudaFree(it->second);
        workspaces_.erase(it);
      }
    }
    cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
  absl::Status Synchronize(Stream stream) override {
    counters_.CountSynchronization();
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    GROVE_CUDA_RETURN(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
    return absl::OkStatus();
  }
  // CUDA events with timing (cudaEventDefault), on this device.
  absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent() override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaEvent_t e = nullptr;
    GROVE_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreateWithFlags");
    return std::unique_ptr<DeviceEvent>(new CudaEvent(ordinal_, e));
  }
  absl::Status RecordEvent(DeviceEvent& event, Stream stream) override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    GROVE_CUDA_RETURN(cudaEventRecord(static_cast<CudaEvent&>(event).event, static_cast<cudaStream_t>(stream)),
                      "cudaEventRecord");
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedMicros(const DeviceEvent& start, const DeviceEvent& end) override {
    GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
    float ms = 0;
    cudaError_t err = cudaEventElapsedTime(&ms, static_cast<const CudaEvent&>(start).event,
                                           static_cast<const CudaEvent&>(end).event);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return absl::FailedPreconditionError("ElapsedMicros: the stream has not passed the event yet");
    }
    GROVE_CUDA_RETURN(err, "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1000.0;
  }
  DeviceStats stats() const override {
    DeviceStats s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = stats_;
    }
    counters_.Fill(&s);
    return s;
  }

 private:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}

  // The kernel handle of an entry point, loading (and if need be compiling)
  // its module on first use. A cubin the driver refuses is stale: rebuilt once.
  absl::StatusOr<cudaKernel_t> GetKernel(const jit::ModuleSpec& module, absl::string_view kernel) {
    const std::string entry = jit::EntryName(kernel, module);
    std::lock_guard<std::mutex> lock(load_mu_);
    auto it = modules_.find(module);
    if (it == modules_.end()) {
      absl::StatusOr<std::shared_ptr<const jit::CachedModule>> code = jit::KernelCache::Global().Get(module, arch_);
      if (!code.ok()) return code.status();
      GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
      LoadedModule loaded;
      cudaError_t err = cudaLibraryLoadData(&loaded.library, (*code)->cubin.data(), nullptr, nullptr, 0, nullptr,
                                            nullptr, 0);
      if (err != cudaSuccess && IsStaleCodeError(err)) {
        (void)cudaGetLastError();
        code = jit::KernelCache::Global().Rebuild(module, arch_);
        if (!code.ok()) return code.status();
        {
          std::lock_guard<std::mutex> stats_lock(mu_);
          ++stats_.modules_rebuilt;
        }
        err = cudaLibraryLoadData(&loaded.library, (*code)->cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      }
      GROVE_CUDA_RETURN(err, absl::StrCat("loading kernel module ", module.file, jit::Suffix(module)));
      it = modules_.emplace(module, std::move(loaded)).first;
      std::lock_guard<std::mutex> stats_lock(mu_);
      ++stats_.modules_loaded;
    }
    auto k = it->second.kernels.find(entry);
    if (k != it->second.kernels.end()) return k->second;
    cudaKernel_t handle = nullptr;
    GROVE_CUDA_RETURN(cudaLibraryGetKernel(&handle, it->second.library, entry.c_str()),
                      absl::StrCat("kernel ", entry, " in module ", module.file, jit::Suffix(module)));
    it->second.kernels.emplace(entry, handle);
    return handle;
  }

  // cuBLASLt's workspace, one per stream, made at the stream's first GEMM.
  // Not an Allocate call: not in the allocation counts nor bytes_allocated.
  absl::StatusOr<void*> Workspace(Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workspaces_.find(stream);
    if (it != workspaces_.end()) return it->second;
    void* p = nullptr;
    GROVE_CUDA_RETURN(cudaMalloc(&p, kGemmWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
    workspaces_[stream] = p;
    return p;
  }

  absl::StatusOr<const GemmPlan*> PlanGemm(const GemmDesc& g);

  const int ordinal_;
  int arch_ = 0;
  int sm_count_ = 0;
  std::string name_;
  const CublasLtApi* lt_api_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  mutable std::mutex mu_;
  absl::flat_hash_map<void*, size_t> sizes_;
  absl::flat_hash_map<Stream, void*> workspaces_;
  DeviceStats stats_;  // the memory and module fields; the call counts are in counters_
  DeviceCounters counters_;
  std::mutex load_mu_;
  absl::flat_hash_map<jit::ModuleSpec, LoadedModule> modules_;
  std::mutex gemm_mu_;
  absl::flat_hash_map<GemmKey, std::unique_ptr<GemmPlan>> gemm_plans_;
};

uint32_t Alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

absl::StatusOr<const GemmPlan*> CudaDevice::PlanGemm(const GemmDesc& g) {
  const GemmKey key{g.dtype, g.out_dtype(), g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b,
                    g.stride_c, g.batch, static_cast<int>(g.epilogue), g.bias != nullptr, g.beta != 0.0f,
                    Alignment(g.a), Alignment(g.b), Alignment(g.c), static_cast<int>(g.math),
                    std::max(g.algorithm, 0)};
  std::lock_guard<std::mutex> lock(gemm_mu_);
  auto it = gemm_plans_.find(key);
  if (it != gemm_plans_.end()) return it->second.get();

  cudaDataType_t type;
  switch (g.dtype) {
    case DType::kF32: type = CUDA_R_32F; break;
    case DType::kF16: type = CUDA_R_16F; break;
    case DType::kBF16: type = CUDA_R_16BF; break;
    default: return absl::UnimplementedError(absl::StrCat("GEMM on ", DTypeName(g.dtype), " (f32, f16, bf16 only)"));
  }
  // C (and D) in f32 under f16 or bf16 A and B: a combination cuBLASLt
  // takes with f32 compute and scale.
  const cudaDataType_t c_type = g.out_dtype() == g.dtype ? type : CUDA_R_32F;
  if (g.out_dtype() != g.dtype && (g.out_dtype() != DType::kF32 || g.bias != nullptr)) {
    return absl::UnimplementedError(absl::StrCat("GEMM of ", DTypeName(g.dtype), " into ", DTypeName(g.out_dtype()),
                                                 g.bias != nullptr ? " with a bias" : ""));
  }
  const CublasLtApi& lt = *lt_api_;
  auto plan = std::make_unique<GemmPlan>(lt);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's
  // "A" is our B and its "B" is our A; its m, n are our n, m.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (g.dtype == DType::kF32) {
    switch (g.math) {
      case GemmDesc::Math::kF32: break;
      case GemmDesc::Math::kTF32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
      case GemmDesc::Math::kBF16: compute = CUBLAS_COMPUTE_32F_FAST_16BF; break;
      case GemmDesc::Math::kF16: compute = CUBLAS_COMPUTE_32F_FAST_16F; break;
    }
  }
  GROVE_LT_RETURN(lt.MatmulDescCreate(&plan->op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  GROVE_LT_RETURN(lt.MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "TRANSA");
  GROVE_LT_RETURN(lt.MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "TRANSB");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.epilogue == GemmDesc::Epilogue::kGelu) {
    // cuBLASLt's GELU is the tanh approximation; ONNX's Gelu default is erf.
    return absl::UnimplementedError("GEMM with a GELU epilogue");
  }
  if (g.bias != nullptr) {
    epi = g.epilogue == GemmDesc::Epilogue::kRelu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    GROVE_LT_RETURN(lt.MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
                    "BIAS_DATA_TYPE");
  } else if (g.epilogue == GemmDesc::Epilogue::kRelu) {
    epi = CUBLASLT_EPILOGUE_RELU;
  }
  GROVE_LT_RETURN(lt.MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");

  auto layout = [&](cublasLtMatrixLayout_t* l, uint64_t rows, uint64_t cols, int64_t ld, int64_t stride,
                    cudaDataType_t t) {
    cublasStatus_t st = lt.MatrixLayoutCreate(l, t, rows, cols, ld);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (g.batch > 1) {
      const int32_t count = static_cast<int32_t>(g.batch);
      st = lt.MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
      if (st != CUBLAS_STATUS_SUCCESS) return st;
      st = lt.MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    }
    return st;
  };
  GROVE_LT_RETURN(layout(&plan->a, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.stride_b, type),
                  "layout B");
  GROVE_LT_RETURN(layout(&plan->b, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.stride_a, type),
                  "layout A");
  GROVE_LT_RETURN(layout(&plan->c, g.n, g.m, g.ldc, g.stride_c, c_type), "layout C");

  cublasLtMatmulPreference_t pref = nullptr;
  GROVE_LT_RETURN(lt.MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kGemmWorkspaceBytes;
  lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // cuBLASLt's "A" is our B and its "B" our A (see above).
  const uint32_t align_lt_a = key.align_b, align_lt_b = key.align_a, align_c = key.align_c;
  lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_lt_a, sizeof(uint32_t));
  lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_lt_b, sizeof(uint32_t));
  lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(uint32_t));
  lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(uint32_t));
  // The heuristic's answers up to the one asked for (a dispatch table's
  // "gemm" entry: GemmDesc::algorithm); the first when it gives fewer.
  cublasLtMatmulHeuristicResult_t results[jit::kMaxGemmAlgorithms] = {};
  const int wanted = std::clamp(g.algorithm, 0, jit::kMaxGemmAlgorithms - 1) + 1;
  int found = 0;
  cublasStatus_t st = lt.MatmulAlgoGetHeuristic(lt_, plan->op, plan->a, plan->b, plan->c, plan->c, pref, wanted,
                                                     results, &found);
  lt.MatmulPreferenceDestroy(pref);
  cublasLtMatmulHeuristicResult_t& result = results[found >= wanted ? wanted - 1 : 0];
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for a ", DTypeName(g.dtype), " GEMM ",
                                                 g.m, "x", g.n, "x", g.k, " (batch ", g.batch, ")"));
  }
  plan->algo = result.algo;
  const GemmPlan* out = plan.get();
  gemm_plans_.emplace(key, std::move(plan));
  return out;
}

absl::Status CudaDevice::Gemm(const GemmDesc& g, Stream stream) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return absl::OkStatus();
  GROVE_CUDA_RETURN(cudaSetDevice(ordinal_), "cudaSetDevice");
  if (g.k == 0) {
    // cuBLASLt wants k >= 1: C = beta * C (+ bias) is the empty sum.
    return absl::UnimplementedError("GEMM with k = 0");
  }
  absl::StatusOr<const GemmPlan*> plan = PlanGemm(g);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<void*> ws = Workspace(stream);
  if (!ws.ok()) return ws.status();
  const CublasLtApi& lt = *lt_api_;
  if (g.bias != nullptr) {
    GROVE_LT_RETURN(lt.MatmulDescSetAttribute((*plan)->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                   sizeof(g.bias)),
                    "BIAS_POINTER");
  }
  GROVE_LT_RETURN(lt.Matmul(lt_, (*plan)->op, &g.alpha, g.b, (*plan)->a, g.a, (*plan)->b, &g.beta, g.c,
                                 (*plan)->c, g.c, (*plan)->c, &(*plan)->algo, *ws, kGemmWorkspaceBytes,
                                 static_cast<cudaStream_t>(stream)),
                  "cublasLtMatmul");
  counters_.CountGemm();
  return absl::OkStatus();
}

}  // namespace

CudaProbe ProbeCuda() {
  CudaProbe probe;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    probe.reason = absl::StrCat(cudaGetErrorString(err), " (", cudaGetErrorName(err), ")");
    return probe;
  }
  if (count == 0) {
    probe.reason = "no CUDA device";
    return probe;
  }
  probe.device_count = count;
  return probe;
}

absl::StatusOr<std::shared_ptr<Device>> OpenCudaDevice(int ordinal) {
  // One device object per ordinal for the life of the process (never
  // destroyed: CUDA may already be torn down at static destruction).
  static std::mutex mu;
  static auto* devices = new std::map<int, std::shared_ptr<Device>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices->find(ordinal);
  if (it != devices->end()) return it->second;
  const CudaProbe probe = ProbeCuda();
  if (probe.device_count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", probe.reason));
  }
  if (ordinal < 0 || ordinal >= probe.device_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", ordinal, " requested, this machine has ", probe.device_count));
  }
  absl::StatusOr<std::unique_ptr<CudaDevice>> d = CudaDevice::Open(ordinal);
  if (!d.ok()) return d.status();
  std::shared_ptr<Device> shared(d->release(), [](Device*) {});
  devices->emplace(ordinal, shared);
  return shared;
}

}  // namespace grove::cuda
