// The CUDA kernels of the Reduce* ops, ArgMax/ArgMin and CumSum on the
// emulated device against the CPU kernels: odd row lengths (warp and block
// per row), every axis subset (positive and negative, adjacent or not),
// keepdims, axes as attribute and as input (host values or device only),
// integer wrapping, f16/bf16, NaN and infinities, empty tensors and
// reductions, and the error paths.
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
using ::grove::testing::RunOpCuda;
using Shape = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Multiples of 1/16 in [-4, 4): f32 sums of a few thousand are exact, so the
// device's f32 accumulation matches the CPU's f64 one.
Tensor Data(const Shape& shape, uint32_t seed = 1) {
  std::vector<float> v(Count(shape));
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>((s >> 9) % 128) - 64) / 16.0f;
  }
  return MakeTensor<float>(DType::kF32, shape, v);
}

// Values near 1 (products stay finite).
Tensor NearOne(const Shape& shape, uint32_t seed = 3) {
  std::vector<float> v(Count(shape));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = 0.9f + static_cast<float>((s >> 9) % 200) / 1000.0f;
  }
  return MakeTensor<float>(DType::kF32, shape, v);
}

Tensor Cast(const Tensor& t, DType d) { return Tensor::CastOf(t.view(), d).value(); }

Tensor I64s(const std::vector<int64_t>& v) {
  return MakeTensor<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v);
}

class CudaReduceTest : public ::testing::Test {
 protected:
  std::shared_ptr<cuda::Device> dev_ = testing::TestDevice();
};

const char* const kAllReduce[] = {"ReduceSum", "ReduceMean",      "ReduceMax",    "ReduceMin",
                                  "ReduceProd", "ReduceL1",       "ReduceL2",     "ReduceSumSquare",
                                  "ReduceLogSum", "ReduceLogSumExp"};

// Inputs for which every reduction is well defined and exact enough.
Tensor InputFor(const std::string& op, const Shape& shape) {
  if (op == "ReduceProd") return NearOne(shape);
  if (op == "ReduceLogSum") return NearOne(shape, 5);  // positive sums
  return Data(shape);
}

double TolFor(const std::string& op) { return op == "ReduceProd" ? 1e-4 : 1e-5; }

// Every subset of dims (as positive or as negative axes) with keepdims 0
// and 1, axes as the attribute.
TEST_F(CudaReduceTest, EveryOpEveryAxisSubset) {
  const Shape shapes[] = {{5}, {31}, {4, 33}, {3, 1, 5}, {2, 3, 4, 5}};
  for (const char* op : kAllReduce) {
    for (const Shape& shape : shapes) {
      const Tensor x = InputFor(op, shape);
      const int rank = static_cast<int>(shape.size());
      for (int mask = 1; mask < (1 << rank); ++mask) {
        for (int64_t keep : {0, 1}) {
          // Negative axes on every other case.
          const int neg = static_cast<int>((mask + keep) % 2);
          std::vector<int64_t> axes;
          for (int d = 0; d < rank; ++d) {
            if (mask & (1 << d)) axes.push_back(neg ? d - rank : d);
          }
          SCOPED_TRACE(absl::StrCat(op, " shape rank ", rank, " mask ", mask, " neg ", neg, " keep ", keep));
          ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", axes}, {"keepdims", keep}}, 1, TolFor(op));
        }
      }
    }
  }
}

// Row lengths around the warp size and past the warp/block switch, many
// rows; the last axis (rows), the first (columns) and all.
TEST_F(CudaReduceTest, OddRowLengths) {
  for (const char* op : kAllReduce) {
    for (int64_t n : {1, 5, 31, 32, 33, 100, 513, 1000}) {
      for (int64_t rows : {1, 3, 67}) {
        if (rows * n > 20000) continue;
        const Shape shape{rows, n};
        const Tensor x = InputFor(op, shape);
        SCOPED_TRACE(absl::StrCat(op, " rows ", rows, " n ", n));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{-1}}}, 1, TolFor(op));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}, 1,
                             TolFor(op));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {}, 1, TolFor(op));
      }
    }
  }
}

