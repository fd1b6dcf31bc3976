// CUDA MatMul and Gemm on the emulated device against the CPU kernels:
// batch broadcasting (every way the batched GEMM strides fold), 1-D
// operands, every Gemm C shape and attribute, halves, empty tensors, and
// the dtypes the CUDA kernels leave to the CPU.
#include <cmath>
#include <cstdint>
#include <string>
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

class CudaLinalgTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = testing::TestDevice();

  // `valid`: the CPU accepts the call (so the comparison is not vacuous).
  void ExpectMatMul(std::vector<int64_t> sa, std::vector<int64_t> sb, DType dt = DType::kF32, bool valid = true) {
    SCOPED_TRACE(::testing::Message() << "MatMul " << ::testing::PrintToString(sa) << " x "
                                      << ::testing::PrintToString(sb) << " " << DTypeName(dt));
    Tensor a = Ramp(dt, sa, 1), b = Ramp(dt, sb, 2);
    EXPECT_EQ(testing::RunOp("MatMul", {&a, &b}).ok(), valid);
    ExpectCudaMatchesCpu(*dev_, "MatMul", {&a, &b}, {}, 1, dt == DType::kF32 ? 1e-5 : 1e-2);
  }
};

TEST_F(CudaLinalgTest, MatMulPlainAndVectors) {
  ExpectMatMul({3, 5}, {5, 7});
  ExpectMatMul({1, 1}, {1, 1});
  ExpectMatMul({5}, {5, 3});        // vector x matrix
  ExpectMatMul({4, 5}, {5});        // matrix x vector
  ExpectMatMul({6}, {6});           // dot product, rank-0 result
  ExpectMatMul({5}, {2, 5, 3});     // vector x batch
  ExpectMatMul({2, 3, 4, 5}, {5});  // batch x vector
}

TEST_F(CudaLinalgTest, MatMulBatchBroadcasting) {
  ExpectMatMul({2, 3, 4, 5}, {2, 3, 5, 6});  // equal batches: one strided GEMM
  ExpectMatMul({2, 3, 4, 5}, {5, 6});        // shared B: one tall GEMM
  ExpectMatMul({4, 5}, {3, 5, 6});           // shared A: stride 0
  ExpectMatMul({3, 1, 4, 5}, {1, 2, 5, 3});  // both broadcast
  ExpectMatMul({1, 3, 4, 5}, {2, 1, 5, 3});
  ExpectMatMul({2, 1, 3, 2, 3}, {4, 1, 3, 2});
  ExpectMatMul({1, 1, 2, 3}, {2, 3, 3, 1});
  ExpectMatMul({2, 3, 1, 4}, {1, 3, 4, 2});  // m = 1
}

TEST_F(CudaLinalgTest, MatMulHalvesAndEmpty) {
  for (DType dt : {DType::kF16, DType::kBF16}) {
    ExpectMatMul({2, 3, 4, 5}, {2, 3, 5, 6}, dt);
    ExpectMatMul({3, 1, 4, 5}, {1, 2, 5, 3}, dt);
    ExpectMatMul({7}, {7, 3}, dt);
  }
  ExpectMatMul({0, 4, 5}, {5, 3});
  ExpectMatMul({2, 4, 5}, {5, 0});
  ExpectMatMul({2, 4, 0}, {0, 3});  // K = 0: zeros
  ExpectMatMul({3, 0}, {0});
}

TEST_F(CudaLinalgTest, MatMulErrorsAndCpuOnlyDTypes) {
  ExpectMatMul({3, 4}, {5, 6}, DType::kF32, false);        // K differs
  ExpectMatMul({2, 3, 4}, {3, 4, 5}, DType::kF32, false);  // batches do not broadcast
  Tensor a = Ramp(DType::kF32, {2, 3}), b16 = Ramp(DType::kF16, {3, 2});
  ExpectCudaMatchesCpu(*dev_, "MatMul", {&a, &b16});
  for (DType dt : {DType::kF64, DType::kI64, DType::kI32}) {
    Tensor x = Tensor::CastOf(Ramp(DType::kF32, {2, 3}).view(), dt).value();
    Tensor y = Tensor::CastOf(Ramp(DType::kF32, {3, 2}).view(), dt).value();
    auto out = RunOpCuda(*dev_, "MatMul", {&x, &y});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
  }
}

TEST_F(CudaLinalgTest, GemmAttributesAndEveryCShape) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    const double tol = dt == DType::kF32 ? 1e-5 : 1e-2;
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        const int64_t m = 3, k = 5, n = 4;
        Tensor a = Ramp(dt, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, 1);
        Tensor b = Ramp(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 2);
        const std::vector<std::vector<int64_t>> c_shapes = {{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
        for (const auto& cs : c_shapes) {
          for (double beta : {1.0, 0.5, 0.0}) {
            SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " transA " << ta << " transB " << tb << " C "
                                              << ::testing::PrintToString(cs) << " beta " << beta);
            Tensor c = Ramp(dt, cs, 3);
            EXPECT_TRUE(testing::RunOp("Gemm", {&a, &b, &c}, {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}}).ok());
            ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b, &c},
                                 {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", 0.75}, {"beta", beta}},
                                 1, tol);
          }
        }
        ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b, nullptr}, {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}}, 1,
                             tol);
      }
    }
  }
}

