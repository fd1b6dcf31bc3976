// The CUDA kernels of Softmax, LogSoftmax, LayerNormalization,
// InstanceNormalization and BatchNormalization on the emulated device
// against the CPU kernels: every axis (positive and negative), row lengths
// around the warp size and past the warp/block switch, many rows, NaN and
// infinities, broadcast Scale/B, the optional outputs, f16/bf16/f64, empty
// tensors and the error paths.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove {
namespace {

using ::grove::testing::Count;
using ::grove::testing::ExpectCudaMatchesCpu;
using ::grove::testing::MakeTensor;
using Shape = std::vector<int64_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor Data(const Shape& shape, uint32_t seed = 1, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(Count(shape));
  uint32_t s = seed * 2654435761u + 777u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = offset + scale * (static_cast<float>((s >> 8) % 20001) / 5000.0f - 2.0f);
  }
  return MakeTensor<float>(DType::kF32, shape, v);
}

Tensor Cast(const Tensor& t, DType d) { return Tensor::CastOf(t.view(), d).value(); }

double TolOf(DType d) { return d == DType::kBF16 ? 2e-2 : d == DType::kF16 ? 4e-3 : 1e-5; }

class CudaNormTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = testing::TestDevice();
};

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax
// ---------------------------------------------------------------------------

TEST_F(CudaNormTest, SoftmaxEveryAxis) {
  const Shape shapes[] = {{1}, {5}, {2, 3, 4}, {3, 1, 7}, {2, 3, 4, 5}};
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const Shape& shape : shapes) {
      const Tensor x = Data(shape, 2, 3.0f);
      const int rank = static_cast<int>(shape.size());
      for (int axis = -rank; axis < rank; ++axis) {
        SCOPED_TRACE(absl::StrCat(op, " rank ", rank, " axis ", axis));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{axis}}});
      }
    }
    const Tensor x = Data({3, 4}, 3);
    ExpectCudaMatchesCpu(*dev_, op, {&x});  // default axis -1
  }
}

TEST_F(CudaNormTest, SoftmaxRowLengths) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t n : {1, 5, 31, 32, 33, 100, 513, 1000}) {
      for (int64_t rows : {1, 3, 70}) {
        if (rows * n > 20000) continue;
        const Tensor x = Data({rows, n}, 5, 4.0f);
        SCOPED_TRACE(absl::StrCat(op, " rows ", rows, " n ", n));
        ExpectCudaMatchesCpu(*dev_, op, {&x});
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{0}}});
      }
    }
    const Tensor f64 = Cast(Data({7, 300}, 6, 10.0f), DType::kF64);
    ExpectCudaMatchesCpu(*dev_, op, {&f64}, {}, 1, 1e-12);
    ExpectCudaMatchesCpu(*dev_, op, {&f64}, {{"axis", int64_t{0}}}, 1, 1e-12);
    // Large values: the max shift keeps exp finite.
    const Tensor big = Data({4, 50}, 7, 200.0f);
    ExpectCudaMatchesCpu(*dev_, op, {&big});
  }
}

// f16 and bf16 compute in f32 and round once, on both backends.
TEST_F(CudaNormTest, SoftmaxHalfTypes) {
  for (DType d : {DType::kF16, DType::kBF16}) {
    const Tensor x = Cast(Data({3, 40, 5}, 8, 4.0f), d);
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      for (int64_t axis : {-1, 1, 0}) {
        SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(d), " axis ", axis));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", axis}}, 1, TolOf(d));
      }
    }
  }
}

TEST_F(CudaNormTest, SoftmaxNaNAndInfinities) {
  const std::vector<float> v = {1, kNaN, 3, 4,       // a NaN
                                -kInf, -kInf, -kInf, -kInf,  // all -inf
                                -kInf, 1, 2, -kInf,  // some -inf
                                kInf, 1, 2, 3,       // +inf
                                kNaN, kNaN, kNaN, kNaN, 0, 0, 0, 0};
  const Tensor x = MakeTensor<float>(DType::kF32, {6, 4}, v);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    ExpectCudaMatchesCpu(*dev_, op, {&x});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{0}}});
    std::vector<float> lr(2 * 800, -kInf);
    for (int i = 0; i < 800; ++i) lr[i] = static_cast<float>(i % 17) * 0.5f;
    lr[1000] = 3.0f;
    const Tensor longrows = MakeTensor<float>(DType::kF32, {2, 800}, lr);
    ExpectCudaMatchesCpu(*dev_, op, {&longrows});
    lr[123] = kNaN;
    const Tensor nanrow = MakeTensor<float>(DType::kF32, {2, 800}, lr);
    ExpectCudaMatchesCpu(*dev_, op, {&nanrow});
  }
}

