// The CUDA kernels of the layout group (Flatten Squeeze Unsqueeze Split
// GatherElements ScatterND Expand Tile Pad Size Range ConstantOfShape Trilu
// OneHot) on the emulated device against the CPU kernels: several dtypes and
// ranks, negative axes, every Pad mode, empty tensors, parameter inputs known
// on the host or only on the device, and the error paths.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/cuda/cuda_test_helpers.h"

namespace grove::testing {
namespace {

Tensor Scalar(DType t, double v) {
  return Tensor::CastOf(TensorView(DType::kF64, {}, static_cast<const void*>(&v)), t).value();
}

Tensor F32Tensor(const Shape& shape, const std::vector<float>& v) { return MakeTensor<float>(DType::kF32, shape, v); }

Tensor Idx(bool i64, const Shape& shape, const Ints& v) { return i64 ? I64(shape, v) : I32(shape, v); }

class CudaLayoutTest : public CudaOpTest {};

TEST_F(CudaLayoutTest, FlattenSqueezeUnsqueezeCopy) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kBool, DType::kI8}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {2, 1, 3, 5});
    for (int64_t axis : {0, 1, 2, -1, 4}) Check("Flatten", {&x}, {{"axis", axis}});
    Tensor axes = I64({1}), neg = I64({-3}), un = I64({0, -1});
    Check("Squeeze", {&x, &axes});
    Check("Squeeze", {&x, &neg});
    Check("Squeeze", {&x});
    Check("Unsqueeze", {&x, &un});
    Tensor s = Data(t, {});
    Tensor zero = I64({0});
    Check("Unsqueeze", {&s, &zero});
    Tensor e = Data(t, {0, 1});
    Tensor one = I64({1});
    Check("Squeeze", {&e, &one});
  }
}

TEST_F(CudaLayoutTest, Split) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8, DType::kBool}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {4, 6, 5});
    Check("Split", {&x}, {{"axis", int64_t{1}}}, 3);
    Check("Split", {&x}, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{2}}}, 2);
    Tensor parts = I64({1, 0, 3, 2}), parts32 = I32({1, 0, 3, 2});
    Check("Split", {&x, &parts}, {{"axis", int64_t{1}}}, 4);
    Check("Split", {&x, &parts32}, {{"axis", int64_t{-2}}}, 4);
    Check("Split", {&x}, {{"axis", int64_t{0}}, {"split", Ints{3, 1}}}, 2);
    Tensor v = Data(t, {7});
    Tensor p = I64({2, 5});
    Check("Split", {&v, &p}, {}, 2);
    Tensor e = Data(t, {0, 4});
    Check("Split", {&e}, {{"axis", int64_t{1}}}, 2);
  }
  Tensor x = Data(DType::kF32, {4, 6});
  Tensor bad = I64({2, 2});
  Check("Split", {&x, &bad}, {{"axis", int64_t{1}}}, 2);  // sums to 4, not 6
  Check("Split", {&x}, {{"axis", int64_t{1}}}, 4);        // 6 does not split in 4
}

TEST_F(CudaLayoutTest, GatherElements) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {3, 4, 5});
    for (bool i64 : {true, false}) {
      Tensor idx = Idx(i64, {2, 2, 3}, {0, -1, 2, 1, 2, -3, 0, 0, 2, 1, -2, 1});
      Check("GatherElements", {&x, &idx}, {{"axis", int64_t{0}}});
      Tensor idx1 = Idx(i64, {3, 2, 2}, {3, -1, 0, 2, 1, -4, 2, 2, 0, 1, 3, -2});
      Check("GatherElements", {&x, &idx1}, {{"axis", int64_t{-2}}});
      Tensor idx2 = Idx(i64, {1, 4, 3}, {4, 0, -1, 2, 3, 1, -5, 0, 0, 1, 2, 3});
      Check("GatherElements", {&x, &idx2}, {{"axis", int64_t{2}}});
      Tensor empty = Idx(i64, {0, 4, 5}, {});
      Check("GatherElements", {&x, &empty}, {{"axis", int64_t{1}}});
      Tensor bad = Idx(i64, {1, 1, 2}, {0, 5});
      Check("GatherElements", {&x, &bad}, {{"axis", int64_t{-1}}});
      for (bool host : {true, false}) {
        EXPECT_FALSE(
            RunOpCuda(*dev_, "GatherElements", {&x, &bad}, {{"axis", int64_t{2}}}, 1, {.host_values = host}).ok());
      }
    }
  }
  Tensor v = Data(DType::kF32, {6});
  Tensor i = I64({-6, 5, 0});
  Check("GatherElements", {&v, &i});
}

