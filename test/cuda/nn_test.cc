// CUDA Conv, ConvTranspose and pooling on the emulated device against the
// CPU kernels: 1-D, 2-D and 3-D windows, groups (depthwise too), strides,
// dilations, asymmetric pads, every auto_pad, ceil_mode, count_include_pad,
// MaxPool indices in both storage orders, every pooling dtype, empty
// batches and the error paths. (Conv and ConvTranspose run f32 here, f16
// and bf16 in ConvHalfTypes; f64 stays on the CPU.)
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using testing::ExpectCudaMatchesCpu;
using testing::MakeTensor;
using testing::Ramp;
using testing::RunOpCuda;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
};

Attrs WindowAttrs(const Window& w, bool with_kernel) {
  Attrs a;
  if (with_kernel) a.push_back({"kernel_shape", w.kernel});
  if (!w.strides.empty()) a.push_back({"strides", w.strides});
  if (!w.dilations.empty()) a.push_back({"dilations", w.dilations});
  if (!w.pads.empty()) a.push_back({"pads", w.pads});
  if (!w.auto_pad.empty()) a.push_back({"auto_pad", w.auto_pad});
  return a;
}

class CudaNnTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = testing::TestDevice();

  void ExpectConv(std::vector<int64_t> xs, std::vector<int64_t> ws, int64_t group, const Window& w, bool bias) {
    SCOPED_TRACE(::testing::Message() << "Conv X " << ::testing::PrintToString(xs) << " W "
                                      << ::testing::PrintToString(ws) << " group " << group);
    Tensor x = Ramp(DType::kF32, xs, 1), wt = Ramp(DType::kF32, ws, 2), b = Ramp(DType::kF32, {ws[0]}, 3);
    Attrs a = WindowAttrs(w, false);
    a.push_back({"group", group});
    EXPECT_TRUE(testing::RunOp("Conv", {&x, &wt, bias ? &b : nullptr}, a).ok());
    ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &wt, bias ? &b : nullptr}, a);
  }

  void ExpectConvTranspose(std::vector<int64_t> xs, std::vector<int64_t> ws, int64_t group, const Window& w,
                           bool bias, Attrs extra = {}) {
    SCOPED_TRACE(::testing::Message() << "ConvTranspose X " << ::testing::PrintToString(xs) << " W "
                                      << ::testing::PrintToString(ws) << " group " << group);
    Tensor x = Ramp(DType::kF32, xs, 1), wt = Ramp(DType::kF32, ws, 2), b = Ramp(DType::kF32, {ws[1] * group}, 3);
    Attrs a = WindowAttrs(w, false);
    a.push_back({"group", group});
    for (auto& e : extra) a.push_back(e);
    EXPECT_TRUE(testing::RunOp("ConvTranspose", {&x, &wt, bias ? &b : nullptr}, a).ok());
    ExpectCudaMatchesCpu(*dev_, "ConvTranspose", {&x, &wt, bias ? &b : nullptr}, a);
  }
};

// f16 and bf16 Conv and ConvTranspose: both backends compute in f32 and
// round Y once (the sums in another order: an ulp of the dtype).
TEST_F(CudaNnTest, ConvHalfTypes) {
  for (DType dt : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dt));
    const double tol = dt == DType::kF16 ? 2e-3 : 1e-2;
    const Tensor x = Ramp(dt, {2, 4, 7, 6}, 1), w = Ramp(dt, {6, 2, 3, 3}, 2), b = Ramp(dt, {6}, 3);
    const Attrs a = {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 1}},
                     {"pads", std::vector<int64_t>{1, 1, 0, 1}}};
    ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &w, &b}, a, 1, tol);
    const Tensor wt = Ramp(dt, {4, 3, 2, 2}, 4), bt = Ramp(dt, {6}, 5);
    ExpectCudaMatchesCpu(*dev_, "ConvTranspose", {&x, &wt, &bt},
                         {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 2}}}, 1, tol);
  }
}

TEST_F(CudaNnTest, ConvOneD) {
  ExpectConv({2, 3, 11}, {4, 3, 3}, 1, {}, true);
  ExpectConv({1, 2, 13}, {3, 2, 4}, 1, {{}, {2}, {}, {1, 2}}, true);
  ExpectConv({1, 2, 13}, {3, 2, 3}, 1, {{}, {3}, {2}, {2, 0}}, false);
  ExpectConv({1, 4, 9}, {6, 2, 2}, 2, {{}, {1}, {3}, {}}, true);
}

