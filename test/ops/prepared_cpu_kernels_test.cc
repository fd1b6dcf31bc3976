// The prepared CPU kernels (the norm group; Conv, ConvTranspose, the pools;
// Gemm, MatMul; RoiAlign; the elementwise and math ops; reductions, ArgMax and
// ArgMin, TopK; LRN, Dropout; the shape and layout ops, Trilu, Range,
// ConstantOfShape, OneHot, GatherND, ScatterElements): each is registered with a prepare; a bad attribute
// or shape is reported by the prepare, before any invoke; one prepare serves
// several invokes on new input values with the results of a fresh run
// (RunOp, which the op tests check against naive references) and, for
// Softmax and Gemm, of a naive reference written here; the invoke's scratch
// is the workspace the prepare declared (filled with garbage first), and the
// invoke allocates no heap memory at all (operator new is counted here), but
// for oneDNN's small per-call argument map on the steps oneDNN computes (each
// case runs with oneDNN on, and again with the reference kernels).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/backends/cpu/onednn.h"
#include "lib/ir/element_types.h"
#include "lib/ir/op_registry.h"
#include "lib/runtime/registry.h"
#include "test/op_test_util.h"
#include "test/ops/prepared_step.h"

// Heap allocations made through operator new while a step watches (this
// thread only; the counters of prepared_step.h, for every test file of this
// binary): the invokes must take their scratch from the workspace.
void* operator new(size_t size) {
  namespace counters = grove::testing::prepared_cpu;
  if (counters::g_watch_allocations) {
    ++counters::g_allocations;
    if (size > counters::g_largest_allocation) counters::g_largest_allocation = size;
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
// Every other unaligned form too, so that no allocation pairs the sanitizer
// runtime's operator new with this free (ASan's alloc-dealloc-mismatch:
// std::stable_sort's buffer comes from the nothrow form).
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace grove::testing {
namespace {

using ::testing::HasSubstr;
using namespace prepared_cpu;  // NOLINT: the harness (test/ops/prepared_step.h)

// The elementwise group (lib/backends/cpu/elementwise.cc, math.cc): unary,
// broadcast binary, Where, Clip, Cast, the variadic ops.
std::vector<Case> ElementwiseCases() {
  std::vector<Case> c;
  auto two = [](Shape a, Shape b) {
    return [a, b](int seed) { return std::vector<Tensor>{F32(a, seed), F32(b, seed + 1)}; };
  };
  auto one = [](Shape s) { return [s](int seed) { return std::vector<Tensor>{F32(s, seed)}; }; };
  auto positive = [](Shape s) { return [s](int seed) { return std::vector<Tensor>{PositiveF32(s, seed)}; }; };
  c.push_back({"AddBroadcast", "Add", {}, two({2, 3, 4}, {3, 1})});
  c.push_back({"SubSameShape", "Sub", {}, two({5, 7}, {5, 7})});
  c.push_back({"MulScalar", "Mul", {}, two({4, 3}, {})});
  c.push_back({"DivBothBroadcast", "Div", {}, two({2, 1, 4}, {3, 1})});
  c.push_back({"DivInt32", "Div", {},
               [](int seed) {
                 return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {3, 4}, seed),
                                            Ints<int32_t>(DType::kI32, {4}, seed + 1, true)};
               }});
  c.push_back({"AddHalf", "Add", {},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({2, 3}, seed), DType::kF16),
                                            ToHalf(F32({2, 1}, seed + 1), DType::kF16)};
               }});
  c.push_back({"Relu", "Relu", {}, one({3, 5})});
  c.push_back({"Sigmoid", "Sigmoid", {}, one({2, 6})});
  c.push_back({"TanhBF16", "Tanh", {},
               [](int seed) { return std::vector<Tensor>{ToHalf(F32({7}, seed), DType::kBF16)}; }});
  c.push_back({"Greater", "Greater", {}, two({2, 3}, {3})});
  c.push_back({"EqualInt64", "Equal", {},
               [](int seed) {
                 return std::vector<Tensor>{Ints<int64_t>(DType::kI64, {4, 1}, seed),
                                            Ints<int64_t>(DType::kI64, {1, 3}, seed + 2)};
               }});
  c.push_back({"LessOrEqual", "LessOrEqual", {}, two({3, 2}, {3, 2})});
  c.push_back({"Where", "Where", {},
               [](int seed) { return std::vector<Tensor>{Bools({2, 1, 4}, seed), F32({3, 4}, seed), F32({}, seed + 1)}; }});
  c.push_back({"CastToInt32", "Cast", {{"to", static_cast<int64_t>(DType::kI32)}},
               [](int seed) {
                 std::vector<float> v = Pattern(12, seed);
                 for (float& x : v) x *= 50.0f;
                 return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {3, 4}, v)};
               }});
  c.push_back({"CastToHalf", "Cast", {{"to", static_cast<int64_t>(DType::kF16)}}, one({6})});
  c.push_back({"CastSameDType", "Cast", {{"to", static_cast<int64_t>(DType::kF32)}}, one({2, 2})});
  c.push_back({"CastLike", "CastLike", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({5}, seed), MakeTensor<int64_t>(DType::kI64, {1}, {0})};
               }});
  c.push_back({"Identity", "Identity", {}, one({2, 3})});
  c.push_back({"Sqrt", "Sqrt", {}, positive({9})});
  c.push_back({"Exp", "Exp", {}, one({4, 2})});
  c.push_back({"LeakyRelu", "LeakyRelu", {{"alpha", 0.3}}, one({10})});
  c.push_back({"GeluTanh", "Gelu", {{"approximate", std::string("tanh")}}, one({8})});
  c.push_back({"AbsInt8", "Abs", {},
               [](int seed) { return std::vector<Tensor>{Ints<int8_t>(DType::kI8, {6}, seed)}; }});
  c.push_back({"PowSquare", "Pow", {},
               [](int seed) { return std::vector<Tensor>{F32({3, 3}, seed), MakeTensor<float>(DType::kF32, {}, {2.0f})}; }});
  c.push_back({"PowBroadcast", "Pow", {},
               [](int seed) { return std::vector<Tensor>{PositiveF32({2, 3}, seed), F32({3}, seed + 1)}; }});
  c.push_back({"ClipInputs", "Clip", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({4, 3}, seed),
                                            MakeTensor<float>(DType::kF32, {}, {-0.5f + 0.1f * static_cast<float>(seed)}),
                                            MakeTensor<float>(DType::kF32, {}, {0.4f})};
               }});
  c.push_back({"ClipUnbounded", "Clip", {}, one({5})});
  c.push_back({"MaxThree", "Max", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3}, seed), F32({3}, seed + 1), F32({2, 1}, seed + 2)};
               }});
  c.push_back({"MeanHalf", "Mean", {},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({2, 4}, seed), DType::kF16),
                                            ToHalf(F32({4}, seed + 1), DType::kF16)};
               },
               1, true});
  c.push_back({"Not", "Not", {}, [](int seed) { return std::vector<Tensor>{Bools({3, 3}, seed)}; }});
  c.push_back({"And", "And", {},
               [](int seed) { return std::vector<Tensor>{Bools({2, 3}, seed), Bools({3}, seed + 1)}; }});
  c.push_back({"IsInf", "IsInf", {{"detect_negative", int64_t{0}}},
               [](int seed) {
                 std::vector<float> v = Pattern(6, seed);
                 v[static_cast<size_t>(seed % 6)] = INFINITY;
                 v[static_cast<size_t>((seed + 3) % 6)] = -INFINITY;
                 return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {6}, v)};
               }});
  c.push_back({"PRelu", "PRelu", {}, two({2, 3, 2}, {3, 1})});
  c.push_back({"ModFmod", "Mod", {{"fmod", int64_t{1}}}, two({3, 4}, {4})});
  c.push_back({"ModInt32", "Mod", {},
               [](int seed) {
                 return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {5}, seed),
                                            Ints<int32_t>(DType::kI32, {5}, seed + 1)};
               }});
  c.push_back({"BitShiftRight", "BitShift", {{"direction", std::string("RIGHT")}},
               [](int seed) {
                 return std::vector<Tensor>{Ints<uint8_t>(DType::kU8, {6}, seed), Ints<uint8_t>(DType::kU8, {}, seed)};
               }});
  return c;
}