TEST_F(CudaNormTest, SoftmaxEmptyAndErrors) {
  const Tensor e = MakeTensor<float>(DType::kF32, {0, 3}, {});
  const Tensor e2 = MakeTensor<float>(DType::kF32, {3, 0}, {});
  const Tensor scalar = MakeTensor<float>(DType::kF32, {}, {1.0f});
  const Tensor x = Data({3, 4});
  const Tensor half = Cast(x, DType::kF16);
  const Tensor ints = Cast(x, DType::kI32);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {0, 1, -1}) {
      ExpectCudaMatchesCpu(*dev_, op, {&e}, {{"axis", axis}});
      ExpectCudaMatchesCpu(*dev_, op, {&e2}, {{"axis", axis}});
    }
    ExpectCudaMatchesCpu(*dev_, op, {&scalar});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{2}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{-3}}});
    ExpectCudaMatchesCpu(*dev_, op, {&half});
    ExpectCudaMatchesCpu(*dev_, op, {&ints});
  }
}

// ---------------------------------------------------------------------------
// LayerNormalization
// ---------------------------------------------------------------------------

TEST_F(CudaNormTest, LayerNormEveryAxisWithStats) {
  const Shape shapes[] = {{5}, {3, 33}, {2, 3, 4}, {2, 1, 3, 5}};
  for (const Shape& shape : shapes) {
    const Tensor x = Data(shape, 3, 2.0f, 0.5f);
    const int rank = static_cast<int>(shape.size());
    for (int axis = -rank; axis < rank; ++axis) {
      const int a = axis < 0 ? axis + rank : axis;
      const Shape norm(shape.begin() + a, shape.end());
      const Tensor scale = Data(norm, 4);
      const Tensor bias = Data(norm, 5);
      SCOPED_TRACE(absl::StrCat("rank ", rank, " axis ", axis));
      ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale, &bias}, {{"axis", int64_t{axis}}}, 3);
      ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale}, {{"axis", int64_t{axis}}}, 1);
      ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale, nullptr},
                           {{"axis", int64_t{axis}}, {"epsilon", 0.25}}, 2);
    }
  }
}

TEST_F(CudaNormTest, LayerNormRowLengthsAndBroadcast) {
  for (int64_t n : {1, 5, 31, 33, 100, 600, 1000}) {
    for (int64_t rows : {1, 4, 50}) {
      if (rows * n > 20000) continue;
      const Tensor x = Data({rows, n}, 8, 3.0f, 1.0f);
      const Tensor scale = Data({n}, 9);
      const Tensor bias = Data({n}, 10);
      SCOPED_TRACE(absl::StrCat("rows ", rows, " n ", n));
      ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale, &bias}, {}, 3);
    }
  }
  // Scale and B broadcast onto the normalized dims [3, 4, 5].
  const Tensor x = Data({2, 3, 4, 5}, 11);
  const Shape scale_shapes[] = {{1}, {5}, {4, 1}, {3, 1, 5}, {1, 4, 5}, {3, 4, 5}};
  for (const Shape& ss : scale_shapes) {
    for (const Shape& bs : scale_shapes) {
      const Tensor scale = Data(ss, 12);
      const Tensor bias = Data(bs, 13);
      ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale, &bias}, {{"axis", int64_t{1}}});
    }
  }
}

TEST_F(CudaNormTest, LayerNormDTypes) {
  const Tensor f = Data({6, 45}, 14, 2.0f);
  const Tensor s = Data({45}, 15);
  const Tensor b = Data({45}, 16);
  for (DType d : {DType::kF64, DType::kF16, DType::kBF16}) {
    const Tensor x = Cast(f, d), scale = Cast(s, d), bias = Cast(b, d);
    ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &scale, &bias}, {}, 3, TolOf(d));
  }
  const Tensor x16 = Cast(f, DType::kF16);
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x16, &s, &b});  // Scale's dtype differs: refused
}

TEST_F(CudaNormTest, LayerNormEmptyAndErrors) {
  const Tensor e = MakeTensor<float>(DType::kF32, {0, 4}, {});
  const Tensor s4 = Data({4});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&e, &s4, &s4}, {}, 3);
  const Tensor e2 = MakeTensor<float>(DType::kF32, {3, 0}, {});
  const Tensor s0 = MakeTensor<float>(DType::kF32, {0}, {});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&e2, &s0, &s0}, {}, 3);
  const Tensor x = Data({3, 4});
  const Tensor s5 = Data({5});
  const Tensor s34x = Data({2, 3, 4});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s5});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s4, &s5});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s34x});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s4}, {{"axis", int64_t{2}}});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s4}, {{"axis", int64_t{-3}}});
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&x, &s4}, {{"stash_type", int64_t{0}}});
  const Tensor ints = Cast(x, DType::kI32);
  ExpectCudaMatchesCpu(*dev_, "LayerNormalization", {&ints, &s4});
}

