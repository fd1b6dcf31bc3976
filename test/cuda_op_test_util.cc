#include "test/cuda_op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "lib/backends/cuda/exec_context.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"

namespace grove::testing {
namespace {

// Frees device memory at the end of a run.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(cuda::Device& d) : device_(d) {}
  ~DeviceBuffers() {
    for (void* p : ptrs_) device_.Free(p);
  }
  absl::StatusOr<void*> Allocate(size_t bytes) {
    absl::StatusOr<void*> p = device_.Allocate(bytes);
    if (p.ok()) ptrs_.push_back(*p);
    return p;
  }

 private:
  cuda::Device& device_;
  std::vector<void*> ptrs_;
};

class CudaTestHost : public ir::KernelContext::Host {
 public:
  CudaTestHost(DeviceBuffers& buffers, cuda::ExecContext& exec, std::vector<TensorView>& views,
               std::vector<TensorView*>& out_views)
      : buffers_(buffers), exec_(exec), views_(views), out_views_(out_views) {}
  absl::StatusOr<TensorView*> AllocateOutput(int i, DType dtype, std::vector<int64_t> shape) override {
    if (i < 0 || i >= static_cast<int>(views_.size())) return absl::OutOfRangeError("output index");
    TensorView v(dtype, std::move(shape), static_cast<void*>(nullptr));
    absl::StatusOr<void*> p = buffers_.Allocate(v.byte_size());
    if (!p.ok()) return p.status();
    v.data = *p;
    views_[i] = std::move(v);
    out_views_[i] = &views_[i];
    return out_views_[i];
  }
  absl::StatusOr<std::vector<TensorView>> RunSubgraph(int, absl::Span<const TensorView>) override {
    return absl::UnimplementedError("RunOpCuda cannot run subgraphs; use a model");
  }
  void* backend_context() override { return &exec_; }
  // Device memory, grown (never shrunk) across the calls of one run.
  absl::StatusOr<void*> Workspace(uint64_t bytes) override {
    if (bytes <= workspace_bytes_ && workspace_ != nullptr) return workspace_;
    absl::StatusOr<void*> p = buffers_.Allocate(static_cast<size_t>(std::max<uint64_t>(bytes, 64)));
    if (!p.ok()) return p.status();
    workspace_ = *p;
    workspace_bytes_ = bytes;
    return workspace_;
  }

 private:
  void* workspace_ = nullptr;
  uint64_t workspace_bytes_ = 0;
  DeviceBuffers& buffers_;
  cuda::ExecContext& exec_;
  std::vector<TensorView>& views_;
  std::vector<TensorView*>& out_views_;
};

}  // namespace

bool TestDeviceIsGpu() {
  const char* env = std::getenv("GROVE_TEST_DEVICE");
  return env != nullptr && std::string(env) == "cuda";
}

std::shared_ptr<cuda::Device> TestDevice() {
  static std::shared_ptr<cuda::Device> device = [] {
    if (!TestDeviceIsGpu()) return cuda::NewEmulatedDevice();
    absl::StatusOr<std::shared_ptr<cuda::Device>> d = cuda::OpenCudaDevice(0);
    if (!d.ok()) {
      std::fprintf(stderr, "SKIPPED: GROVE_TEST_DEVICE=cuda but %s\n", std::string(d.status().message()).c_str());
      std::fflush(stderr);
      std::_Exit(77);
    }
    std::fprintf(stderr, "running on %s\n", (*d)->Describe().c_str());
    return *d;
  }();
  return device;
}

namespace {

// Under GROVE_TEST_DEVICE=cuda (the `gpu` ctest label) a machine without a
// GPU skips every test of the binary at once, before any runs.
class GpuEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (TestDeviceIsGpu()) TestDevice();
  }
};
[[maybe_unused]] ::testing::Environment* const kGpuEnvironment =
    ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

}  // namespace

namespace {

cuda::DeviceCounts CountsOf(const cuda::DeviceStats& s) {
  return {s.launches,         s.gemms,
          s.allocations,      s.frees,
          s.synchronizations, s.device_to_host_copies,
          s.device_to_host_bytes, s.host_to_device_copies,
          s.host_to_device_bytes};
}

// RunOpCuda, and with `counts` the invoke counted instead of the outputs
// copied back.
absl::StatusOr<std::vector<Tensor>> RunOpCudaImpl(cuda::Device& device, const std::string& type,
                                                  std::vector<const Tensor*> inputs,
                                                  std::vector<std::pair<std::string, AttrValue>> attrs,
                                                  int num_outputs, CudaRunOptions options, InvokeCounts* counts) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find(type);
  if (def == nullptr) return absl::NotFoundError(absl::StrCat("no op ", type));
  if (def->kernels[static_cast<int>(ir::Backend::kCuda)] == nullptr) {
    return absl::UnimplementedError(absl::StrCat(type, " has no CUDA kernel"));
  }
  ir::Graph graph;
  ir::Node node;
  node.type = type;
  node.def = def;
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(static_cast<int>(inputs.size()) + i);
  for (auto& [name, value] : attrs) node.attrs.Set(name, value);