TEST_F(CudaReduceTest, NonAdjacentAxesLongRows) {
  const Tensor x = Data({3, 40, 2, 30});
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceMean"}) {
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{1, 3}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{-3, -1}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{0, 1, 3}}});
  }
}

// Axes as input 1 (opset 18), from host copies and from the device only,
// i64 and i32, empty axes with and without noop_with_empty_axes.
TEST_F(CudaReduceTest, AxesAsInput) {
  const Tensor axes_sets[] = {I64s({1}), I64s({-1, 0}), I64s({0, 2}), I64s({}),
                              MakeTensor<int32_t>(DType::kI32, {2}, {2, -2})};
  for (const char* op : kAllReduce) {
    const Tensor in = InputFor(op, {3, 4, 5});
    for (const Tensor& axes : axes_sets) {
      for (bool host : {true, false}) {
        for (int64_t keep : {0, 1}) {
          for (int64_t noop : {0, 1}) {
            SCOPED_TRACE(absl::StrCat(op, " host ", host, " keep ", keep, " noop ", noop));
            ExpectCudaMatchesCpu(*dev_, op, {&in, &axes}, {{"keepdims", keep}, {"noop_with_empty_axes", noop}}, 1,
                                 TolFor(op), {.host_values = host});
          }
        }
      }
    }
  }
}

TEST_F(CudaReduceTest, NoopWithEmptyAxesAppliesTheElementFunction) {
  const Tensor x = NearOne({4, 7});
  for (const char* op : kAllReduce) {
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"noop_with_empty_axes", int64_t{1}}});
  }
}

TEST_F(CudaReduceTest, HalfTypes) {
  const Tensor f = Data({6, 37});
  for (DType d : {DType::kF16, DType::kBF16}) {
    const Tensor x = Cast(f, d);
    const Tensor p = Cast(NearOne({6, 37}), d);
    const double tol = d == DType::kF16 ? 2e-3 : 1e-2;
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
                           "ReduceSumSquare", "ReduceLogSumExp"}) {
      for (int64_t axis : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(d), " axis ", axis));
        ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{axis}}}, 1, tol);
      }
    }
    for (const char* op : {"ReduceProd", "ReduceLogSum"}) {
      ExpectCudaMatchesCpu(*dev_, op, {&p}, {{"axes", std::vector<int64_t>{1}}}, 1, tol);
    }
    ExpectCudaMatchesCpu(*dev_, "ReduceSum", {&x}, {}, 1, tol);  // every axis
    ExpectCudaMatchesCpu(*dev_, "ReduceMean", {&x}, {}, 1, tol);
  }
}

