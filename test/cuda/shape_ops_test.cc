// The CUDA kernels of the shape group (Reshape Identity Transpose Concat
// Gather Slice Shape) on the emulated device against the CPU kernels: every
// dtype width, ranks 0..5, negative axes and steps, clamped bounds, empty
// tensors, indices known on the host or only on the device, and the errors.
#include <cstdint>
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/cuda/cuda_test_helpers.h"

namespace grove::testing {
namespace {

const DType kTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI64,
                        DType::kI32, DType::kI8,  DType::kU8,  DType::kBool};

class CudaShapeOpsTest : public CudaOpTest {};

TEST_F(CudaShapeOpsTest, ReshapeAndIdentityCopyEveryDType) {
  for (DType t : kTypes) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {3, 5, 7});
    Tensor shape = I64({7, -1});
    Check("Reshape", {&x, &shape});
    Check("Identity", {&x});
    Tensor s = Data(t, {});
    Tensor one = I64({1, 1});
    Check("Reshape", {&s, &one});
    Check("Identity", {&s});
    Tensor e = Data(t, {0, 3});
    Tensor e_shape = I64({3, 0});
    Check("Reshape", {&e, &e_shape});
  }
}

TEST_F(CudaShapeOpsTest, TransposeRanks0To5) {
  struct Case {
    Shape shape;
    Ints perm;  // empty: the default (reversed)
  };
  const Case cases[] = {
      {{}, {}},
      {{7}, {}},
      {{3, 5}, {}},
      {{1, 5}, {1, 0}},
      {{2, 3, 5}, {1, 0, 2}},
      {{2, 3, 5}, {2, 0, 1}},
      {{3, 1, 4, 5}, {3, 1, 0, 2}},
      {{2, 3, 4, 5}, {0, 1, 3, 2}},
      {{2, 3, 2, 3, 4}, {4, 2, 0, 3, 1}},
      {{2, 3, 2, 3, 4}, {0, 1, 2, 4, 3}},
      {{2, 0, 3}, {2, 1, 0}},
  };
  for (const Case& c : cases) {
    for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8, DType::kBool}) {
      SCOPED_TRACE(DTypeName(t));
      Tensor x = Data(t, c.shape);
      Attrs attrs;
      if (!c.perm.empty()) attrs.push_back({"perm", c.perm});
      ExpectCudaMatchesCpu(*dev_, "Transpose", {&x}, attrs, 1, 0.0);
    }
  }
  Tensor x = Data(DType::kF32, {2, 3});
  ExpectCudaMatchesCpu(*dev_, "Transpose", {&x}, {{"perm", Ints{0, 0}}});
  ExpectCudaMatchesCpu(*dev_, "Transpose", {&x}, {{"perm", Ints{0, 1, 2}}});
}

TEST_F(CudaShapeOpsTest, ConcatAlongEveryAxis) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kI8, DType::kBool}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor a = Data(t, {2, 3, 4}, 1), b = Data(t, {2, 3, 4}, 2);
    for (int64_t axis : {0, 1, 2, -1, -3}) Check("Concat", {&a, &b}, {{"axis", axis}});
    Tensor c = Data(t, {2, 5, 4}, 3), d = Data(t, {2, 0, 4}, 4), e = Data(t, {2, 1, 4}, 5);
    Check("Concat", {&a, &c, &d, &e}, {{"axis", int64_t{1}}});
    Tensor f = Data(t, {3}, 6), g = Data(t, {5}, 7);
    Check("Concat", {&f, &g}, {{"axis", int64_t{0}}});
    Tensor h = Data(t, {2, 3, 1}, 8);
    Check("Concat", {&a, &h, &a}, {{"axis", int64_t{-1}}});  // odd widths: narrow units
    Tensor z1 = Data(t, {0, 3}), z2 = Data(t, {0, 2});
    Check("Concat", {&z1, &z2}, {{"axis", int64_t{1}}});
  }
  Tensor a = Data(DType::kF32, {2, 3}), b = Data(DType::kF32, {3, 3});
  ExpectCudaMatchesCpu(*dev_, "Concat", {&a, &b}, {{"axis", int64_t{1}}});
}