TEST_F(CudaLayoutTest, ScatterND) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kBool, DType::kI8}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor data = Data(t, {4, 3, 2});
    for (bool i64 : {true, false}) {
      Tensor idx = Idx(i64, {2, 1}, {3, -4});
      Tensor upd = Data(t, {2, 3, 2}, 5);
      Check("ScatterND", {&data, &idx, &upd});
      Tensor idx2 = Idx(i64, {2, 2, 2}, {0, 1, 3, -1, 2, 0, -1, 1});
      Tensor upd2 = Data(t, {2, 2, 2}, 6);
      Check("ScatterND", {&data, &idx2, &upd2});
      Tensor idx3 = Idx(i64, {3}, {1, 2, -1});
      Tensor upd3 = Data(t, {}, 7);
      Check("ScatterND", {&data, &idx3, &upd3});
      Tensor none = Idx(i64, {0, 1}, {});
      Tensor upd0 = Data(t, {0, 3, 2});
      Check("ScatterND", {&data, &none, &upd0});
      Tensor bad = Idx(i64, {2, 2}, {0, 0, 1, 3});
      Tensor updb = Data(t, {2, 2});
      Check("ScatterND", {&data, &bad, &updb});
      for (bool host : {true, false}) {
        EXPECT_FALSE(RunOpCuda(*dev_, "ScatterND", {&data, &bad, &updb}, {}, 1, {.host_values = host}).ok());
      }
    }
  }
  // Indices are checked even when the slices are empty.
  Tensor empty_rows = Data(DType::kF32, {3, 0});
  Tensor bad_row = I64({1, 1}, {3});
  Tensor no_updates = Data(DType::kF32, {1, 0});
  Check("ScatterND", {&empty_rows, &bad_row, &no_updates});
  for (bool host : {true, false}) {
    EXPECT_FALSE(
        RunOpCuda(*dev_, "ScatterND", {&empty_rows, &bad_row, &no_updates}, {}, 1, {.host_values = host}).ok());
  }
  Tensor data = Data(DType::kF32, {4});
  Tensor idx = I64({1, 1}, {2});
  Tensor upd = Data(DType::kF32, {1});
  EXPECT_EQ(RunOpCuda(*dev_, "ScatterND", {&data, &idx, &upd}, {{"reduction", std::string("add")}}).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST_F(CudaLayoutTest, ExpandAndTile) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8, DType::kBool}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {3, 1, 5});
    Tensor s1 = I64({2, 3, 4, 5}), s2 = I64({4, 1}), s3 = I32({1, 1, 1}), s0 = I64({3, 0, 5});
    Check("Expand", {&x, &s1});
    Check("Expand", {&x, &s2});
    Check("Expand", {&x, &s3});
    Check("Expand", {&x, &s0});
    Tensor c = Data(t, {});
    Tensor s4 = I64({2, 3});
    Check("Expand", {&c, &s4});
    Tensor bad = I64({2, 4});
    Check("Expand", {&x, &bad});
    Tensor r1 = I64({2, 3, 1}), r2 = I32({1, 1, 2}), r3 = I64({1, 0, 3}), r4 = I64({3, 2, 2});
    Check("Tile", {&x, &r1});
    Check("Tile", {&x, &r2});
    Check("Tile", {&x, &r3});
    Check("Tile", {&x, &r4});
    Tensor y = Data(t, {2, 3, 1, 2, 3});
    Tensor r5 = I64({2, 1, 3, 2, 1});
    Check("Tile", {&y, &r5});
    Tensor neg = I64({1, -1, 1});
    Check("Tile", {&x, &neg});
    Tensor short_r = I64({2});
    Check("Tile", {&x, &short_r});
  }
}

TEST_F(CudaLayoutTest, PadEveryMode) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {3, 4, 5});
    Tensor value = Scalar(t, 7);
    for (const std::string mode : {"constant", "edge", "reflect", "wrap"}) {
      SCOPED_TRACE(mode);
      for (bool i64 : {true, false}) {
        Tensor pads = Idx(i64, {6}, {1, 2, 0, 2, 3, 4});
        Check("Pad", {&x, &pads}, {{"mode", mode}});
        Tensor crop = Idx(i64, {6}, {-1, 0, 2, 1, -2, -1});
        Check("Pad", {&x, &crop}, {{"mode", mode}});
        Tensor some = Idx(i64, {4}, {2, 0, 1, 3});
        Tensor axes = Idx(i64, {2}, {-1, 0});
        Check("Pad", {&x, &some, nullptr, &axes}, {{"mode", mode}});
        Tensor wide = Idx(i64, {6}, {0, 6, 0, 0, 9, 0});  // beyond the data: periodic
        Check("Pad", {&x, &wide}, {{"mode", mode}});
      }
      Tensor v = Data(t, {7});
      Tensor p = I64({3, 4});
      Check("Pad", {&v, &p}, {{"mode", mode}});
      Tensor one = Data(t, {1, 2});
      Tensor p2 = I64({2, 1, 1, 2});
      Check("Pad", {&one, &p2}, {{"mode", mode}});
    }
    Tensor pads = I64({1, 0, 1, 0, 2, 2});
    Check("Pad", {&x, &pads, &value});
    Check("Pad", {&x}, {{"pads", Ints{0, 1, 1, 1, 0, 0}}, {"value", 2.5}});
    Tensor e = Data(t, {0, 3});
    Tensor pe = I64({1, 0, 1, 1});
    Check("Pad", {&e, &pe});
    Check("Pad", {&e, &pe}, {{"mode", std::string("edge")}});  // error: pads an empty dim
  }
  Tensor x = Data(DType::kF32, {3, 4});
  Tensor neg = I64({-2, 0, -2, 0});
  Check("Pad", {&x, &neg});  // a negative dim
  Tensor short_pads = I64({1, 1});
  Check("Pad", {&x, &short_pads});
  Tensor pads = I64({1, 1, 1, 1});
  Check("Pad", {&x, &pads}, {{"mode", std::string("mirror")}});
  Check("Pad", {&x});  // no pads
  Tensor wrong_value = Scalar(DType::kF64, 1);
  Check("Pad", {&x, &pads, &wrong_value});
  Tensor s = Data(DType::kF32, {});
  Tensor none = I64({0}, {});
  Check("Pad", {&s, &none});
}