// Integer reductions: wrapping sums and products, |MIN| wrapping in L1, the
// real-valued ones (L2, logs) truncated, max/min of every integer type.
TEST_F(CudaReduceTest, IntegerTypes) {
  const std::vector<int64_t> big = {std::numeric_limits<int64_t>::max(), 5, std::numeric_limits<int64_t>::min(),
                                    -7, 3, 9, 1LL << 62, -(1LL << 40), 11, 2, 17, -3};
  const Tensor i64 = MakeTensor<int64_t>(DType::kI64, {3, 4}, big);
  std::vector<int32_t> v32 = {std::numeric_limits<int32_t>::min(), 2147483000, 1000, -5, 77, 3, 9, -100000,
                              65536, 65536, 3, 1};
  const Tensor i32 = MakeTensor<int32_t>(DType::kI32, {3, 4}, v32);
  const Tensor small = Cast(MakeTensor<float>(DType::kF32, {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), DType::kI64);
  for (const Tensor* x : {&i64, &i32}) {
    for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"}) {
      for (int64_t axis : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(x->dtype()), " axis ", axis));
        ExpectCudaMatchesCpu(*dev_, op, {x}, {{"axes", std::vector<int64_t>{axis}}});
      }
    }
    ExpectCudaMatchesCpu(*dev_, "ReduceMean", {x});  // refused by both
  }
  for (const char* op : {"ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum", "ReduceProd"}) {
    ExpectCudaMatchesCpu(*dev_, op, {&small}, {{"axes", std::vector<int64_t>{1}}});
    ExpectCudaMatchesCpu(*dev_, op, {&small});
  }
  // L2 of huge values saturates; LogSumExp of i32.
  ExpectCudaMatchesCpu(*dev_, "ReduceL2", {&i64}, {{"axes", std::vector<int64_t>{1}}});
  ExpectCudaMatchesCpu(*dev_, "ReduceLogSumExp", {&i32}, {{"axes", std::vector<int64_t>{0}}});
  for (DType d : {DType::kI8, DType::kU8}) {
    const Tensor x = Cast(Data({5, 33}), DType::kI32);
    std::vector<int32_t> raw(x.as<int32_t>(), x.as<int32_t>() + 5 * 33);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<int32_t>((i * 37) % 256) - (d == DType::kI8 ? 128 : 0);
    const Tensor xi = Cast(MakeTensor<int32_t>(DType::kI32, {5, 33}, raw), d);
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      for (int64_t axis : {0, 1}) ExpectCudaMatchesCpu(*dev_, op, {&xi}, {{"axes", std::vector<int64_t>{axis}}});
    }
    ExpectCudaMatchesCpu(*dev_, "ReduceSum", {&xi});  // refused by both
  }
  ExpectCudaMatchesCpu(*dev_, "ReduceSum", {&small}, {{"axes", std::vector<int64_t>{0}}}, 1, 0,
                       {.host_values = false});
}

TEST_F(CudaReduceTest, NaNAndInfinities) {
  std::vector<float> v = {1,    kNaN, 3,     -kInf, -kInf, -kInf, 2,    kInf,  -1, 4,  5,     6,
                          kNaN, kNaN, -kInf, 0,     kInf,  kInf,  -kInf, kInf, 7, -2, -kInf, 1};
  const Tensor x = MakeTensor<float>(DType::kF32, {6, 4}, v);
  for (const char* op : kAllReduce) {
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(absl::StrCat(op, " axis ", axis));
      ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{axis}}});
    }
  }
  // A long row with one NaN (block per row) and one with -inf only.
  std::vector<float> longrow(2 * 700, -kInf);
  for (int i = 0; i < 700; ++i) longrow[i] = static_cast<float>(i % 13);
  longrow[400] = kNaN;
  const Tensor lr = MakeTensor<float>(DType::kF32, {2, 700}, longrow);
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceSum"}) {
    ExpectCudaMatchesCpu(*dev_, op, {&lr}, {{"axes", std::vector<int64_t>{1}}});
  }
}