TEST_F(CudaNnTest, ConvTwoD) {
  ExpectConv({1, 1, 7, 5}, {1, 1, 3, 3}, 1, {{}, {2, 2}, {}, {1, 0, 1, 0}}, false);  // asymmetric pads
  ExpectConv({2, 3, 8, 9}, {5, 3, 3, 2}, 1, {{}, {1, 2}, {2, 1}, {0, 1, 2, 0}}, true);
  ExpectConv({1, 2, 10, 10}, {2, 2, 3, 3}, 1, {{}, {3, 3}, {2, 2}, {2, 2, 2, 2}}, true);
  ExpectConv({3, 2, 5, 4}, {3, 2, 2, 2}, 1, {}, false);
}

TEST_F(CudaNnTest, ConvGroupsDepthwisePointwise) {
  ExpectConv({2, 4, 6, 6}, {6, 2, 3, 3}, 2, {{}, {}, {}, {1, 1, 1, 1}}, true);
  ExpectConv({2, 3, 5, 7}, {3, 1, 3, 3}, 3, {{}, {2, 1}, {}, {1, 1, 1, 1}}, true);  // depthwise
  ExpectConv({2, 3, 5, 7}, {6, 1, 2, 3}, 3, {{}, {1, 2}, {2, 1}, {0, 1, 2, 0}}, false);  // depthwise x2
  ExpectConv({1, 4, 9}, {4, 1, 3}, 4, {{}, {2}, {}, {}, "SAME_LOWER"}, true);             // depthwise 1-D
  ExpectConv({1, 2, 3, 4, 3}, {2, 1, 2, 2, 2}, 2, {{}, {}, {}, {1, 0, 0, 0, 1, 1}}, true);  // depthwise 3-D
  ExpectConv({1, 4, 6, 6}, {6, 2, 3, 3}, 2, {{}, {2, 2}}, false);                          // groups > images
  ExpectConv({1, 6, 5, 5}, {12, 2, 1, 1}, 3, {}, true);                             // pointwise, groups
  ExpectConv({2, 5, 4, 3}, {7, 5, 1, 1}, 1, {}, false);                       // pointwise
  ExpectConv({2, 5, 4, 3}, {7, 5, 1, 1}, 1, {{}, {2, 1}}, true);                    // 1x1, stride 2
}

TEST_F(CudaNnTest, ConvEveryAutoPad) {
  for (const char* mode : {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t stride : {1, 2}) {
      for (int64_t k : {1, 2, 3}) {
        for (int64_t dil : {1, 2}) {
          ExpectConv({1, 2, 7, 6}, {3, 2, k, k}, 1, {{}, {stride, stride}, {dil, dil}, {}, mode}, true);
        }
      }
    }
  }
}

TEST_F(CudaNnTest, ConvThreeDAndEmpty) {
  ExpectConv({1, 2, 5, 4, 6}, {3, 2, 3, 2, 3}, 1, {{}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}}, true);
  ExpectConv({1, 2, 4, 4, 4}, {2, 1, 2, 2, 2}, 2, {{}, {}, {}, {}, "SAME_UPPER"}, false);
  ExpectConv({0, 2, 5, 5}, {3, 2, 3, 3}, 1, {}, true);  // empty batch
  ExpectConv({2, 0, 5, 5}, {3, 0, 3, 3}, 1, {}, true);  // no input channels: Y = B
  ExpectConv({2, 0, 5, 5}, {3, 0, 3, 3}, 1, {}, false);
}

TEST_F(CudaNnTest, ConvErrorsAndF64) {
  Tensor x = Ramp(DType::kF32, {1, 4, 5, 5}), w = Ramp(DType::kF32, {3, 3, 3, 3});
  ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &w});  // channels do not fit
  Tensor w2 = Ramp(DType::kF32, {3, 2, 3, 3});
  ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &w2}, {{"group", int64_t{3}}});
  Tensor w3 = Ramp(DType::kF32, {4, 4, 3}), w4 = Ramp(DType::kF32, {2, 4, 3, 3}), b = Ramp(DType::kF32, {3});
  ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &w3});      // rank
  ExpectCudaMatchesCpu(*dev_, "Conv", {&x, &w4, &b});  // bias length
  Tensor xs = Ramp(DType::kF32, {1, 4, 2, 2});
  ExpectCudaMatchesCpu(*dev_, "Conv", {&xs, &w4});  // window longer than the input
  Tensor x64 = Tensor::CastOf(x.view(), DType::kF64).value(), w64 = Tensor::CastOf(w4.view(), DType::kF64).value();
  auto out = RunOpCuda(*dev_, "Conv", {&x64, &w64});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
}