TEST_F(CudaLayoutTest, SizeRangeConstantOfShape) {
  for (const Shape& s : {Shape{}, Shape{3, 4}, Shape{0, 5}, Shape{2, 3, 1, 5}}) {
    Tensor x = Data(DType::kF16, s);
    ExpectCudaMatchesCpu(*dev_, "Size", {&x});
  }
  struct R {
    double start, limit, delta;
  };
  for (DType t : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    SCOPED_TRACE(DTypeName(t));
    for (R r : {R{0, 10, 1}, R{5, -7, -3}, R{1, 1, 1}, R{3, 17, 4}, R{-2, 300, 0.7}, R{10, 0, 1}, R{0, 1, 0}}) {
      Tensor a = Scalar(t, r.start), b = Scalar(t, r.limit), c = Scalar(t, r.delta);
      Check("Range", {&a, &b, &c});
    }
  }
  Tensor a = Scalar(DType::kF32, 0), b = Scalar(DType::kI64, 3), c = Scalar(DType::kF32, 1);
  Check("Range", {&a, &b, &c});
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kBool, DType::kI8, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor shape = I64({2, 3, 5}), value = Scalar(t, 3), zero = Scalar(t, 0);
    Check("ConstantOfShape", {&shape, &value});
    Check("ConstantOfShape", {&shape, &zero});
    Tensor empty = I64({4, 0});
    Check("ConstantOfShape", {&empty, &value});
  }
  Tensor shape = I32({3, 7}), none = I64({0}, {}), neg = I64({2, -1});
  Check("ConstantOfShape", {&shape});
  Check("ConstantOfShape", {&none});
  Check("ConstantOfShape", {&neg});
}

TEST_F(CudaLayoutTest, Trilu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(t));
    for (const Shape& s : {Shape{4, 4}, Shape{2, 6, 3}, Shape{2, 1, 3, 4}, Shape{0, 3}}) {
      Tensor x = Data(t, s);
      for (int64_t upper : {0, 1}) {
        Check("Trilu", {&x}, {{"upper", upper}});
        for (int64_t k : {-2, 3, 100, -100}) {
          Tensor kt = I64({}, {k});
          Check("Trilu", {&x, &kt}, {{"upper", upper}});
        }
      }
    }
  }
  Tensor v = Data(DType::kF32, {5});
  Check("Trilu", {&v});
}

TEST_F(CudaLayoutTest, OneHot) {
  for (DType it : {DType::kI64, DType::kI32, DType::kF32, DType::kF16, DType::kI8, DType::kU8, DType::kF64,
                   DType::kBF16}) {
    SCOPED_TRACE(DTypeName(it));
    Tensor idx = Tensor::CastOf(F32Tensor({2, 3}, {0, 2, -1, 5, 4, -6}).view(), it).value();
    for (DType vt : {DType::kF32, DType::kF16, DType::kI64, DType::kBool}) {
      if (vt != DType::kF32 && it != DType::kI64 && it != DType::kF16) continue;  // every width once
      Tensor values = Tensor::CastOf(F32Tensor({2}, {0, 1}).view(), vt).value();
      Tensor depth = Scalar(DType::kI64, 5), fdepth = Scalar(DType::kF32, 4.5);
      for (int64_t axis : {-1, 1, -3}) Check("OneHot", {&idx, &depth, &values}, {{"axis", axis}});
      Check("OneHot", {&idx, &fdepth, &values});
    }
  }
  Tensor fidx = F32Tensor({4}, {1.9f, -0.5f, NAN, 3e20f});
  Tensor values = Data(DType::kF32, {2}, 3), depth = Scalar(DType::kI32, 3);
  Check("OneHot", {&fidx, &depth, &values});
  Tensor empty = I64({0, 2}, {});
  Check("OneHot", {&empty, &depth, &values});
  Tensor zero = Scalar(DType::kI64, 0), neg = Scalar(DType::kI64, -1), three = Data(DType::kF32, {3});
  Tensor idx = I64({1, 2});
  Check("OneHot", {&idx, &zero, &values});
  Check("OneHot", {&idx, &neg, &values});
  Check("OneHot", {&idx, &depth, &three});
}

}  // namespace
}  // namespace grove::testing