// Zero-size dims: empty reductions give the identity, empty outputs nothing.
TEST_F(CudaReduceTest, EmptyTensors) {
  const Tensor e03 = MakeTensor<float>(DType::kF32, {0, 3}, {});
  const Tensor e30 = MakeTensor<float>(DType::kF32, {3, 0}, {});
  const Tensor e0 = MakeTensor<float>(DType::kF32, {0}, {});
  const Tensor e_i8 = Cast(e30, DType::kI8);
  const Tensor e_u8 = Cast(e30, DType::kU8);
  for (const char* op : kAllReduce) {
    for (const Tensor* x : {&e03, &e30}) {
      for (int64_t axis : {0, 1}) {
        for (int64_t keep : {0, 1}) {
          SCOPED_TRACE(absl::StrCat(op, " axis ", axis, " keep ", keep));
          ExpectCudaMatchesCpu(*dev_, op, {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", keep}});
        }
      }
    }
    ExpectCudaMatchesCpu(*dev_, op, {&e0});
    ExpectCudaMatchesCpu(*dev_, op, {&e0}, {{"keepdims", int64_t{0}}});
  }
  for (const Tensor* x : {&e_i8, &e_u8}) {
    ExpectCudaMatchesCpu(*dev_, "ReduceMax", {x}, {{"axes", std::vector<int64_t>{1}}});
    ExpectCudaMatchesCpu(*dev_, "ReduceMin", {x}, {{"axes", std::vector<int64_t>{1}}});
  }
  const Tensor scalar = MakeTensor<float>(DType::kF32, {}, {2.5f});
  for (const char* op : kAllReduce) ExpectCudaMatchesCpu(*dev_, op, {&scalar});
}

TEST_F(CudaReduceTest, Errors) {
  const Tensor x = Data({3, 4});
  const Tensor bad_axes = MakeTensor<float>(DType::kF32, {1}, {0.0f});
  const Tensor axes5 = I64s({5});
  const Tensor twice = I64s({1, -1});
  for (const char* op : kAllReduce) {
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{2}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axes", std::vector<int64_t>{0, -2}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x, &bad_axes});
    ExpectCudaMatchesCpu(*dev_, op, {&x, &axes5});
    ExpectCudaMatchesCpu(*dev_, op, {&x, &twice});
    ExpectCudaMatchesCpu(*dev_, op, {&x, &twice}, {{"axes", std::vector<int64_t>{0}}});
  }
  // An axis out of range seen only on the device still fails cleanly.
  absl::StatusOr<std::vector<Tensor>> r = RunOpCuda(*dev_, "ReduceSum", {&x, &axes5}, {}, 1, {.host_values = false});
  EXPECT_FALSE(r.ok());
}

// ---------------------------------------------------------------------------
// ArgMax / ArgMin
// ---------------------------------------------------------------------------

TEST_F(CudaReduceTest, ArgMaxArgMin) {
  const Shape shapes[] = {{1}, {5}, {33}, {1000}, {7, 31}, {3, 100}, {2, 3, 4}, {4, 600}};
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (const Shape& shape : shapes) {
      // Coarse values so that ties are common.
      const Tensor x = Cast(Cast(Data(shape, 9), DType::kI32), DType::kF32);
      const int rank = static_cast<int>(shape.size());
      for (int axis = -rank; axis < rank; ++axis) {
        for (int64_t keep : {0, 1}) {
          for (int64_t last : {0, 1}) {
            SCOPED_TRACE(absl::StrCat(op, " rank ", rank, " axis ", axis, " keep ", keep, " last ", last));
            ExpectCudaMatchesCpu(*dev_, op, {&x},
                                 {{"axis", int64_t{axis}}, {"keepdims", keep}, {"select_last_index", last}});
          }
        }
      }
    }
  }
}

TEST_F(CudaReduceTest, ArgMaxDTypesAndNaN) {
  const Tensor f = Cast(Cast(Data({6, 40}, 4), DType::kI32), DType::kF32);
  for (DType d : {DType::kF16, DType::kBF16, DType::kF64, DType::kI64, DType::kI32, DType::kI8, DType::kU8}) {
    const Tensor x = Cast(f, d);
    for (const char* op : {"ArgMax", "ArgMin"}) {
      for (int64_t axis : {0, 1}) {
        for (int64_t last : {0, 1}) {
          ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", axis}, {"select_last_index", last}});
        }
      }
    }
  }
  std::vector<float> v = {1, kNaN, 3, kNaN, -kInf, -kInf, kInf, kInf, 2, 2, 2, 2};
  const Tensor x = MakeTensor<float>(DType::kF32, {3, 4}, v);
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t axis : {0, 1}) {
      for (int64_t last : {0, 1}) ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", axis}, {"select_last_index", last}});
    }
  }
  std::vector<float> lr(900, 1.0f);
  lr[13] = kNaN;
  lr[800] = kNaN;
  const Tensor longrow = MakeTensor<float>(DType::kF32, {1, 900}, lr);
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t last : {0, 1}) ExpectCudaMatchesCpu(*dev_, op, {&longrow}, {{"axis", int64_t{1}}, {"select_last_index", last}});
  }
}