  DeviceBuffers buffers(device);
  absl::StatusOr<cuda::Stream> stream = device.CreateStream();
  if (!stream.ok()) return stream.status();
  cuda::ExecContext exec(device, *stream);
  exec.set_bucket_plan(options.bucket_plan);

  // Inputs on the device; host copies visible to the kernel when asked.
  std::vector<TensorView> in_storage(inputs.size());
  std::vector<TensorView*> in_views(inputs.size(), nullptr);
  std::vector<const TensorView*> host_inputs(inputs.size(), nullptr);
  std::vector<ir::ShapeContext::Input> shape_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    const TensorView& host = inputs[i]->view();
    absl::StatusOr<void*> p = buffers.Allocate(host.byte_size());
    if (!p.ok()) return p.status();
    if (absl::Status s = device.CopyAsync(*p, host.data, host.byte_size(), *stream); !s.ok()) return s;
    in_storage[i] = TensorView(host.dtype, host.shape, *p);
    in_views[i] = &in_storage[i];
    if (options.host_values) host_inputs[i] = &host;
    shape_inputs[i] = ir::ShapeContext::Input{true, host.dtype, ir::FromConcrete(host.shape), &host};
  }
  exec.SetHostInputs(host_inputs);

  std::vector<TensorView> out_storage(num_outputs);
  std::vector<TensorView*> out_views(num_outputs, nullptr);
  if (!def->kernel_allocates_outputs) {
    ir::ShapeContext sctx(node, graph, std::move(shape_inputs), nullptr);
    if (absl::Status s = ir::InferShapes(sctx); !s.ok()) return s;
    for (int i = 0; i < num_outputs; ++i) {
      const auto& o = sctx.outputs()[i];
      if (!o.set || !ir::IsConcrete(o.shape)) return absl::InternalError(absl::StrCat(type, ": output ", i, " shape"));
      TensorView v(o.dtype, ir::ToConcrete(o.shape), static_cast<void*>(nullptr));
      absl::StatusOr<void*> p = buffers.Allocate(v.byte_size());
      if (!p.ok()) return p.status();
      v.data = *p;
      out_storage[i] = std::move(v);
      out_views[i] = &out_storage[i];
    }
  }
  CudaTestHost host(buffers, exec, out_storage, out_views);
  ir::KernelContext kctx(node, in_views, out_views, &host);
  absl::Status run;
  if (counts == nullptr) {
    // Prepare, then invoke (the workspace from host.Workspace), as a plan does.
    run = ir::RunKernel(ir::Backend::kCuda, kctx);
  } else {
    // The same in steps, counting the invoke alone (the inputs' uploads done).
    run = device.Synchronize(*stream);
    const ir::PrepareFn prepare = def->prepares[static_cast<int>(ir::Backend::kCuda)];
    absl::StatusOr<ir::PreparedKernel> prepared =
        prepare != nullptr ? prepare(kctx) : absl::StatusOr<ir::PreparedKernel>(ir::PreparedKernel{});
    if (run.ok() && !prepared.ok()) run = prepared.status();
    void* workspace = nullptr;
    if (run.ok() && prepared->workspace_bytes > 0) {
      absl::StatusOr<void*> w = host.Workspace(prepared->workspace_bytes);
      if (w.ok()) workspace = *w;
      if (!w.ok()) run = w.status();
    }
    if (run.ok()) {
      counts->prepared = prepare != nullptr;
      counts->needs_host = prepared->needs_host;
      counts->workspace_bytes = prepared->workspace_bytes;
      kctx.SetPrepared(&*prepared, workspace);
      const cuda::DeviceCounts before = CountsOf(device.stats());
      run = def->kernels[static_cast<int>(ir::Backend::kCuda)](kctx);
      counts->counts = CountsOf(device.stats()) - before;
      kctx.SetPrepared(nullptr, nullptr);
    }
  }
  // The run's end, as a session's: the wait that reports deferred device
  // checks (an index out of range seen only on the device).
  if (absl::Status s = exec.Synchronize(); run.ok() && !s.ok()) run = s;
  device.DestroyStream(*stream);
  if (!run.ok()) return run;
  if (counts != nullptr) return std::vector<Tensor>{};

  std::vector<Tensor> outs;
  for (int i = 0; i < num_outputs; ++i) {
    if (out_views[i] == nullptr) return absl::InternalError(absl::StrCat(type, ": output ", i, " not produced"));
    absl::StatusOr<Tensor> t = Tensor::Create(out_views[i]->dtype, out_views[i]->shape);
    if (!t.ok()) return t.status();
    if (t->view().byte_size() > 0) {
      if (absl::Status s = device.CopyAsync(t->data(), out_views[i]->data, t->view().byte_size(), nullptr); !s.ok()) {
        return s;
      }
    }
    outs.push_back(std::move(*t));
  }
  if (absl::Status s = device.Synchronize(nullptr); !s.ok()) return s;
  return outs;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> RunOpCuda(cuda::Device& device, const std::string& type,
                                              std::vector<const Tensor*> inputs,
                                              std::vector<std::pair<std::string, AttrValue>> attrs,
                                              int num_outputs, CudaRunOptions options) {
  return RunOpCudaImpl(device, type, std::move(inputs), std::move(attrs), num_outputs, options, nullptr);
}