TEST_F(CudaShapeOpsTest, GatherAnyAxisBothIndexTypes) {
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8, DType::kBool, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(t));
    Tensor x = Data(t, {4, 3, 5});
    for (bool i64 : {true, false}) {
      Tensor idx = i64 ? I64({2, 3}, {0, -1, 2, 3, -4, 1}) : I32({2, 3}, {0, -1, 2, 3, -4, 1});
      Tensor idx3 = i64 ? I64({2, -3, 1, 1}) : I32({2, -3, 1, 1});
      Tensor idx5 = i64 ? I64({4, -5, 0}) : I32({4, -5, 0});
      Tensor scalar = i64 ? I64({}, {-2}) : I32({}, {-2});
      Tensor empty = i64 ? I64({0}, {}) : I32({0}, {});
      Check("Gather", {&x, &idx}, {{"axis", int64_t{0}}});
      Check("Gather", {&x, &idx3}, {{"axis", int64_t{1}}});
      Check("Gather", {&x, &idx3}, {{"axis", int64_t{-2}}});
      Check("Gather", {&x, &idx5}, {{"axis", int64_t{2}}});
      Check("Gather", {&x, &idx5}, {{"axis", int64_t{-1}}});
      Check("Gather", {&x, &scalar}, {{"axis", int64_t{0}}});
      Check("Gather", {&x, &empty}, {{"axis", int64_t{1}}});
    }
  }
  // Rows wide enough to move as 8-byte units, and an embedding-like table.
  Tensor table = Data(DType::kF16, {9, 12});
  Tensor ids = I64({3, 2}, {8, 0, -1, 4, 4, 2});
  Check("Gather", {&table, &ids});
  Tensor empty_data = Data(DType::kF32, {3, 0});
  Tensor some = I64({2, -3});
  Check("Gather", {&empty_data, &some});
}

TEST_F(CudaShapeOpsTest, GatherOutOfRangeIndexIsAnError) {
  Tensor x = Data(DType::kF32, {4, 3});
  for (bool host : {true, false}) {
    for (int64_t bad : {4, -5, 1000}) {
      for (bool i64 : {true, false}) {
        Tensor idx = i64 ? I64({0, bad, 1}) : I32({0, bad, 1});
        absl::StatusOr<std::vector<Tensor>> out = RunOpCuda(*dev_, "Gather", {&x, &idx}, {}, 1, {.host_values = host});
        ASSERT_FALSE(out.ok()) << bad;
        EXPECT_NE(out.status().message().find("index " + std::to_string(bad)), std::string::npos) << out.status();
        Check("Gather", {&x, &idx});
      }
    }
    // Checked even when the output is empty.
    Tensor empty_rows = Data(DType::kF32, {4, 0});
    Tensor idx = I64({7});
    EXPECT_FALSE(RunOpCuda(*dev_, "Gather", {&empty_rows, &idx}, {}, 1, {.host_values = host}).ok());
  }
  Tensor f = Data(DType::kF32, {3});
  Tensor float_idx = Data(DType::kF32, {2});
  Check("Gather", {&x, &float_idx});
  Tensor scalar = Data(DType::kF32, {});
  Tensor idx = I64({0});
  Check("Gather", {&scalar, &idx});
}