TEST_F(CudaReduceTest, ArgMaxEmptyAndErrors) {
  const Tensor e03 = MakeTensor<float>(DType::kF32, {0, 3}, {});
  const Tensor scalar = MakeTensor<float>(DType::kF32, {}, {1.0f});
  const Tensor x = Data({3, 4});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    ExpectCudaMatchesCpu(*dev_, op, {&e03}, {{"axis", int64_t{1}}});  // empty output
    ExpectCudaMatchesCpu(*dev_, op, {&e03}, {{"axis", int64_t{0}}});  // no index to give
    ExpectCudaMatchesCpu(*dev_, op, {&scalar});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{2}}});
    ExpectCudaMatchesCpu(*dev_, op, {&x}, {{"axis", int64_t{-3}}});
  }
}

// ---------------------------------------------------------------------------
// CumSum
// ---------------------------------------------------------------------------

TEST_F(CudaReduceTest, CumSum) {
  const Shape shapes[] = {{1}, {5}, {33}, {1000}, {7, 31}, {2, 3, 4}};
  for (const Shape& shape : shapes) {
    const Tensor x = Data(shape, 2);
    const int rank = static_cast<int>(shape.size());
    for (int axis = -rank; axis < rank; ++axis) {
      const Tensor at = I64s({axis});
      const Tensor at32 = MakeTensor<int32_t>(DType::kI32, {}, {axis});
      for (int64_t excl : {0, 1}) {
        for (int64_t rev : {0, 1}) {
          SCOPED_TRACE(absl::StrCat("rank ", rank, " axis ", axis, " excl ", excl, " rev ", rev));
          ExpectCudaMatchesCpu(*dev_, "CumSum", {&x, &at}, {{"exclusive", excl}, {"reverse", rev}});
          ExpectCudaMatchesCpu(*dev_, "CumSum", {&x, &at32}, {{"exclusive", excl}, {"reverse", rev}}, 1, 1e-5,
                               {.host_values = false});
        }
      }
    }
  }
}

TEST_F(CudaReduceTest, CumSumDTypesEmptyAndErrors) {
  const Tensor f = Data({4, 9}, 6);
  const Tensor at = I64s({1});
  for (DType d : {DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    const Tensor x = Cast(d == DType::kI32 || d == DType::kI64 ? Cast(f, DType::kI32) : f, d);
    const double tol = d == DType::kBF16 ? 1e-2 : d == DType::kF16 ? 2e-3 : 1e-5;
    ExpectCudaMatchesCpu(*dev_, "CumSum", {&x, &at}, {{"reverse", int64_t{1}}}, 1, tol);
  }
  const std::vector<int64_t> big = {std::numeric_limits<int64_t>::max(), 1, 1, std::numeric_limits<int64_t>::min()};
  const Tensor wrap = MakeTensor<int64_t>(DType::kI64, {4}, big);
  const Tensor at0 = I64s({0});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&wrap, &at0});
  const Tensor i8 = Cast(f, DType::kI8);
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&i8, &at});  // refused by both
  const Tensor e = MakeTensor<float>(DType::kF32, {0, 3}, {});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&e, &at});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&e, &at0});
  const Tensor at5 = I64s({5});
  const Tensor two = I64s({0, 1});
  const Tensor fat = MakeTensor<float>(DType::kF32, {1}, {0.0f});
  const Tensor scalar = MakeTensor<float>(DType::kF32, {}, {1.0f});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&f, &at5});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&f, &two});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&f, &fat});
  ExpectCudaMatchesCpu(*dev_, "CumSum", {&scalar, &at0});
  EXPECT_FALSE(RunOpCuda(*dev_, "CumSum", {&f, &at5}, {}, 1, {.host_values = false}).ok());
}

}  // namespace
}  // namespace grove