absl::StatusOr<InvokeCounts> CountCudaInvoke(cuda::Device& device, const std::string& type,
                                             std::vector<const Tensor*> inputs,
                                             std::vector<std::pair<std::string, AttrValue>> attrs, int num_outputs,
                                             CudaRunOptions options) {
  InvokeCounts counts;
  absl::StatusOr<std::vector<Tensor>> run =
      RunOpCudaImpl(device, type, std::move(inputs), std::move(attrs), num_outputs, options, &counts);
  if (!run.ok()) return run.status();
  return counts;
}

std::vector<Tensor> RunCopies(Session& s, const std::vector<Tensor>& inputs) {
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  absl::StatusOr<std::vector<TensorView>> out = s.Run(views);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> copies;
  if (!out.ok()) return copies;
  for (const TensorView& v : *out) copies.push_back(Tensor::CopyOf(v).value());
  return copies;
}

std::string CompareTensors(const Tensor& want, const Tensor& got, double tol) {
  if (want.dtype() != got.dtype()) {
    return absl::StrCat("dtype ", DTypeName(got.dtype()), ", want ", DTypeName(want.dtype()));
  }
  if (want.shape() != got.shape()) {
    return absl::StrCat("shape ", ir::ShapeToString(ir::FromConcrete(got.shape())), ", want ",
                        ir::ShapeToString(ir::FromConcrete(want.shape())));
  }
  const int64_t n = want.view().num_elements();
  absl::StatusOr<Tensor> w64 = Tensor::CastOf(want.view(), DType::kF64);
  absl::StatusOr<Tensor> g64 = Tensor::CastOf(got.view(), DType::kF64);
  if (!w64.ok() || !g64.ok()) return "cannot compare (cast to f64 failed)";
  const bool is_float = want.dtype() == DType::kF32 || want.dtype() == DType::kF64 ||
                        want.dtype() == DType::kF16 || want.dtype() == DType::kBF16;
  for (int64_t i = 0; i < n; ++i) {
    const double a = w64->as<double>()[i], b = g64->as<double>()[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (is_float && std::abs(a - b) <= tol * (1.0 + std::abs(a))) continue;
    return absl::StrCat("element ", i, " is ", b, ", want ", a);
  }
  return "";
}

void ExpectCudaMatchesCpu(cuda::Device& device, const std::string& type, std::vector<const Tensor*> inputs,
                          std::vector<std::pair<std::string, AttrValue>> attrs, int num_outputs, double tol,
                          CudaRunOptions options) {
  absl::StatusOr<std::vector<Tensor>> cpu = RunOp(type, inputs, attrs, num_outputs);
  absl::StatusOr<std::vector<Tensor>> gpu = RunOpCuda(device, type, inputs, attrs, num_outputs, options);
  if (!cpu.ok()) {
    EXPECT_FALSE(gpu.ok()) << type << ": the CPU kernel fails (" << cpu.status() << ") but CUDA succeeds";
    return;
  }
  ASSERT_TRUE(gpu.ok()) << type << " on " << device.Describe() << ": " << gpu.status();
  ASSERT_EQ(cpu->size(), gpu->size());
  for (size_t i = 0; i < cpu->size(); ++i) {
    const std::string diff = CompareTensors((*cpu)[i], (*gpu)[i], tol);
    EXPECT_EQ(diff, "") << type << " output " << i;
  }
}

Tensor Ramp(DType dtype, std::vector<int64_t> shape, int seed) {
  std::vector<float> v(static_cast<size_t>(Count(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>((static_cast<int64_t>(i) * 37 + seed * 11 + 5) % 29) / 14.5f - 1.0f;
  }
  Tensor f = MakeTensor<float>(DType::kF32, shape, v);
  if (dtype == DType::kF32) return f;
  return Tensor::CastOf(f.view(), dtype).value();
}

}  // namespace grove::testing