// Reductions (lib/backends/cpu/reduction.cc) and the shape group
// (shape_ops.cc).
std::vector<Case> ReductionAndShapeCases() {
  std::vector<Case> c;
  c.push_back({"ReduceSumMiddleAxis", "ReduceSum", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed), I64({1}, {1})}; }, 1, true});
  c.push_back({"ReduceMeanOuterAndInner", "ReduceMean", {{"keepdims", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed), I64({2}, {0, -1})}; }, 1, true});
  c.push_back({"ReduceSumAllInt32", "ReduceSum", {},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {3, 5}, seed)}; }, 1, true});
  c.push_back({"Reshape", "Reshape", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 6}, seed), I64({2}, {3, 4})}; }});
  c.push_back({"Transpose", "Transpose", {{"perm", std::vector<int64_t>{2, 0, 1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed)}; }});
  c.push_back({"ConcatMiddleAxis", "Concat", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 1, 3}, seed), F32({2, 2, 3}, seed + 1), F32({2, 0, 3}, seed + 2)};
               }});
  c.push_back({"ConcatAxis0", "Concat", {{"axis", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{F32({1, 4}, seed), F32({2, 4}, seed + 1)}; }});
  c.push_back({"GatherAxis1", "Gather", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 5, 3}, seed), I64({2, 2}, {seed % 5, -1 - seed % 5, 0, 4})};
               }});
  c.push_back({"GatherInt32Indices", "Gather", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({4, 2}, seed), MakeTensor<int32_t>(DType::kI32, {3}, {3, seed % 4, -4})};
               }});
  c.push_back({"SliceSteps", "Slice", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({4, 6}, seed), I64({2}, {3, 1}), I64({2}, {-10, 6}), I64({2}, {0, 1}),
                                            I64({2}, {-1, 2})};
               }});
  c.push_back({"Shape", "Shape", {{"start", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed)}; }});
  c.push_back({"Flatten", "Flatten", {{"axis", int64_t{2}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed)}; }});
  c.push_back({"Unsqueeze", "Unsqueeze", {},
               [](int seed) { return std::vector<Tensor>{F32({3, 2}, seed), I64({2}, {0, -1})}; }});
  c.push_back({"Expand", "Expand", {},
               [](int seed) { return std::vector<Tensor>{F32({3, 1}, seed), I64({3}, {2, 1, 4})}; }});
  c.push_back({"ExpandScalar", "Expand", {},
               [](int seed) { return std::vector<Tensor>{F32({}, seed), I64({0}, {})}; }});
  c.push_back({"Tile", "Tile", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3}, seed), I64({2}, {2, 3})}; }});
  c.push_back({"TileEmpty", "Tile", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3}, seed), I64({2}, {0, 3})}; }});
  c.push_back({"SplitSizes", "Split", {{"axis", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 5, 3}, seed), I64({2}, {2, 3})}; }, 2});
  c.push_back({"SplitEven", "Split", {},
               [](int seed) { return std::vector<Tensor>{F32({6, 2}, seed)}; }, 3});
  c.push_back({"GatherElements", "GatherElements", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 4, 3}, seed),
                                            I64({2, 2, 3}, {seed % 4, 1, -1, 0, 3, 2, -4, seed % 3, 1, 2, 0, -2})};
               }});
  c.push_back({"ScatterND", "ScatterND", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({4, 3}, seed), I64({2, 1}, {seed % 4, -1}), F32({2, 3}, seed + 1)};
               },
               1, true});
  c.push_back({"ScatterNDAdd", "ScatterND", {{"reduction", std::string("add")}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3}, seed), I64({3, 2}, {0, 1, 1, seed % 3, 0, 1}),
                                            F32({3}, seed + 2)};
               },
               1, true});
  c.push_back({"PadConstantInput", "Pad", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3}, seed), I64({4}, {1, 0, 0, 2}),
                                            MakeTensor<float>(DType::kF32, {}, {0.25f * static_cast<float>(seed)})};
               }});
  c.push_back({"PadReflect", "Pad", {{"mode", std::string("reflect")}},
               [](int seed) { return std::vector<Tensor>{F32({3, 4}, seed), I64({4}, {2, 1, 1, 3})}; }});
  auto resize = [](Shape x, std::vector<float> scales, std::vector<int64_t> sizes) {
    return [x, scales, sizes](int seed) {
      std::vector<Tensor> v = {F32(x, seed), MakeTensor<float>(DType::kF32, {0}, {}),
                               MakeTensor<float>(DType::kF32, {static_cast<int64_t>(scales.size())}, scales)};
      if (!sizes.empty()) v.push_back(I64({static_cast<int64_t>(sizes.size())}, sizes));
      return v;
    };
  };
  c.push_back({"ResizeNearest", "Resize", {}, resize({1, 2, 3, 4}, {1, 1, 2, 1.5f}, {})});
  c.push_back({"ResizeLinearSizes", "Resize", {{"mode", std::string("linear")}}, resize({1, 1, 4, 3}, {}, {1, 1, 3, 5}),
               1, true});
  c.push_back({"ResizeCubic", "Resize",
               {{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string("align_corners")}},
               resize({2, 5}, {1, 1.6f}, {}), 1, true});
  c.push_back({"PadEdgeAxes", "Pad", {{"mode", std::string("edge")}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3, 2}, seed), I64({2}, {1, 2}),
                                            MakeTensor<float>(DType::kF32, {}, {0.0f}), I64({1}, {1})};
               }});
  // ArgMax / ArgMin: the best value per column in the workspace; ties.
  c.push_back({"ArgMaxMiddleAxis", "ArgMax", {{"axis", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({3, 4, 5}, seed)}; }, 1, true});
  c.push_back({"ArgMinLastIndexInt32", "ArgMin", {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}},
                                                  {"keepdims", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {4, 6}, seed)}; }, 1, true});
  c.push_back({"ArgMaxHalfTies", "ArgMax", {{"axis", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{ToHalf(F32({6, 3}, seed % 2), DType::kF16)}; }, 1, true});
  // ScatterElements: the offsets and the walk in the workspace.
  c.push_back({"ScatterElementsAxis1Int32", "ScatterElements", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({3, 4}, seed),
                                            MakeTensor<int32_t>(DType::kI32, {3, 2}, {seed % 4, -1, 0, 2, 3, -4}),
                                            F32({3, 2}, seed + 1)};
               },
               1, true});
  c.push_back({"ScatterElementsAdd", "ScatterElements", {{"reduction", std::string("add")}},
               [](int seed) {
                 return std::vector<Tensor>{F32({4, 3}, seed), I64({2, 3}, {1, 1, seed % 4, 1, -1, 0}),
                                            F32({2, 3}, seed + 2)};
               },
               1, true});
  c.push_back({"ScatterElementsMaxInt64", "ScatterElements", {{"reduction", std::string("max")}, {"axis", int64_t{0}}},
               [](int seed) {
                 return std::vector<Tensor>{Ints<int64_t>(DType::kI64, {3, 2}, seed), I64({2, 2}, {0, 2, 0, seed % 3}),
                                            Ints<int64_t>(DType::kI64, {2, 2}, seed + 3)};
               },
               1, true});
  // GatherND: the walk once, the indices read per run.
  c.push_back({"GatherNDPairs", "GatherND", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({3, 4, 2}, seed),
                                            I64({2, 2}, {seed % 3, -1, 2 - seed % 3, (seed * 3) % 4})};
               }});
  c.push_back({"GatherNDBatchInt32", "GatherND", {{"batch_dims", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 5, 3}, seed),
                                            MakeTensor<int32_t>(DType::kI32, {2, 3, 1}, {seed % 5, 0, -1, 4, seed % 2, 1})};
               }});
  // LRN: one batch item's squares in the workspace. Dropout (inference).
  c.push_back({"LrnSize3", "LRN", {{"size", int64_t{3}}, {"alpha", 0.002}, {"beta", 0.5}, {"bias", 2.0}},
               [](int seed) { return std::vector<Tensor>{F32({2, 5, 3, 2}, seed)}; }, 1, true});
  c.push_back({"LrnHalfSize4", "LRN", {{"size", int64_t{4}}},
               [](int seed) { return std::vector<Tensor>{ToHalf(F32({1, 6, 4}, seed), DType::kF16)}; }, 1, true});
  c.push_back({"DropoutWithMask", "Dropout", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({3, 4}, seed), MakeTensor<float>(DType::kF32, {}, {0.3f}),
                                            MakeTensor<uint8_t>(DType::kBool, {}, {0})};
               },
               2});
  c.push_back({"DropoutTrainingRatio0", "Dropout", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({5}, seed), MakeTensor<float>(DType::kF32, {}, {0.0f}),
                                            MakeTensor<uint8_t>(DType::kBool, {}, {1})};
               }});
  // TopK: one column's values and order in the workspace; K known.
  c.push_back({"TopKLargestWithIndices", "TopK", {},
               [](int seed) { return std::vector<Tensor>{F32({3, 7}, seed), I64({1}, {3})}; }, 2, true});
  c.push_back({"TopKSmallestAxis0Ties", "TopK", {{"axis", int64_t{0}}, {"largest", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {8, 3}, seed), I64({1}, {2})}; },
               2, true});
  c.push_back({"TopKValuesOnly", "TopK", {{"axis", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 5, 3}, seed), I64({1}, {5})}; }, 1, true});
  // Trilu, Range, ConstantOfShape, OneHot: their parameter inputs (k, start /
  // limit / delta, shape, depth) known at prepare, as a plan's weights are.
  c.push_back({"TriluUpperK", "Trilu", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 4, 5}, seed), I64({}, {1})}; }});
  c.push_back({"TriluLowerNegativeK", "Trilu", {{"upper", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{F32({5, 3}, seed), I64({}, {-2})}; }});
  c.push_back({"TriluNoK", "Trilu", {}, [](int seed) { return std::vector<Tensor>{F32({3, 3}, seed)}; }});
  c.push_back({"RangeInt64", "Range", {},
               [](int) { return std::vector<Tensor>{I64({}, {-3}), I64({}, {20}), I64({}, {4})}; }});
  c.push_back({"RangeF32", "Range", {},
               [](int) {
                 return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {}, {0.5f}),
                                            MakeTensor<float>(DType::kF32, {}, {-2.0f}),
                                            MakeTensor<float>(DType::kF32, {}, {-0.3f})};
               }});
  c.push_back({"ConstantOfShapeValue", "ConstantOfShape", {},
               [](int seed) {
                 return std::vector<Tensor>{I64({3}, {2, 3, 4}),
                                            MakeTensor<int32_t>(DType::kI32, {1}, {seed * 7 - 3})};
               }});
  c.push_back({"OneHotAxis1", "OneHot", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{I64({2, 3}, {0, 4, -1, seed, -5, 9}), I64({}, {5}),
                                            MakeTensor<float>(DType::kF32, {2}, {0.5f * seed, 2.0f})};
               }});
  c.push_back({"OneHotFloatIndices", "OneHot", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({4}, seed), MakeTensor<float>(DType::kF32, {1}, {3.0f}),
                                            I64({2}, {0, seed + 1})};
               }});
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto one = [](Shape s) { return [s](int seed) { return std::vector<Tensor>{F32(s, seed)}; }; };
  c.push_back({"SoftmaxInnerAxis", "Softmax", {{"axis", int64_t{1}}}, one({2, 3, 4}), 1, true});
  c.push_back({"SoftmaxLastAxis", "Softmax", {}, one({3, 5}), 1, false});
  c.push_back({"LogSoftmaxAxis0", "LogSoftmax", {{"axis", int64_t{0}}}, one({4, 3}), 1, true});
  c.push_back({"Hardmax", "Hardmax", {{"axis", int64_t{1}}}, one({2, 5, 3}), 1, false});
  c.push_back({"BatchNormalization", "BatchNormalization", {{"epsilon", 1e-3}},
               [](int seed) {
                 std::vector<Tensor> v;
                 v.push_back(F32({2, 3, 4, 5}, seed));
                 v.push_back(F32({3}, seed + 1));
                 v.push_back(F32({3}, seed + 2));
                 v.push_back(F32({3}, seed + 3));
                 v.push_back(PositiveF32({3}, seed + 4));
                 return v;
               },
               1, true});
  c.push_back({"BatchNormalizationTraining", "BatchNormalization",
               {{"training_mode", int64_t{1}}, {"momentum", 0.8}},
               [](int seed) {
                 std::vector<Tensor> v;
                 v.push_back(F32({2, 3, 2, 2}, seed));
                 v.push_back(F32({3}, seed + 1));
                 v.push_back(F32({3}, seed + 2));
                 v.push_back(F32({3}, seed + 3));
                 v.push_back(PositiveF32({3}, seed + 4));
                 return v;
               },
               3, true});
  c.push_back({"InstanceNormalization", "InstanceNormalization", {{"epsilon", 1e-4}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3, 4, 5}, seed), F32({3}, seed + 1), F32({3}, seed + 2)};
               },
               1, true});
  c.push_back({"LayerNormalization", "LayerNormalization", {{"axis", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 3, 4}, seed), F32({4}, seed + 1), F32({3, 1}, seed + 2)};
               },
               3, true});
  c.push_back({"MeanVarianceNormalization", "MeanVarianceNormalization", {}, one({2, 3, 4, 5}), 1, true});
  c.push_back({"Conv", "Conv",
               {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 1}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({1, 2, 5, 5}, seed), F32({4, 2, 3, 3}, seed + 1), F32({4}, seed + 2)};
               },
               1, true});
  c.push_back({"Conv3D", "Conv",
               {{"dilations", std::vector<int64_t>{1, 2, 1}}, {"pads", std::vector<int64_t>{0, 1, 1, 1, 1, 0}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 2, 3, 5, 4}, seed), F32({3, 2, 2, 2, 3}, seed + 1)};
               },
               1, true});
  c.push_back({"ConvPointwise", "Conv", {{"group", int64_t{2}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 4, 3, 3}, seed), F32({6, 2, 1, 1}, seed + 1)};
               },
               1, false});
  c.push_back({"ConvTranspose", "ConvTranspose", {{"strides", std::vector<int64_t>{2, 2}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({1, 2, 3, 3}, seed), F32({2, 3, 3, 3}, seed + 1), F32({3}, seed + 2)};
               },
               1, true});
  c.push_back({"MaxPool", "MaxPool",
               {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{0, 0, 1, 1}}},
               one({1, 2, 5, 5}), 2, true});
  c.push_back({"MaxPoolColumnMajor", "MaxPool",
               {{"kernel_shape", std::vector<int64_t>{2, 3}},
                {"strides", std::vector<int64_t>{1, 2}},
                {"storage_order", int64_t{1}}},
               one({2, 2, 4, 5}), 2, true});
  c.push_back({"MaxPool3D", "MaxPool",
               {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}, {"ceil_mode", int64_t{1}},
                {"strides", std::vector<int64_t>{2, 2, 2}}},
               one({1, 2, 3, 3, 3}), 1, true});
  c.push_back({"AveragePool", "AveragePool",
               {{"kernel_shape", std::vector<int64_t>{3, 3}},
                {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                {"count_include_pad", int64_t{1}}},
               one({2, 2, 4, 4}), 1, true});
  c.push_back({"GlobalAveragePool", "GlobalAveragePool", {}, one({2, 3, 4, 4}), 1, false});
  c.push_back({"GlobalMaxPool", "GlobalMaxPool", {}, one({2, 3, 4, 4}), 1, false});
  c.push_back({"Gemm", "Gemm", {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}},
               [](int seed) {
                 return std::vector<Tensor>{F32({3, 4}, seed), F32({5, 4}, seed + 1), F32({5}, seed + 2)};
               },
               1, false});
  c.push_back({"GemmF16", "Gemm", {{"transA", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({4, 3}, seed), DType::kF16),
                                            ToHalf(F32({4, 5}, seed + 1), DType::kF16),
                                            ToHalf(F32({3, 1}, seed + 2), DType::kF16)};
               },
               1, true});
  c.push_back({"MatMul", "MatMul", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed), F32({4, 5}, seed + 1)}; }, 1, false});
  c.push_back({"MatMulBF16", "MatMul", {},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({2, 1, 3, 4}, seed), DType::kBF16),
                                            ToHalf(F32({3, 4, 2}, seed + 1), DType::kBF16)};
               },
               1, true});
  c.push_back({"RoiAlign", "RoiAlign",
               {{"output_height", int64_t{2}}, {"output_width", int64_t{3}}, {"spatial_scale", 0.5}},
               [](int seed) {
                 std::vector<float> rois = {0, 0, 6, 6, 1, 2, 9, 7, 2.5f, 0.5f, 4, 11};
                 for (float& r : rois) r += 0.25f * static_cast<float>(seed % 3);
                 return std::vector<Tensor>{F32({2, 3, 6, 6}, seed), MakeTensor<float>(DType::kF32, {3, 4}, rois),
                                            MakeTensor<int64_t>(DType::kI64, {3}, {1, 0, seed % 2})};
               },
               1, true});
  for (Case& e : ElementwiseCases()) c.push_back(std::move(e));
  for (Case& e : ReductionAndShapeCases()) c.push_back(std::move(e));
  return c;
}

class PreparedCpuKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(PreparedCpuKernelTest, RegisteredWithAPrepare) {
  const ir::OpDef& def = Def(GetParam().type);
  EXPECT_NE(def.kernels[static_cast<int>(ir::Backend::kCpu)], nullptr);
  EXPECT_NE(def.prepares[static_cast<int>(ir::Backend::kCpu)], nullptr);
}
TEST_P(PreparedCpuKernelTest, OnePrepareManyInvokesMatchFreshRuns) { CheckOnePrepareManyInvokes(GetParam()); }

TEST_P(PreparedCpuKernelTest, OnePrepareManyInvokesMatchFreshRunsWithTheReferenceKernels) {
  cpu::ScopedOneDnn reference(false);
  CheckOnePrepareManyInvokes(GetParam());
}

TEST_P(PreparedCpuKernelTest, InvokeWithoutPrepareIsAnInternalError) {
  CheckInvokeWithoutPrepareIsAnInternalError(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, PreparedCpuKernelTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Naive references, through one prepare and several invokes
// ---------------------------------------------------------------------------

TEST(PreparedCpuKernelReferenceTest, SoftmaxAlongAMiddleAxis) {
  const Shape shape = {2, 3, 4};
  const Attrs attrs = {{"axis", int64_t{1}}};
  const Tensor first = F32(shape, 0);
  absl::StatusOr<std::vector<Tensor>> like = RunOp("Softmax", {&first}, attrs);
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("Softmax", attrs, {first}, *like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  for (int seed = 1; seed < 4; ++seed) {
    std::vector<Tensor> in;
    in.push_back(F32(shape, seed));
    size_t largest = 0;
    ASSERT_TRUE(step.Invoke(in, &largest).ok());
    const float* x = in[0].as<float>();
    const float* y = step.outputs()[0].as<float>();
    for (int64_t o = 0; o < 2; ++o) {
      for (int64_t i = 0; i < 4; ++i) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < 3; ++j) m = std::max<double>(m, x[(o * 3 + j) * 4 + i]);
        for (int64_t j = 0; j < 3; ++j) sum += std::exp(x[(o * 3 + j) * 4 + i] - m);
        for (int64_t j = 0; j < 3; ++j) {
          EXPECT_NEAR(y[(o * 3 + j) * 4 + i], std::exp(x[(o * 3 + j) * 4 + i] - m) / sum, 1e-6);
        }
      }
    }
  }
}

TEST(PreparedCpuKernelReferenceTest, GemmWithTransposedBAndBroadcastC) {
  const Attrs attrs = {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}};
  const std::vector<Tensor> first = {F32({3, 4}, 0), F32({5, 4}, 1), F32({5}, 2)};
  absl::StatusOr<std::vector<Tensor>> like = RunOp("Gemm", Ptrs(first), attrs);
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("Gemm", attrs, first, *like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  for (int seed = 3; seed < 6; ++seed) {
    const std::vector<Tensor> in = {F32({3, 4}, seed), F32({5, 4}, seed + 1), F32({5}, seed + 2)};
    size_t largest = 0;
    ASSERT_TRUE(step.Invoke(in, &largest).ok());
    const float *a = in[0].as<float>(), *b = in[1].as<float>(), *c = in[2].as<float>();
    const float* y = step.outputs()[0].as<float>();
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < 4; ++k) acc += static_cast<double>(a[i * 4 + k]) * b[j * 4 + k];
        EXPECT_NEAR(y[i * 5 + j], 0.5 * acc + 2.0 * c[j], 1e-5);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Bad attributes and shapes: the prepare says so (the invoke never runs)
// ---------------------------------------------------------------------------

std::vector<BadCase> BadCases() {
  std::vector<BadCase> c;
  c.push_back({"ArgMaxAxis", "ArgMax", {{"axis", int64_t{2}}}, {F32({2, 3}, 0)}, {{DType::kI64, {2, 1}}},
               "axis 2 is out of range for rank 2"});
  c.push_back({"ArgMinOutput", "ArgMin", {}, {F32({2, 3}, 0)}, {{DType::kI64, {2, 3}}},
               "output 0 was allocated with shape [2, 3] but the kernel writes [1, 3]"});
  c.push_back({"TriluRank1", "Trilu", {}, {F32({4}, 0)}, {{DType::kF32, {4}}}, "rank"});
  c.push_back({"ScatterElementsUpdates", "ScatterElements", {}, {F32({2, 3}, 0), I64({1, 2}, {0, 1}), F32({2, 1}, 0)},
               {{DType::kF32, {2, 3}}}, "(the indices' shape)"});
  c.push_back({"ScatterElementsFloatIndices", "ScatterElements", {}, {F32({2, 3}, 0), F32({1, 2}, 0), F32({1, 2}, 1)},
               {{DType::kF32, {2, 3}}}, "input 1 (indices) has dtype f32; expected i32 or i64"});
  c.push_back({"GatherNDTupleTooLong", "GatherND", {}, {F32({2, 3}, 0), I64({1, 3}, {0, 0, 0})},
               {{DType::kF32, {1}}}, "must end in a dim of 1..2"});
  c.push_back({"GatherNDFloatIndices", "GatherND", {}, {F32({2, 3}, 0), F32({1, 1}, 0)}, {{DType::kF32, {1, 3}}},
               "input 1 (indices) has dtype f32; expected i32 or i64"});
  c.push_back({"LrnSize0", "LRN", {{"size", int64_t{0}}}, {F32({1, 2, 3}, 0)}, {{DType::kF32, {1, 2, 3}}},
               "attribute 'size' is 0; expected >= 1"});
  c.push_back({"LrnRank1", "LRN", {{"size", int64_t{1}}}, {F32({3}, 0)}, {{DType::kF32, {3}}}, "rank"});
  c.push_back({"DropoutRatio", "Dropout", {},
               {F32({2}, 0), MakeTensor<float>(DType::kF32, {}, {1.5f}), MakeTensor<uint8_t>(DType::kBool, {}, {1})},
               {{DType::kF32, {2}}}, "input 1 (ratio) is 1.5; expected a value in [0, 1)"});
  c.push_back({"DropoutMode", "Dropout", {}, {F32({2}, 0), MakeTensor<float>(DType::kF32, {}, {0.5f}),
                                              MakeTensor<float>(DType::kF32, {}, {1.0f})},
               {{DType::kF32, {2}}}, "input 2 (training_mode) must be one bool"});
  c.push_back({"TopKTooLarge", "TopK", {}, {F32({2, 7}, 0), I64({1}, {9})}, {{DType::kF32, {2, 9}}},
               "input 1 (K) is 9; expected 0..7"});
  c.push_back({"TopKScalar", "TopK", {}, {F32({}, 0), I64({1}, {1})}, {{DType::kF32, {}}}, "TopK needs rank >= 1"});
  c.push_back({"RangeZeroDelta", "Range", {}, {I64({}, {0}), I64({}, {4}), I64({}, {0})}, {{DType::kI64, {4}}},
               "delta"});
  c.push_back({"ConstantOfShapeNegative", "ConstantOfShape", {}, {I64({2}, {2, -1})}, {{DType::kF32, {2, 1}}},
               "shape (input 0)"});
  c.push_back({"OneHotDepthTwoValues", "OneHot", {},
               {I64({2}, {0, 1}), I64({2}, {3, 4}), MakeTensor<float>(DType::kF32, {2}, {0.0f, 1.0f})},
               {{DType::kF32, {2, 3}}}, "depth"});
  const Shape x4 = {1, 2, 5, 5};
  c.push_back({"SoftmaxAxis", "Softmax", {{"axis", int64_t{3}}}, {F32({2, 3, 4}, 0)}, {{DType::kF32, {2, 3, 4}}},
               "attribute 'axis': axis 3 is out of range for rank 3"});
  c.push_back({"SoftmaxOutput", "Softmax", {}, {F32({2, 3}, 0)}, {{DType::kF32, {3, 2}}},
               "output 0 was allocated as f32 [3, 2]"});
  c.push_back({"LogSoftmaxScalar", "LogSoftmax", {{"axis", int64_t{0}}}, {F32({}, 0)}, {{DType::kF32, {}}},
               "input 0 (input) is a scalar; LogSoftmax needs rank >= 1"});
  c.push_back({"SoftmaxDType", "Softmax", {}, {MakeTensor<int32_t>(DType::kI32, {2}, {1, 2})}, {{DType::kI32, {2}}},
               "the kernel does not support dtype i32"});
  c.push_back({"HardmaxAxis", "Hardmax", {{"axis", int64_t{-4}}}, {F32({2, 3, 4}, 0)}, {{DType::kF32, {2, 3, 4}}},
               "attribute 'axis'"});
  c.push_back({"BatchNormScale", "BatchNormalization", {},
               {F32({2, 3, 4}, 0), F32({2}, 1), F32({3}, 2), F32({3}, 3), F32({3}, 4)},
               {{DType::kF32, {2, 3, 4}}}, "input 1 (scale) has shape [2]; expected [3]"});
  c.push_back({"BatchNormRank", "BatchNormalization", {},
               {F32({3}, 0), F32({3}, 1), F32({3}, 2), F32({3}, 3), F32({3}, 4)}, {{DType::kF32, {3}}},
               "input 0 (X) has shape [3]; expected rank >= 2"});
  c.push_back({"BatchNormDType", "BatchNormalization", {},
               {F32({2, 3}, 0), MakeTensor<int64_t>(DType::kI64, {3}, {1, 2, 3}), F32({3}, 2), F32({3}, 3),
                F32({3}, 4)},
               {{DType::kF32, {2, 3}}}, "the kernel does not support dtype i64"});
  c.push_back({"BatchNormRunningOutput", "BatchNormalization", {{"training_mode", int64_t{1}}},
               {F32({2, 3}, 0), F32({3}, 1), F32({3}, 2), F32({3}, 3), F32({3}, 4)},
               {{DType::kF32, {2, 3}}, {DType::kF32, {4}}}, "output 1 was allocated as f32 [4]"});
  c.push_back({"InstanceNormRank", "InstanceNormalization", {}, {F32({2, 3}, 0), F32({3}, 1), F32({3}, 2)},
               {{DType::kF32, {2, 3}}}, "input 0 (input) has shape [2, 3]; expected rank >= 3"});
  c.push_back({"InstanceNormBias", "InstanceNormalization", {}, {F32({2, 3, 4}, 0), F32({3}, 1), F32({4}, 2)},
               {{DType::kF32, {2, 3, 4}}}, "input 2 (B) has shape [4]; expected [3]"});
  c.push_back({"LayerNormAxis", "LayerNormalization", {{"axis", int64_t{5}}}, {F32({2, 3}, 0), F32({3}, 1)},
               {{DType::kF32, {2, 3}}}, "attribute 'axis' is 5; out of range for input 0 (X) [2, 3]"});
  c.push_back({"LayerNormScale", "LayerNormalization", {}, {F32({2, 3}, 0), F32({2}, 1)}, {{DType::kF32, {2, 3}}},
               "input 1 (Scale) has shape [2], which does not broadcast to the normalized dims [3]"});
  c.push_back({"LayerNormStatOutput", "LayerNormalization", {}, {F32({2, 3}, 0), F32({3}, 1)},
               {{DType::kF32, {2, 3}}, {DType::kF32, {2}}}, "output 1 was allocated as f32 [2]"});
  c.push_back({"MvnAxes", "MeanVarianceNormalization", {{"axes", std::vector<int64_t>{7}}}, {F32({2, 3}, 0)},
               {{DType::kF32, {2, 3}}}, "attribute 'axes'"});
  c.push_back({"ConvChannels", "Conv", {}, {F32(x4, 0), F32({4, 3, 3, 3}, 1)}, {{DType::kF32, {1, 4, 3, 3}}},
               "input 1 (W)"});
  c.push_back({"ConvStrides", "Conv", {{"strides", std::vector<int64_t>{1}}}, {F32(x4, 0), F32({4, 2, 3, 3}, 1)},
               {{DType::kF32, {1, 4, 3, 3}}}, "attribute 'strides'"});
  c.push_back({"ConvOutput", "Conv", {}, {F32(x4, 0), F32({4, 2, 3, 3}, 1)}, {{DType::kF32, {1, 4, 5, 5}}},
               "output 0 was allocated as f32 [1, 4, 5, 5]"});
  c.push_back({"ConvTransposeChannels", "ConvTranspose", {}, {F32(x4, 0), F32({3, 2, 3, 3}, 1)},
               {{DType::kF32, {1, 2, 7, 7}}}, "input 1 (W)"});
  c.push_back({"MaxPoolKernelShape", "MaxPool", {{"kernel_shape", std::vector<int64_t>{2}}}, {F32(x4, 0)},
               {{DType::kF32, {1, 2, 4, 4}}}, "attribute 'kernel_shape'"});
  c.push_back({"AveragePoolOutput", "AveragePool", {{"kernel_shape", std::vector<int64_t>{2, 2}}}, {F32(x4, 0)},
               {{DType::kF32, {1, 2, 5, 5}}}, "output 0 was allocated as f32 [1, 2, 5, 5]"});
  c.push_back({"GlobalPoolRank", "GlobalAveragePool", {}, {F32({2, 3}, 0)}, {{DType::kF32, {2, 3}}},
               "input 0 (X) has shape [2, 3]"});
  c.push_back({"GemmInner", "Gemm", {}, {F32({3, 4}, 0), F32({5, 6}, 1)}, {{DType::kF32, {3, 6}}}, "Gemm"});
  c.push_back({"GemmDType", "Gemm", {},
               {MakeTensor<uint8_t>(DType::kU8, {1, 1}, {1}), MakeTensor<uint8_t>(DType::kU8, {1, 1}, {1})},
               {{DType::kU8, {1, 1}}}, "u8"});
  c.push_back({"MatMulInner", "MatMul", {}, {F32({3, 4}, 0), F32({5, 6}, 1)}, {{DType::kF32, {3, 6}}}, "MatMul"});
  c.push_back({"RoiAlignMode", "RoiAlign", {{"mode", std::string("min")}},
               {F32({1, 2, 4, 4}, 0), F32({1, 4}, 1), MakeTensor<int64_t>(DType::kI64, {1}, {0})},
               {{DType::kF32, {1, 2, 1, 1}}}, "attribute 'mode' is 'min'; expected 'avg' or 'max'"});
  c.push_back({"RoiAlignRois", "RoiAlign", {},
               {F32({1, 2, 4, 4}, 0), F32({1, 5}, 1), MakeTensor<int64_t>(DType::kI64, {1}, {0})},
               {{DType::kF32, {1, 2, 1, 1}}}, "input 1 (rois) has shape [1, 5]; expected [num_rois, 4]"});
  c.push_back({"RoiAlignSampling", "RoiAlign", {{"sampling_ratio", int64_t{-1}}},
               {F32({1, 2, 4, 4}, 0), F32({1, 4}, 1), MakeTensor<int64_t>(DType::kI64, {1}, {0})},
               {{DType::kF32, {1, 2, 1, 1}}}, "attribute 'sampling_ratio' is -1; expected >= 0"});
  // The elementwise group.
  c.push_back({"AddDTypes", "Add", {}, {F32({2}, 0), MakeTensor<int32_t>(DType::kI32, {2}, {1, 2})},
               {{DType::kF32, {2}}}, "dtype"});
  c.push_back({"AddBroadcast", "Add", {}, {F32({2, 3}, 0), F32({4}, 1)}, {{DType::kF32, {2, 3}}},
               "do not broadcast"});
  c.push_back({"MulPlannedOutput", "Mul", {}, {F32({2, 3}, 0), F32({3}, 1)}, {{DType::kF32, {3, 3}}},
               "but the output was planned as [3, 3]"});
  c.push_back({"ReluDType", "Relu", {}, {MakeTensor<int32_t>(DType::kI32, {2}, {1, 2})}, {{DType::kI32, {2}}},
               "the kernel does not support dtype i32"});
  c.push_back({"WhereCondition", "Where", {}, {F32({2}, 0), F32({2}, 1), F32({2}, 2)}, {{DType::kF32, {2}}},
               "Where"});
  c.push_back({"CastOutput", "Cast", {{"to", static_cast<int64_t>(DType::kI32)}}, {F32({2, 3}, 0)},
               {{DType::kI32, {3, 2}}}, "Cast"});
  c.push_back({"ClipMinShape", "Clip", {}, {F32({2, 3}, 0), F32({2}, 1)}, {{DType::kF32, {2, 3}}},
               "input 1 (min) must hold one element (a scalar); got shape [2]"});
  c.push_back({"BitShiftDirection", "BitShift", {{"direction", std::string("UP")}},
               {MakeTensor<uint8_t>(DType::kU8, {1}, {1}), MakeTensor<uint8_t>(DType::kU8, {1}, {1})},
               {{DType::kU8, {1}}}, "attribute 'direction' is 'UP'; expected 'LEFT' or 'RIGHT'"});
  c.push_back({"MaxDTypes", "Max", {}, {F32({2}, 0), ToHalf(F32({2}, 1), DType::kF16)}, {{DType::kF32, {2}}},
               "Max"});
  // Reductions and the shape group.
  c.push_back({"ReduceSumOutput", "ReduceSum", {}, {F32({2, 3}, 0), I64({1}, {1})}, {{DType::kF32, {2}}},
               "output 0 was allocated as f32 [2] but the kernel writes f32 [2, 1]"});
  c.push_back({"ReduceMeanDType", "ReduceMean", {}, {Ints<int32_t>(DType::kI32, {2, 3}, 0)}, {{DType::kI32, {1, 1}}},
               "the kernel does not support dtype i32"});
  c.push_back({"ReshapeCount", "Reshape", {}, {F32({2, 3}, 0), I64({1}, {4})}, {{DType::kF32, {4}}},
               "Reshape of [2, 3] (6 elements) into [4] (4 elements) at run time"});
  c.push_back({"TransposeOutput", "Transpose", {}, {F32({2, 3}, 0)}, {{DType::kF32, {2, 3}}}, "Transpose"});
  c.push_back({"ConcatOutput", "Concat", {{"axis", int64_t{0}}}, {F32({1, 2}, 0), F32({1, 2}, 1)},
               {{DType::kF32, {3, 2}}}, "Concat"});
  c.push_back({"GatherIndexDType", "Gather", {}, {F32({3}, 0), F32({1}, 1)}, {{DType::kF32, {1}}},
               "Gather indices (input 1) has dtype f32; expected i32 or i64"});
  c.push_back({"SliceOutput", "Slice", {}, {F32({4}, 0), I64({1}, {1}), I64({1}, {3})}, {{DType::kF32, {3}}},
               "Slice"});
  c.push_back({"GatherElementsIndexDType", "GatherElements", {}, {F32({3}, 0), F32({2}, 1)}, {{DType::kF32, {2}}},
               "input 1 (indices) has dtype f32; expected i32 or i64"});
  c.push_back({"ScatterNDIndexDType", "ScatterND", {}, {F32({3}, 0), F32({1, 1}, 1), F32({1}, 2)},
               {{DType::kF32, {3}}}, "ScatterND"});
  c.push_back({"PadMode", "Pad", {{"mode", std::string("mirror")}}, {F32({2}, 0), I64({2}, {1, 1})},
               {{DType::kF32, {4}}}, "attribute mode is 'mirror'"});
  return c;
}

// Integer Div by zero is found by the invoke (the divisor's values are read
// per run), with the message of an unprepared run.
TEST(PreparedCpuKernelInvokeTest, IntegerDivisionByZeroIsReportedByTheInvoke) {
  const std::vector<Tensor> first = {Ints<int32_t>(DType::kI32, {2, 2}, 0),
                                     MakeTensor<int32_t>(DType::kI32, {2}, {1, 2})};
  absl::StatusOr<std::vector<Tensor>> like = RunOp("Div", Ptrs(first), {});
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("Div", {}, first, *like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  const std::vector<Tensor> zero = {Ints<int32_t>(DType::kI32, {2, 2}, 1),
                                    MakeTensor<int32_t>(DType::kI32, {2}, {4, 0})};
  size_t largest = 0;
  const absl::Status s = step.Invoke(zero, &largest);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("integer division by zero: input 1 (B) holds 0 at flat index 1"));
  EXPECT_EQ(RunOp("Div", Ptrs(zero), {}).status().message(), s.message());
}

// Gather's indices are read and checked per run.
TEST(PreparedCpuKernelInvokeTest, GatherIndexOutOfRangeIsReportedByTheInvoke) {
  const std::vector<Tensor> first = {F32({3, 2}, 0), I64({2}, {0, 2})};
  absl::StatusOr<std::vector<Tensor>> like = RunOp("Gather", Ptrs(first), {});
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("Gather", {}, first, *like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  for (int64_t bad : {3, -4}) {
    const std::vector<Tensor> in = {F32({3, 2}, 1), I64({2}, {1, bad})};
    size_t largest = 0, allocations = 0;
    const absl::Status s = step.Invoke(in, &largest, &allocations);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(RunOp("Gather", Ptrs(in), {}).status().message(), s.message());
  }
}

// ScatterND's indices are read and checked per run, before the output is
// touched.
TEST(PreparedCpuKernelInvokeTest, ScatterNDIndexOutOfRangeIsReportedByTheInvoke) {
  const std::vector<Tensor> first = {F32({4, 3}, 0), I64({2, 1}, {0, 1}), F32({2, 3}, 1)};
  absl::StatusOr<std::vector<Tensor>> like = RunOp("ScatterND", Ptrs(first), {});
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("ScatterND", {}, first, *like);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  const std::vector<Tensor> in = {F32({4, 3}, 2), I64({2, 1}, {1, 4}), F32({2, 3}, 3)};
  size_t largest = 0;
  const absl::Status s = step.Invoke(in, &largest);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("index 4 (entry 1, coordinate 0) is out of range for dim 0 of the data [4, 3]"));
  EXPECT_EQ(RunOp("ScatterND", Ptrs(in), {}).status().message(), s.message());
}

// Slice's starts/ends given as values the plan does not know (activations)
// are read when it runs: the prepare defers, the invoke gives a fresh run's
// bytes.
TEST(PreparedCpuKernelInvokeTest, SliceWithUnknownParametersReadsThemPerRun) {
  const std::vector<Tensor> first = {F32({5, 4}, 0), I64({1}, {1}), I64({1}, {4})};
  absl::StatusOr<std::vector<Tensor>> like = RunOp("Slice", Ptrs(first), {});
  ASSERT_TRUE(like.ok()) << like.status();
  PreparedStep step("Slice", {}, first, *like);
  step.ForgetValue(1);
  step.ForgetValue(2);
  absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  step.Keep(*std::move(prepared));
  for (int seed = 0; seed < 3; ++seed) {
    const std::vector<Tensor> in = {F32({5, 4}, seed), I64({1}, {seed}), I64({1}, {seed + 3})};
    size_t largest = 0;
    ASSERT_TRUE(step.Invoke(in, &largest).ok());
    absl::StatusOr<std::vector<Tensor>> fresh = RunOp("Slice", Ptrs(in), {});
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_TRUE(SameBytes(step.outputs()[0], (*fresh)[0]));
  }
}

// Trilu's k, Range's start / limit / delta, ConstantOfShape's shape,
// OneHot's depth, TopK's K and Dropout's ratio / training_mode given as values the plan does not know are read when the
// step runs; the prepare defers them, each invoke gives a fresh run's bytes.
TEST(PreparedCpuKernelInvokeTest, ParameterInputsUnknownToThePlanAreReadPerRun) {
  const std::vector<UnknownInputsCase> cases = {
      {"Trilu", {}, [](int seed) { return std::vector<Tensor>{F32({3, 4}, seed), I64({}, {seed - 1})}; }, {1}},
      {"Trilu", {{"upper", int64_t{0}}},
       [](int seed) { return std::vector<Tensor>{F32({2, 2, 3}, seed), I64({}, {-seed})}; }, {1}},
      // Five values whatever the start.
      {"Range", {},
       [](int seed) { return std::vector<Tensor>{I64({}, {seed * 3}), I64({}, {seed * 3 + 10}), I64({}, {2})}; },
       {0, 1, 2}},
      {"ConstantOfShape", {},
       [](int seed) {
         return std::vector<Tensor>{I64({2}, {2, 3}), MakeTensor<float>(DType::kF32, {1}, {0.25f * seed})};
       },
       {0, 1}},
      {"OneHot", {},
       [](int seed) {
         return std::vector<Tensor>{I64({3}, {seed, 1, -1}), I64({}, {4}),
                                    MakeTensor<float>(DType::kF32, {2}, {0.0f, 1.0f + seed})};
       },
       {0, 1, 2}},
      {"TopK", {}, [](int seed) { return std::vector<Tensor>{F32({4, 6}, seed), I64({1}, {2})}; }, {0, 1}},
      {"Dropout", {},
       [](int seed) {
         return std::vector<Tensor>{F32({2, 3}, seed), MakeTensor<float>(DType::kF32, {}, {0.5f}),
                                    MakeTensor<uint8_t>(DType::kBool, {}, {0})};
       },
       {0, 1, 2}},
  };
  for (const UnknownInputsCase& c : cases) CheckUnknownInputsAreReadPerRun(c);
}

class PreparedCpuKernelErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PreparedCpuKernelErrorTest, ThePrepareReportsIt) { CheckThePrepareReportsIt(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, PreparedCpuKernelErrorTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

// RoiAlign's attribute checks live once (ir::ReadRoiAlignAttrs): the shape
// function and the prepare say the same.
TEST(PreparedCpuKernelErrorTest, RoiAlignAttributesCheckedOnceForShapesAndPrepare) {
  const Tensor x = F32({1, 2, 4, 4}, 0), rois = F32({1, 4}, 1);
  const Tensor idx = MakeTensor<int64_t>(DType::kI64, {1}, {0});
  for (const Attrs& attrs : std::vector<Attrs>{{{"mode", std::string("min")}},
                                               {{"coordinate_transformation_mode", std::string("asymmetric")}},
                                               {{"output_height", int64_t{0}}},
                                               {{"output_width", int64_t{-2}}},
                                               {{"sampling_ratio", int64_t{-1}}}}) {
    absl::StatusOr<std::vector<Tensor>> shaped = RunOp("RoiAlign", {&x, &rois, &idx}, attrs);
    ASSERT_FALSE(shaped.ok());
    std::vector<Tensor> like;
    like.push_back(Tensor::Create(DType::kF32, {1, 2, 1, 1}).value());
    PreparedStep step("RoiAlign", attrs, {x, rois, idx}, like);
    absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
    ASSERT_FALSE(prepared.ok());
    const std::string shape_msg(shaped.status().message()), prepare_msg(prepared.status().message());
    const std::string what = shape_msg.substr(shape_msg.find("attribute"));
    EXPECT_EQ(prepare_msg.substr(prepare_msg.find("attribute")), what);
  }
}

}  // namespace
}  // namespace grove::testing