TEST_F(CudaShapeOpsTest, SliceStepsBoundsAndAxes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    Shape shape;
    Ints starts, ends, axes, steps;  // empty axes/steps: omitted
  };
  const Case cases[] = {
      {{10}, {2}, {7}, {}, {}},
      {{10}, {-3}, {kMax}, {}, {}},
      {{10}, {8}, {1}, {0}, {-2}},
      {{10}, {kMax}, {kMin}, {0}, {-1}},
      {{10}, {-100}, {100}, {0}, {3}},
      {{10}, {5}, {5}, {0}, {1}},  // empty
      {{10}, {0}, {10}, {0}, {kMax}},
      {{6, 7}, {1, 2}, {5, 6}, {}, {}},
      {{6, 7}, {1}, {5}, {0}, {}},  // contiguous rows
      {{6, 7}, {2}, {6}, {-1}, {}},  // row copies
      {{6, 7}, {-1, 0}, {0, 7}, {0, 1}, {-1, 2}},
      {{4, 5, 6}, {3, -1, 0}, {0, 0, 6}, {0, 1, 2}, {-1, -2, 4}},
      {{4, 5, 6}, {1}, {3}, {-2}, {}},
      {{2, 3, 4, 5}, {0, 1}, {2, 4}, {3, 1}, {2, 1}},
      {{2, 3, 2, 3, 4}, {1, 2, 3}, {0, 0, 0}, {1, 3, 4}, {-1, -1, -2}},
      {{3, 0, 4}, {0}, {2}, {0}, {}},
      {{5, 4}, {4, 3}, {kMin, kMin}, {0, 1}, {-3, -1}},
  };
  for (const Case& c : cases) {
    for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kU8, DType::kBool}) {
      SCOPED_TRACE(DTypeName(t));
      Tensor x = Data(t, c.shape);
      for (bool i64 : {true, false}) {
        auto ints = [&](const Ints& v) {
          Ints w = v;
          if (!i64) {  // i32 holds the clamping sentinels as +-2^31
            for (int64_t& e : w) e = std::max<int64_t>(std::min<int64_t>(e, INT32_MAX), INT32_MIN);
          }
          return i64 ? I64(w) : I32(w);
        };
        Tensor starts = ints(c.starts), ends = ints(c.ends), axes = ints(c.axes), steps = ints(c.steps);
        std::vector<const Tensor*> in = {&x, &starts, &ends};
        if (!c.axes.empty()) in.push_back(&axes);
        if (!c.steps.empty()) {
          if (c.axes.empty()) in.push_back(nullptr);
          in.push_back(&steps);
        }
        Check("Slice", in);
      }
    }
  }
}

TEST_F(CudaShapeOpsTest, SliceErrors) {
  Tensor x = Data(DType::kF32, {4, 5});
  Tensor s = I64({0}), e = I64({2}), zero = I64({0}), axes = I64({0}), bad_axes = I64({2}), two = I64({0, 1});
  Check("Slice", {&x, &s, &e, &axes, &zero});         // zero step
  Check("Slice", {&x, &s, &e, &bad_axes});             // axis out of range
  Check("Slice", {&x, &s, &two});                      // lengths differ
  Tensor twice = I64({0, -2}), ss = I64({0, 0}), ee = I64({1, 1});
  Check("Slice", {&x, &ss, &ee, &twice});              // repeated axis
  Tensor scalar = Data(DType::kF32, {});
  Check("Slice", {&scalar, &s, &e});
  Tensor f = Data(DType::kF32, {1});
  Check("Slice", {&x, &f, &e});                        // float starts
}

TEST_F(CudaShapeOpsTest, ShapeWritesTheDims) {
  Tensor x = Data(DType::kF16, {2, 3, 4, 5, 6});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&x});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&x}, {{"start", int64_t{1}}, {"end", int64_t{-1}}});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&x}, {{"start", int64_t{-2}}});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&x}, {{"start", int64_t{3}}, {"end", int64_t{1}}});
  Tensor s = Data(DType::kF32, {});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&s});
  Tensor big = Data(DType::kU8, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1});  // rank 11: two launches
  ExpectCudaMatchesCpu(*dev_, "Shape", {&big});
  Tensor e = Data(DType::kI64, {3, 0});
  ExpectCudaMatchesCpu(*dev_, "Shape", {&e});
}

}  // namespace
}  // namespace grove::testing