TEST_F(CudaLinalgTest, GemmEdgeCases) {
  Tensor a = Ramp(DType::kF32, {3, 0}), b = Ramp(DType::kF32, {0, 4}), c = Ramp(DType::kF32, {3, 1});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b, &c}, {{"beta", 2.0}});  // K = 0: beta * C
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b, nullptr});
  Tensor a0 = Ramp(DType::kF32, {0, 5}), b0 = Ramp(DType::kF32, {5, 4});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a0, &b0});
  // NaN in C with beta 0 is not read.
  Tensor a1 = Ramp(DType::kF32, {2, 3}), b1 = Ramp(DType::kF32, {3, 2});
  Tensor cn = MakeTensor<float>(DType::kF32, {2, 2}, {NAN, 1, 2, NAN});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a1, &b1, &cn}, {{"beta", 0.0}});
  // Odd sizes.
  Tensor a2 = Ramp(DType::kF32, {17, 9}), b2 = Ramp(DType::kF32, {13, 9}), c2 = Ramp(DType::kF32, {13});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a2, &b2, &c2}, {{"transB", int64_t{1}}});
}

TEST_F(CudaLinalgTest, GemmErrorsAndCpuOnlyDTypes) {
  Tensor a = Ramp(DType::kF32, {3, 4}), b = Ramp(DType::kF32, {5, 2});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b});  // K differs
  Tensor b2 = Ramp(DType::kF32, {4, 2}), c = Ramp(DType::kF32, {2, 2});
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a, &b2, &c});  // C does not broadcast
  Tensor a64 = Tensor::CastOf(a.view(), DType::kF64).value(), b64 = Tensor::CastOf(b2.view(), DType::kF64).value();
  auto out = RunOpCuda(*dev_, "Gemm", {&a64, &b64});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
}

TEST_F(CudaLinalgTest, BatchedMatMulUsesFewGemms) {
  Tensor a = Ramp(DType::kF32, {2, 3, 4, 5}), b = Ramp(DType::kF32, {2, 3, 5, 6});
  const int64_t before = dev_->stats().gemms;
  ASSERT_TRUE(RunOpCuda(*dev_, "MatMul", {&a, &b}).ok());
  EXPECT_EQ(dev_->stats().gemms - before, 1);
  Tensor c = Ramp(DType::kF32, {3, 1, 4, 5}), d = Ramp(DType::kF32, {1, 2, 5, 6});
  const int64_t before2 = dev_->stats().gemms;
  ASSERT_TRUE(RunOpCuda(*dev_, "MatMul", {&c, &d}).ok());
  EXPECT_EQ(dev_->stats().gemms - before2, 3);  // one batched GEMM per row of A's batch
}

// Decode shapes (M <= 64, a large weight): the cost model prefers the gemv
// family (jit/kernels/gemv.cuh) to the vendor GEMM; the step keeps its
// semantics (batch, transposed B, alpha/beta, bias). Small products keep
// the GEMM.
TEST_F(CudaLinalgTest, DecodeShapesRunTheGemvKernel) {
  const int64_t k = 2048, n = 2048;
  Tensor a = Ramp(DType::kF32, {1, k}, 1), b = Ramp(DType::kF32, {k, n}, 2);
  int64_t gemms = dev_->stats().gemms, launches = dev_->stats().launches;
  ExpectCudaMatchesCpu(*dev_, "MatMul", {&a, &b}, {}, 1, 1e-5);
  EXPECT_EQ(dev_->stats().gemms - gemms, 0);
  EXPECT_GE(dev_->stats().launches - launches, 1);

  Tensor a2 = Ramp(DType::kF32, {2, k}, 3), bt = Ramp(DType::kF32, {n, k}, 4), c = Ramp(DType::kF32, {n}, 5);
  gemms = dev_->stats().gemms;
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a2, &bt, &c}, {{"transB", int64_t{1}}, {"alpha", 0.5}}, 1, 1e-5);
  ExpectCudaMatchesCpu(*dev_, "Gemm", {&a2, &bt, &c}, {{"transB", int64_t{1}}, {"beta", 0.25}}, 1, 1e-5);
  EXPECT_EQ(dev_->stats().gemms - gemms, 0);

  Tensor small_a = Ramp(DType::kF32, {1, 16}), small_b = Ramp(DType::kF32, {16, 8});
  gemms = dev_->stats().gemms;
  ExpectCudaMatchesCpu(*dev_, "MatMul", {&small_a, &small_b});
  EXPECT_EQ(dev_->stats().gemms - gemms, 1);
}

}  // namespace
}  // namespace grove