TEST_F(CudaNnTest, ConvTranspose) {
  ExpectConvTranspose({1, 1, 3, 3}, {1, 2, 3, 3}, 1, {}, false);
  ExpectConvTranspose({2, 2, 5}, {2, 3, 3}, 1, {{}, {2}, {}, {1, 0}}, true);
  ExpectConvTranspose({1, 2, 3, 4}, {2, 2, 3, 2}, 1, {{}, {3, 2}, {2, 1}, {1, 0, 0, 1}}, true);
  ExpectConvTranspose({2, 4, 3, 3}, {4, 3, 2, 2}, 2, {{}, {2, 2}}, true);  // groups
  ExpectConvTranspose({1, 4, 3, 3}, {4, 1, 3, 3}, 4, {{}, {1, 1}, {}, {1, 1, 1, 1}}, true);  // depthwise
  ExpectConvTranspose({1, 2, 3, 2, 2}, {2, 2, 2, 2, 2}, 1, {{}, {2, 1, 2}}, true);  // 3-D
  ExpectConvTranspose({1, 2, 3, 3}, {2, 1, 3, 3}, 1, {{}, {3, 3}}, true,
                      {{"output_padding", std::vector<int64_t>{1, 2}}});
  ExpectConvTranspose({1, 2, 3, 3}, {2, 1, 3, 3}, 1, {{}, {2, 2}}, false,
                      {{"output_shape", std::vector<int64_t>{9, 8}}});
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    ExpectConvTranspose({1, 2, 4, 3}, {2, 2, 3, 2}, 1, {{}, {2, 2}, {}, {}, mode}, true);
  }
  ExpectConvTranspose({0, 2, 3, 3}, {2, 1, 3, 3}, 1, {}, true);  // empty batch
  ExpectConvTranspose({2, 0, 3, 3}, {0, 2, 3, 3}, 1, {}, true);  // no input channels: Y = B
}

TEST_F(CudaNnTest, ConvTransposeErrors) {
  Tensor x = Ramp(DType::kF32, {1, 3, 3, 3}), w = Ramp(DType::kF32, {2, 2, 3, 3});
  ExpectCudaMatchesCpu(*dev_, "ConvTranspose", {&x, &w});
  Tensor w2 = Ramp(DType::kF32, {3, 2, 3, 3}), b = Ramp(DType::kF32, {3});
  ExpectCudaMatchesCpu(*dev_, "ConvTranspose", {&x, &w2, &b});
  ExpectCudaMatchesCpu(*dev_, "ConvTranspose", {&x, &w2}, {{"group", int64_t{2}}});
  Tensor x64 = Tensor::CastOf(x.view(), DType::kF64).value(), w64 = Tensor::CastOf(w2.view(), DType::kF64).value();
  auto out = RunOpCuda(*dev_, "ConvTranspose", {&x64, &w64});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
}

TEST_F(CudaNnTest, PoolingModes) {
  const std::vector<std::pair<std::vector<int64_t>, Window>> cases = {
      {{2, 3, 9}, {{3}, {2}, {}, {1, 1}}},
      {{1, 2, 7, 6}, {{3, 3}, {2, 2}, {}, {}}},
      {{1, 2, 7, 6}, {{3, 2}, {2, 1}, {2, 1}, {1, 0, 2, 1}}},
      {{1, 1, 5, 5}, {{2, 2}, {2, 2}, {}, {}, "SAME_UPPER"}},
      {{1, 1, 5, 4}, {{3, 3}, {2, 3}, {}, {}, "SAME_LOWER"}},
      {{1, 1, 6, 5}, {{2, 2}, {}, {}, {}, "VALID"}},
      {{1, 2, 4, 5, 3}, {{2, 3, 2}, {1, 2, 2}, {}, {1, 0, 1, 0, 1, 1}}},
      {{1, 1, 3, 3}, {{3, 3}, {1, 1}, {}, {2, 2, 2, 2}}},  // windows wholly in the padding
  };
  for (const auto& [xs, w] : cases) {
    SCOPED_TRACE(::testing::PrintToString(xs));
    for (DType dt : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
      Tensor x = Ramp(dt, xs, 4);
      for (int64_t ceil : {0, 1}) {
        Attrs a = WindowAttrs(w, true);
        if (w.auto_pad.empty() || w.auto_pad == "NOTSET") a.push_back({"ceil_mode", ceil});
        EXPECT_TRUE(testing::RunOp("MaxPool", {&x}, a).ok());
        ExpectCudaMatchesCpu(*dev_, "MaxPool", {&x}, a, 1, 0);
        for (int64_t count_pad : {0, 1}) {
          Attrs avg = a;
          avg.push_back({"count_include_pad", count_pad});
          // oneDNN's CPU average (f32) sums in another order: an ulp.
          ExpectCudaMatchesCpu(*dev_, "AveragePool", {&x}, avg, 1, dt == DType::kF32 ? 1e-6 : 0);
        }
      }
    }
  }
}