// ---------------------------------------------------------------------------
// InstanceNormalization, BatchNormalization
// ---------------------------------------------------------------------------

TEST_F(CudaNormTest, InstanceNorm) {
  const Shape shapes[] = {{1, 1, 1}, {2, 3, 5}, {2, 3, 4, 5}, {1, 2, 1000}, {3, 2, 33}, {1, 4, 2, 3, 2}};
  for (const Shape& shape : shapes) {
    const Tensor x = Data(shape, 17, 2.0f, -0.5f);
    const Tensor scale = Data({shape[1]}, 18);
    const Tensor bias = Data({shape[1]}, 19);
    ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&x, &scale, &bias});
    ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&x, &scale, &bias}, {{"epsilon", 0.1}});
  }
  const Tensor f = Data({2, 3, 37}, 20);
  const Tensor s = Data({3}, 21), b = Data({3}, 22);
  for (DType d : {DType::kF64, DType::kF16, DType::kBF16}) {
    const Tensor x = Cast(f, d), scale = Cast(s, d), bias = Cast(b, d);
    ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&x, &scale, &bias}, {}, 1, TolOf(d));
  }
  const Tensor e = MakeTensor<float>(DType::kF32, {0, 3, 4}, {});
  const Tensor e2 = MakeTensor<float>(DType::kF32, {2, 3, 0}, {});
  ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&e, &s, &b});
  ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&e2, &s, &b});
  const Tensor x2 = Data({2, 3});
  const Tensor s4 = Data({4});
  ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&x2, &s, &b});   // rank < 3
  ExpectCudaMatchesCpu(*dev_, "InstanceNormalization", {&f, &s4, &b});   // wrong channels
}

TEST_F(CudaNormTest, BatchNorm) {
  const Shape shapes[] = {{1, 1}, {4, 3}, {2, 3, 5}, {2, 3, 4, 5}, {1, 5, 33}};
  for (const Shape& shape : shapes) {
    const int64_t c = shape[1];
    const Tensor x = Data(shape, 23, 2.0f);
    const Tensor scale = Data({c}, 24), bias = Data({c}, 25), mean = Data({c}, 26);
    const Tensor var = Data({c}, 27, 0.2f, 1.0f);  // positive
    ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&x, &scale, &bias, &mean, &var});
    ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&x, &scale, &bias, &mean, &var}, {{"epsilon", 0.01}});
  }
  // Parameters of other float dtypes than X's.
  const Tensor f = Data({2, 3, 7}, 28);
  const Tensor s = Data({3}, 29), b = Data({3}, 30), m = Data({3}, 31), v = Data({3}, 32, 0.2f, 1.0f);
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    const Tensor x = Cast(f, d);
    const Tensor s16 = Cast(s, DType::kF16), b64 = Cast(b, DType::kF64), mbf = Cast(m, DType::kBF16);
    ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&x, &s16, &b64, &mbf, &v}, {}, 1, TolOf(d));
    const Tensor sd = Cast(s, d), bd = Cast(b, d), md = Cast(m, d), vd = Cast(v, d);
    ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&x, &sd, &bd, &md, &vd}, {}, 1, TolOf(d));
  }
  const Tensor e = MakeTensor<float>(DType::kF32, {0, 3, 4}, {});
  ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&e, &s, &b, &m, &v});
  const Tensor s4 = Data({4});
  const Tensor x1 = Data({3});
  ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&f, &s4, &b, &m, &v});
  ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&x1, &s, &b, &m, &v});
  // Training mode: plans run it on the CPU (OpDef::backend_takes); the CUDA
  // kernel itself refuses it.
  absl::StatusOr<std::vector<Tensor>> training =
      testing::RunOpCuda(*dev_, "BatchNormalization", {&f, &s, &b, &m, &v}, {{"training_mode", int64_t{1}}});
  ASSERT_FALSE(training.ok());
  EXPECT_NE(training.status().message().find("the CUDA kernel normalizes with the given statistics only"),
            absl::string_view::npos);
  const Tensor ints = Cast(f, DType::kI32);
  ExpectCudaMatchesCpu(*dev_, "BatchNormalization", {&ints, &s, &b, &m, &v});
}

}  // namespace
}  // namespace grove
