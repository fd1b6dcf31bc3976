// The CUDA kernels are prepared and capture-safe: every CUDA kernel but If
// and Loop has a prepare; the invoke of a prepared step whose parameter
// inputs the plan knows (weights, folded values) allocates nothing, never
// synchronises and reads nothing back (counted on the device across the
// invoke alone); a kernel that must read device values back says so, either
// as a declared host input (KernelDef::host_inputs) or, for a data-dependent
// check, with PreparedKernel::needs_host; temporaries are declared as
// workspace bytes.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/cuda/cuda_test_helpers.h"

namespace grove::testing {
namespace {

class CudaPreparedKernelsTest : public CudaOpTest {
 protected:
  // Runs `op` on the device and returns what its invoke did.
  InvokeCounts Count(const std::string& op, std::vector<const Tensor*> in, Attrs attrs = {}, int outputs = 1,
                     bool host_values = true) {
    absl::StatusOr<InvokeCounts> c = CountCudaInvoke(*dev_, op, in, attrs, outputs, {.host_values = host_values});
    EXPECT_TRUE(c.ok()) << op << ": " << c.status();
    return c.ok() ? *c : InvokeCounts{};
  }
  // The invoke launches only: no allocation, synchronisation or copy between
  // host and device, and the prepare does not ask for the host.
  void ExpectCaptureSafe(const std::string& op, std::vector<const Tensor*> in, Attrs attrs = {}, int outputs = 1,
                         bool host_values = true) {
    SCOPED_TRACE(op);
    const InvokeCounts c = Count(op, in, attrs, outputs, host_values);
    EXPECT_TRUE(c.prepared);
    EXPECT_FALSE(c.needs_host);
    EXPECT_EQ(c.counts.allocations, 0);
    EXPECT_EQ(c.counts.frees, 0);
    EXPECT_EQ(c.counts.synchronizations, 0);
    EXPECT_EQ(c.counts.device_to_host_copies, 0);
    EXPECT_EQ(c.counts.host_to_device_copies, 0);
  }
  static uint64_t HostInputs(const std::string& op) {
    return runtime::GlobalOpRegistry().Find(op)->host_inputs[static_cast<int>(ir::Backend::kCuda)];
  }
};

TEST_F(CudaPreparedKernelsTest, EveryCudaKernelButControlFlowHasAPrepare) {
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  int kernels = 0;
  for (const std::string& type : registry.Types()) {
    const ir::OpDef* def = registry.Find(type);
    if (def->kernels[static_cast<int>(ir::Backend::kCuda)] == nullptr) continue;
    ++kernels;
    if (type == "If" || type == "Loop") continue;
    EXPECT_NE(def->prepares[static_cast<int>(ir::Backend::kCuda)], nullptr) << type;
  }
  EXPECT_GT(kernels, 100);
}

TEST_F(CudaPreparedKernelsTest, ElementwiseInvokesOnlyLaunch) {
  Tensor a = Ramp(DType::kF32, {2, 3}, 1), b = Ramp(DType::kF32, {3}, 2);
  ExpectCaptureSafe("Add", {&a, &b});
  ExpectCaptureSafe("Add", {&a, &b}, {}, 1, /*host_values=*/false);
  ExpectCaptureSafe("Relu", {&a});
  ExpectCaptureSafe("Gelu", {&a}, {{"approximate", std::string("tanh")}});
  Tensor lo = MakeTensor<float>(DType::kF32, {}, {-0.5f}), hi = MakeTensor<float>(DType::kF32, {}, {0.5f});
  ExpectCaptureSafe("Clip", {&a, &lo, &hi});
  Tensor cond = MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  ExpectCaptureSafe("Where", {&cond, &a, &b});
  ExpectCaptureSafe("Cast", {&a}, {{"to", static_cast<int64_t>(DType::kF16)}});
  Tensor n = I32({2, 3}, {7, -8, 9, 10, 11, -12}), d = I32({3}, {2, 3, -4});
  ExpectCaptureSafe("Div", {&n, &d});
  // More operands than one launch folds: the accumulator is the workspace.
  std::vector<Tensor> many;
  for (int i = 0; i < 12; ++i) many.push_back(Ramp(DType::kF16, {4, 5}, i));
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : many) ptrs.push_back(&t);
  ExpectCaptureSafe("Sum", ptrs);
  EXPECT_EQ(Count("Sum", ptrs).workspace_bytes, 4u * 5u * 4u) << "f32 accumulators of 20 f16 elements";
}

TEST_F(CudaPreparedKernelsTest, DeviceValuesAreReadOnlyWhereDeclared) {
  Tensor a = Ramp(DType::kF32, {2, 3}, 1);
  // Clip's bounds: declared host inputs, read back when only the device has them.
  Tensor lo = MakeTensor<float>(DType::kF32, {}, {-0.5f}), hi = MakeTensor<float>(DType::kF32, {}, {0.5f});
  EXPECT_EQ(HostInputs("Clip"), 0b110u);
  const InvokeCounts clip = Count("Clip", {&a, &lo, &hi}, {}, 1, /*host_values=*/false);
  EXPECT_GT(clip.counts.device_to_host_copies, 0);
  // Integer Div's zero check on a divisor computed on the device: made there,
  // reported at the run's end (a deferred check), so nothing is read back.
  EXPECT_EQ(HostInputs("Div"), 0u);
  Tensor n = I32({2, 3}, {7, -8, 9, 10, 11, -12}), d = I32({3}, {2, 3, -4});
  ExpectCaptureSafe("Div", {&n, &d}, {}, 1, /*host_values=*/false);
  Tensor fd = Ramp(DType::kF32, {3}, 4);
  ExpectCaptureSafe("Div", {&a, &fd}, {}, 1, /*host_values=*/false);
}

TEST_F(CudaPreparedKernelsTest, LinalgNormAndReductionInvokesOnlyLaunch) {
  Tensor a = Ramp(DType::kF32, {2, 3, 4}, 1), b = Ramp(DType::kF32, {4, 5}, 2);
  ExpectCaptureSafe("MatMul", {&a, &b});
  Tensor a4 = Ramp(DType::kF32, {2, 3, 2, 4}, 1), b4 = Ramp(DType::kF32, {2, 1, 4, 5}, 2);
  ExpectCaptureSafe("MatMul", {&a4, &b4});  // batch dims that loop on the host
  Tensor ga = Ramp(DType::kF32, {3, 4}, 3), gb = Ramp(DType::kF32, {5, 4}, 4), gc = Ramp(DType::kF32, {3, 1}, 5);
  ExpectCaptureSafe("Gemm", {&ga, &gb, &gc}, {{"transB", int64_t{1}}, {"beta", 0.5}});
  ExpectCaptureSafe("Softmax", {&a});
  ExpectCaptureSafe("LogSoftmax", {&a}, {{"axis", int64_t{1}}});
  Tensor scale = Ramp(DType::kF32, {4}, 6), bias = Ramp(DType::kF32, {4}, 7);
  ExpectCaptureSafe("LayerNormalization", {&a, &scale, &bias});
  Tensor x = Ramp(DType::kF32, {2, 3, 4, 4}, 8);
  Tensor c3 = Ramp(DType::kF32, {3}, 9), v3 = MakeTensor<float>(DType::kF32, {3}, {1.0f, 2.0f, 0.5f});
  ExpectCaptureSafe("BatchNormalization", {&x, &c3, &c3, &c3, &v3});
  ExpectCaptureSafe("InstanceNormalization", {&x, &c3, &c3});
  Tensor axes = I64({1});
  ExpectCaptureSafe("ReduceSum", {&a, &axes});
  ExpectCaptureSafe("ReduceMean", {&a}, {{"axes", std::vector<int64_t>{-1}}});
  ExpectCaptureSafe("ArgMax", {&a}, {{"axis", int64_t{2}}});
  Tensor axis = I64({}, {1});
  ExpectCaptureSafe("CumSum", {&a, &axis});
  // The axes computed on the device: declared, read back.
  EXPECT_EQ(HostInputs("ReduceSum"), 0b10u);
  EXPECT_GT(Count("ReduceSum", {&a, &axes}, {}, 1, /*host_values=*/false).counts.synchronizations, 0);
}

TEST_F(CudaPreparedKernelsTest, ConvPoolingAndRecurrentUseTheirWorkspace) {
  Tensor x = Ramp(DType::kF32, {2, 2, 6, 6}, 1), w = Ramp(DType::kF32, {3, 2, 3, 3}, 2), b = Ramp(DType::kF32, {3}, 3);
  ExpectCaptureSafe("Conv", {&x, &w, &b}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  // im2col of both images: 2 channels x 9 taps x 36 positions, f32.
  EXPECT_EQ(Count("Conv", {&x, &w, &b}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}).workspace_bytes,
            2u * 2u * 9u * 36u * 4u);
  ExpectCaptureSafe("Conv", {&x, &w}, {}, 1, /*host_values=*/false);
  Tensor wd = Ramp(DType::kF32, {4, 1, 3, 3}, 4);
  ExpectCaptureSafe("Conv", {&x, &wd}, {{"group", int64_t{2}}});  // depthwise
  Tensor wt = Ramp(DType::kF32, {2, 3, 3, 3}, 5);
  ExpectCaptureSafe("ConvTranspose", {&x, &wt, &b}, {{"strides", std::vector<int64_t>{2, 2}}});
  ExpectCaptureSafe("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{2, 2}}}, 2);
  ExpectCaptureSafe("AveragePool", {&x}, {{"kernel_shape", std::vector<int64_t>{3, 3}}});
  ExpectCaptureSafe("GlobalAveragePool", {&x});

  const int64_t seq = 4, batch = 2, input = 3, hidden = 5;
  Tensor xs = Ramp(DType::kF32, {seq, batch, input}, 6);
  Tensor lw = Ramp(DType::kF32, {1, 4 * hidden, input}, 7), lr = Ramp(DType::kF32, {1, 4 * hidden, hidden}, 8);
  Tensor lb = Ramp(DType::kF32, {1, 8 * hidden}, 9);
  Tensor lens = I32({batch}, {4, 2});
  const Attrs lstm = {{"hidden_size", hidden}};
  ExpectCaptureSafe("LSTM", {&xs, &lw, &lr, &lb}, lstm, 3);
  ExpectCaptureSafe("LSTM", {&xs, &lw, &lr, &lb, &lens}, lstm, 3);
  EXPECT_GT(Count("LSTM", {&xs, &lw, &lr, &lb}, lstm, 3).workspace_bytes, 0u);
  // sequence_lens only on the device: checked there (a deferred check), not
  // declared, nothing read back.
  EXPECT_EQ(HostInputs("LSTM"), uint64_t{0});
  EXPECT_EQ(Count("LSTM", {&xs, &lw, &lr, &lb, &lens}, lstm, 3, false).counts.device_to_host_copies, 0);
  Tensor gw = Ramp(DType::kF32, {1, 3 * hidden, input}, 10), gr = Ramp(DType::kF32, {1, 3 * hidden, hidden}, 11);
  ExpectCaptureSafe("GRU", {&xs, &gw, &gr}, lstm, 2);
}

TEST_F(CudaPreparedKernelsTest, ShapeAndLayoutOpsWithKnownParametersOnlyLaunch) {
  Tensor x = Data(DType::kF32, {2, 3, 4});
  ExpectCaptureSafe("Transpose", {&x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  Tensor y = Data(DType::kF32, {2, 5, 4});
  ExpectCaptureSafe("Concat", {&x, &y}, {{"axis", int64_t{1}}});
  Tensor shape = I64({4, -1});
  ExpectCaptureSafe("Reshape", {&x, &shape});
  ExpectCaptureSafe("Identity", {&x});
  ExpectCaptureSafe("Flatten", {&x});
  ExpectCaptureSafe("Shape", {&x});
  ExpectCaptureSafe("Size", {&x});
  Tensor idx = I64({2, 2}, {0, -1, 1, 0});
  ExpectCaptureSafe("Gather", {&x, &idx}, {{"axis", int64_t{1}}});
  Tensor starts = I64({0, 1}), ends = I64({2, 3}), axes = I64({1, 2}), steps = I64({1, 2});
  ExpectCaptureSafe("Slice", {&x, &starts, &ends, &axes, &steps});
  Tensor to = I64({2, 2, 3, 4});
  ExpectCaptureSafe("Expand", {&x, &to});
  Tensor reps = I64({1, 2, 2});
  ExpectCaptureSafe("Tile", {&x, &reps});
  Tensor pads = I64({0, 1, 0, 1, 0, 2});
  ExpectCaptureSafe("Pad", {&x, &pads});
  Tensor split = I64({1, 2});
  ExpectCaptureSafe("Split", {&x, &split}, {{"axis", int64_t{1}}}, 2);
  Tensor start = I64({}, {2}), limit = I64({}, {11}), delta = I64({}, {3});
  ExpectCaptureSafe("Range", {&start, &limit, &delta});
  Tensor dims = I64({2, 3});
  Tensor seven = MakeTensor<float>(DType::kF32, {1}, {7.0f});
  ExpectCaptureSafe("ConstantOfShape", {&dims, &seven});
  Tensor sq = Data(DType::kF32, {3, 4, 4});
  Tensor k = I64({}, {1});
  ExpectCaptureSafe("Trilu", {&sq, &k});
  Tensor labels = I64({3}, {0, 2, 1}), depth = I64({}, {4});
  Tensor onoff = MakeTensor<float>(DType::kF32, {2}, {0.0f, 1.0f});
  ExpectCaptureSafe("OneHot", {&labels, &depth, &onoff});
  Tensor gidx = I64({2, 3, 4}, std::vector<int64_t>(24, 1));
  ExpectCaptureSafe("GatherElements", {&x, &gidx}, {{"axis", int64_t{1}}});
  Tensor sidx = I64({2, 1}, {1, 0}), upd = Data(DType::kF32, {2, 3, 4}, 1);
  ExpectCaptureSafe("ScatterND", {&x, &sidx, &upd});
}

TEST_F(CudaPreparedKernelsTest, ParameterInputsOnTheDeviceAreDeclaredAndReadBack) {
  Tensor x = Data(DType::kF32, {2, 3, 4});
  Tensor starts = I64({0, 1}), ends = I64({2, 3}), axes = I64({1, 2}), steps = I64({1, 2});
  EXPECT_EQ(HostInputs("Slice"), 0b11110u);
  const InvokeCounts slice = Count("Slice", {&x, &starts, &ends, &axes, &steps}, {}, 1, /*host_values=*/false);
  EXPECT_FALSE(slice.needs_host);  // the executor sees the declared inputs
  EXPECT_GT(slice.counts.device_to_host_copies, 0);
  for (const char* op : {"Expand", "Tile", "Trilu", "OneHot", "Split", "CumSum"}) {
    EXPECT_EQ(HostInputs(op), 0b10u) << op;
  }
  EXPECT_EQ(HostInputs("Pad"), 0b1010u);
  EXPECT_EQ(HostInputs("Range"), 0b111u);
  EXPECT_EQ(HostInputs("ConstantOfShape"), 0b1u);
  for (const char* op : {"Reshape", "Gather", "GatherElements", "ScatterND", "Add", "MatMul", "Conv"}) {
    EXPECT_EQ(HostInputs(op), 0u) << op;
  }
}

// Indices only the device has are checked by the kernel, a failure recorded
// for the run's end (deferred checks): the step needs no wait, no read and
// no workspace, so its segment stays one graph.
TEST_F(CudaPreparedKernelsTest, IndicesOnlyOnTheDeviceAreCheckedThereWithoutAWait) {
  Tensor x = Data(DType::kF32, {2, 3, 4});
  Tensor idx = I64({2, 2}, {0, -1, 1, 0});
  ExpectCaptureSafe("Gather", {&x, &idx}, {{"axis", int64_t{1}}}, 1, /*host_values=*/false);
  EXPECT_EQ(Count("Gather", {&x, &idx}, {{"axis", int64_t{1}}}, 1, false).workspace_bytes, 0u);
  Tensor gidx = I64({2, 3, 4}, std::vector<int64_t>(24, 1));
  ExpectCaptureSafe("GatherElements", {&x, &gidx}, {{"axis", int64_t{1}}}, 1, false);
  Tensor sidx = I64({2, 1}, {1, 0}), upd = Data(DType::kF32, {2, 3, 4}, 1);
  ExpectCaptureSafe("ScatterND", {&x, &sidx, &upd}, {}, 1, false);
  // Nothing to move, the indices still checked (by the check kernel alone).
  Tensor no_rows = Data(DType::kF32, {2, 0});
  Tensor rows = I64({1}, {1});
  ExpectCaptureSafe("Gather", {&no_rows, &rows}, {}, 1, false);
  Tensor empty_slices = Data(DType::kF32, {3, 0}), one = I64({1, 1}, {2}), no_updates = Data(DType::kF32, {1, 0});
  ExpectCaptureSafe("ScatterND", {&empty_slices, &one, &no_updates}, {}, 1, false);
}

// A bad index or a zero divisor only the device sees fails the op with the
// CPU's message (node, value, bound), read at the end as a session's run does.
TEST_F(CudaPreparedKernelsTest, DeviceCheckFailuresGiveTheCpuMessage) {
  Tensor x = Data(DType::kF32, {2, 3, 4});
  struct Case {
    std::string op;
    std::vector<const Tensor*> in;
    Attrs attrs;
  };
  Tensor gather_idx = I64({2, 2}, {0, -1, 3, 0}), gather_idx32 = I32({3}, {-4, 0, 1});
  Tensor ge_idx = I64({2, 3, 4}, std::vector<int64_t>(24, 1));
  ge_idx.as<int64_t>()[17] = -5;
  Tensor sidx = I64({2, 2}, {1, 0, 0, 3}), upd = Data(DType::kF32, {2, 4}, 1);
  Tensor no_rows = Data(DType::kF32, {2, 0}), far = I64({2}, {1, 2});
  Tensor empty_slices = Data(DType::kF32, {3, 0}), bad_tuple = I64({1, 1}, {-4}),
         no_updates = Data(DType::kF32, {1, 0});
  Tensor num32 = I32({2, 3}, {7, -8, 9, 10, 11, -12}), den32 = I32({3}, {2, 0, -4});
  Tensor num64 = I64({2, 2}, {7, 8, 9, 10}), den64 = I64({2, 2}, {1, 2, 3, 0});
  Tensor num8 = MakeTensor<int8_t>(DType::kI8, {3}, {1, 2, 3}), den8 = MakeTensor<int8_t>(DType::kI8, {1}, {0});
  Tensor numu8 = MakeTensor<uint8_t>(DType::kU8, {2, 2}, {1, 2, 3, 4});
  Tensor denu8 = MakeTensor<uint8_t>(DType::kU8, {2, 1}, {5, 0});
  const std::vector<Case> cases = {
      {"Gather", {&x, &gather_idx}, {{"axis", int64_t{1}}}},
      {"Gather", {&x, &gather_idx32}, {{"axis", int64_t{-2}}}},
      {"GatherElements", {&x, &ge_idx}, {{"axis", int64_t{1}}}},
      {"ScatterND", {&x, &sidx, &upd}, {}},
      {"Gather", {&no_rows, &far}, {}},
      {"ScatterND", {&empty_slices, &bad_tuple, &no_updates}, {}},
      {"Div", {&num32, &den32}, {}},
      {"Div", {&num64, &den64}, {}},
      {"Div", {&num8, &den8}, {}},
      {"Div", {&numu8, &denu8}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    absl::StatusOr<std::vector<Tensor>> cpu = RunOp(c.op, c.in, c.attrs);
    ASSERT_FALSE(cpu.ok());
    for (bool host : {true, false}) {
      absl::StatusOr<std::vector<Tensor>> got = RunOpCuda(*dev_, c.op, c.in, c.attrs, 1, {.host_values = host});
      ASSERT_FALSE(got.ok()) << host;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(got.status().message(), cpu.status().message()) << host;
    }
  }
}

}  // namespace
}  // namespace grove::testing