TEST_F(CudaNnTest, MaxPoolIndicesAndIntegers) {
  Tensor x = Ramp(DType::kF32, {2, 2, 5, 6}, 7);
  for (int64_t order : {0, 1}) {
    ExpectCudaMatchesCpu(*dev_, "MaxPool", {&x},
                         {{"kernel_shape", std::vector<int64_t>{3, 2}},
                          {"strides", std::vector<int64_t>{2, 2}},
                          {"pads", std::vector<int64_t>{1, 0, 1, 1}},
                          {"storage_order", order}},
                         2, 0);
  }
  for (DType dt : {DType::kI8, DType::kU8}) {
    std::vector<float> v(2 * 3 * 4 * 5);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 53) % 200) - (dt == DType::kI8 ? 100 : 0);
    Tensor xi = Tensor::CastOf(MakeTensor<float>(DType::kF32, {2, 3, 4, 5}, v).view(), dt).value();
    ExpectCudaMatchesCpu(*dev_, "MaxPool", {&xi},
                         {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}},
                         2, 0);
    ExpectCudaMatchesCpu(*dev_, "AveragePool", {&xi}, {{"kernel_shape", std::vector<int64_t>{2, 2}}});  // CPU refuses
  }
  Tensor nan = MakeTensor<float>(DType::kF32, {1, 1, 2, 2}, {NAN, 1, 2, NAN});
  ExpectCudaMatchesCpu(*dev_, "MaxPool", {&nan}, {{"kernel_shape", std::vector<int64_t>{2, 1}}}, 2, 0);
  Tensor empty = Ramp(DType::kF32, {0, 2, 4, 4});
  ExpectCudaMatchesCpu(*dev_, "MaxPool", {&empty}, {{"kernel_shape", std::vector<int64_t>{2, 2}}}, 2, 0);
}

TEST_F(CudaNnTest, PoolErrors) {
  Tensor x = Ramp(DType::kF32, {1, 1, 4, 4});
  ExpectCudaMatchesCpu(*dev_, "MaxPool", {&x}, {});  // no kernel_shape
  ExpectCudaMatchesCpu(*dev_, "AveragePool", {&x}, {{"kernel_shape", std::vector<int64_t>{5, 5}}});
  ExpectCudaMatchesCpu(*dev_, "MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{2}}});
  Tensor x2 = Ramp(DType::kF32, {4, 4});
  ExpectCudaMatchesCpu(*dev_, "GlobalAveragePool", {&x2});
}

TEST_F(CudaNnTest, GlobalPools) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 3, 5}, {1, 4, 3, 7}, {2, 2, 2, 3, 2}, {0, 3, 4},
                                                               {2, 3, 0, 2}}) {
      Tensor x = Ramp(dt, shape, 5);
      ExpectCudaMatchesCpu(*dev_, "GlobalAveragePool", {&x}, {}, 1, x.dtype() == DType::kF32 ? 1e-6 : 0);
      ExpectCudaMatchesCpu(*dev_, "GlobalMaxPool", {&x}, {}, 1, 0);
    }
  }
  Tensor xi = Tensor::CastOf(Ramp(DType::kF32, {1, 2, 3}).view(), DType::kI8).value();
  ExpectCudaMatchesCpu(*dev_, "GlobalMaxPool", {&xi});  // CPU refuses integers
}

}  // namespace
}  // namespace grove
