// The prepared CPU kernels, continued (prepared_cpu_kernels_test.cc has the
// first ones and replaces operator new for the binary): the ops of Cases()
// below, Compress, Unique and NonMaxSuppression among them, which allocate
// their outputs; with the quantization, loss and vision/signal groups every
// CPU kernel has its prepare but the control-flow, sequence/optional, Size
// and string ops (EveryCpuKernelHasAPrepare below).
// Each is registered with a prepare that reports a bad attribute or shape;
// one prepare serves several invokes on new values with a fresh run's bytes
// (RunOp, checked against naive references by the op tests) and no heap
// allocation (Compress, Unique, NonMaxSuppression: none but the output
// shapes they hand to AllocateOutput); parameter inputs the plan does not
// know are read per run.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/op_test_util.h"
#include "test/ops/prepared_step.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;
using namespace prepared_cpu;  // NOLINT: the harness (test/ops/prepared_step.h)

Tensor I32(const Shape& shape, std::vector<int32_t> v) { return MakeTensor<int32_t>(DType::kI32, shape, v); }

// Zeros but `count` values at places that move with the seed (NonZero's
// count, and so its output shape, stays that of seed 0).
Tensor SparseF32(const Shape& shape, int64_t count, int seed) {
  const int64_t n = Count(shape);
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  for (int64_t j = 0; j < count; ++j) v[static_cast<size_t>((seed + 5 * j) % n)] = 1.0f + static_cast<float>(j);
  return MakeTensor<float>(DType::kF32, shape, v);
}

// The operator new of prepared_cpu_kernels_test.cc counts into the
// harness's counters, so "no allocation" below can fail.
TEST(PreparedCpuKernel2Test, TheAllocationCounterCounts) {
  g_allocations = 0;
  g_watch_allocations = true;
  auto* p = new std::vector<int64_t>(100);
  g_watch_allocations = false;
  EXPECT_GE(g_allocations, 2u);
  delete p;
}

// ---------------------------------------------------------------------------
// One prepare, many invokes, equal to fresh runs, no heap allocation
// ---------------------------------------------------------------------------

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto one = [](Shape s) { return [s](int seed) { return std::vector<Tensor>{F32(s, seed)}; }; };
  // DepthToSpace, SpaceToDepth: the strided copy's dims and strides once.
  c.push_back({"DepthToSpaceDCR", "DepthToSpace", {{"blocksize", int64_t{2}}}, one({1, 8, 2, 3})});
  c.push_back({"DepthToSpaceCRDHalf", "DepthToSpace", {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}},
               [](int seed) { return std::vector<Tensor>{ToHalf(F32({2, 4, 2, 2}, seed), DType::kF16)}; }});
  c.push_back({"SpaceToDepth", "SpaceToDepth", {{"blocksize", int64_t{2}}}, one({1, 2, 4, 6})});
  c.push_back({"SpaceToDepthEmpty", "SpaceToDepth", {{"blocksize", int64_t{3}}}, one({0, 2, 3, 3})});
  // EyeLike.
  c.push_back({"EyeLikeK1", "EyeLike", {{"k", int64_t{1}}}, one({3, 5})});
  c.push_back({"EyeLikeInt32NegativeK", "EyeLike", {{"dtype", static_cast<int64_t>(DType::kI32)}, {"k", int64_t{-2}}},
               one({4, 3})});
  c.push_back({"EyeLikeOffTheMatrix", "EyeLike", {{"k", int64_t{7}}}, one({3, 4})});
  // ReverseSequence: the lengths read straight from the input per run.
  c.push_back({"ReverseSequenceTimeMajor", "ReverseSequence", {},
               [](int seed) { return std::vector<Tensor>{F32({4, 3, 2}, seed), I64({3}, {seed % 5, 4, 1})}; }});
  c.push_back({"ReverseSequenceBatchMajorInt32", "ReverseSequence",
               {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 5}, seed), I32({2}, {5 - seed, seed + 1})}; }});
  // CumSum: one row of running sums in the workspace; the axis known.
  c.push_back({"CumSumMiddleAxis", "CumSum", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed), I64({}, {1})}; }, 1, true});
  c.push_back({"CumSumExclusiveReverseInt32", "CumSum", {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {5, 3}, seed), I32({}, {-2})}; },
               1, true});
  // NonZero: the walk's position in the workspace.
  c.push_back({"NonZero", "NonZero", {}, [](int seed) { return std::vector<Tensor>{SparseF32({3, 4}, 5, seed)}; },
               1, true});
  c.push_back({"NonZeroScalar", "NonZero", {},
               [](int seed) { return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {}, {1.0f + seed})}; }});
  // Einsum: the labels' extents and strides once; the walk in the workspace.
  auto einsum = [](std::string eq) { return Attrs{{"equation", std::move(eq)}}; };
  c.push_back({"EinsumMatMul", "Einsum", einsum("ij,jk->ik"),
               [](int seed) { return std::vector<Tensor>{F32({2, 3}, seed), F32({3, 4}, seed + 1)}; }, 1, true});
  c.push_back({"EinsumBatchDiagonal", "Einsum", einsum("bii->bi"), one({2, 3, 3}), 1, true});
  c.push_back({"EinsumEllipsis", "Einsum", einsum("...ij,jk->...ik"),
               [](int seed) { return std::vector<Tensor>{F32({2, 2, 3}, seed), F32({3, 2}, seed + 1)}; }, 1, true});
  c.push_back({"EinsumSumAllInt32", "Einsum", einsum("ij->"),
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {3, 4}, seed)}; }, 1, true});
  // Det: one matrix at a time in the workspace.
  c.push_back({"DetBatch", "Det", {}, one({2, 3, 3}), 1, true});
  c.push_back({"DetHalf", "Det", {},
               [](int seed) { return std::vector<Tensor>{ToHalf(F32({4, 4}, seed), DType::kF16)}; }, 1, true});
  // The reductions of reduce_search.cc: groups merged once, accumulators in
  // the workspace.
  c.push_back({"ReduceMaxMiddleAxis", "ReduceMax", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 4}, seed), I64({1}, {1})}; }, 1, true});
  c.push_back({"ReduceMinHalfOuterAndInner", "ReduceMin", {{"keepdims", int64_t{0}}},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({3, 2, 4}, seed), DType::kF16), I64({2}, {0, -1})};
               },
               1, true});
  c.push_back({"ReduceProdAllInt32", "ReduceProd", {},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {3, 4}, seed)}; }, 1, true});
  c.push_back({"ReduceL1", "ReduceL1", {},
               [](int seed) { return std::vector<Tensor>{F32({4, 5}, seed), I64({1}, {0})}; }, 1, true});
  c.push_back({"ReduceL2Int64", "ReduceL2", {{"keepdims", int64_t{0}}},
               [](int seed) { return std::vector<Tensor>{Ints<int64_t>(DType::kI64, {2, 6}, seed), I64({1}, {1})}; },
               1, true});
  c.push_back({"ReduceLogSum", "ReduceLogSum", {},
               [](int seed) { return std::vector<Tensor>{PositiveF32({3, 4}, seed), I64({1}, {-1})}; }, 1, true});
  c.push_back({"ReduceSumSquare", "ReduceSumSquare", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3, 2}, seed), I64({2}, {0, 2})}; }, 1, true});
  c.push_back({"ReduceLogSumExpWithInfinity", "ReduceLogSumExp", {},
               [](int seed) {
                 std::vector<float> v = Pattern(12, seed);
                 v[static_cast<size_t>(seed % 4)] = INFINITY;
                 for (float& x : v) x *= 40.0f;
                 return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {4, 3}, v), I64({1}, {1})};
               },
               1, true});
  c.push_back({"ReduceMaxEmpty", "ReduceMax", {},
               [](int) { return std::vector<Tensor>{F32({0, 3}, 0), I64({1}, {0})}; }, 1, true});
  // Compress and Unique: their output sizes are the data's, so each run
  // allocates its outputs (into buffers of `capacity` here); the rest is
  // prepared once, the kept positions and the sort in the workspace.
  c.push_back({"CompressAxis1", "Compress", {{"axis", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({2, 4, 3}, seed), Bools({3}, seed)}; }, 1, true,
               {{DType::kF32, 24}}});
  c.push_back({"CompressFlat", "Compress", {},
               [](int seed) { return std::vector<Tensor>{F32({2, 3}, seed), Bools({5}, seed + 1)}; }, 1, true,
               {{DType::kF32, 6}}});
  // Repeats: values of 7 kinds, one NaN.
  auto repeats = [](int seed) {
    std::vector<float> v(10);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 3 + static_cast<size_t>(seed)) % 7) - 2.0f;
    v[static_cast<size_t>(seed) % v.size()] = NAN;
    return std::vector<Tensor>{MakeTensor<float>(DType::kF32, {10}, v)};
  };
  c.push_back({"UniqueSortedWithNaN", "Unique", {}, repeats, 4, true,
               {{DType::kF32, 10}, {DType::kI64, 10}, {DType::kI64, 10}, {DType::kI64, 10}}});
  c.push_back({"UniqueUnsortedRowsInt64", "Unique", {{"axis", int64_t{0}}, {"sorted", int64_t{0}}},
               [](int seed) {
                 return std::vector<Tensor>{I64({6, 2}, {1, 2, seed % 3, 0, 1, 2, 0, 0, seed % 3, 0, 5, seed})};
               },
               4, true, {{DType::kI64, 12}, {DType::kI64, 6}, {DType::kI64, 6}, {DType::kI64, 6}}});
  c.push_back({"UniqueOnlyY", "Unique", {},
               [](int seed) { return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {7}, seed)}; }, 1, true,
               {{DType::kI32, 7}}});
  // The window generators: the size known.
  c.push_back({"HannWindow", "HannWindow", {}, [](int) { return std::vector<Tensor>{I64({}, {8})}; }});
  c.push_back({"HammingWindowSymmetricInt32", "HammingWindow", {{"periodic", int64_t{0}}},
               [](int) { return std::vector<Tensor>{I32({}, {5})}; }});
  c.push_back({"BlackmanWindowF64", "BlackmanWindow", {{"output_datatype", static_cast<int64_t>(DType::kF64)}},
               [](int) { return std::vector<Tensor>{I64({1}, {7})}; }});
  // The quantization group: shapes, strides and dtypes' loops once; the
  // scales and zero points read per run into the workspace.
  auto u8 = [](const Shape& s, int seed) { return Ints<uint8_t>(DType::kU8, s, seed); };
  auto i8 = [](const Shape& s, int seed) { return Ints<int8_t>(DType::kI8, s, seed); };
  c.push_back({"QuantizeLinearPerAxis", "QuantizeLinear", {{"axis", int64_t{1}}},
               [u8](int seed) {
                 return std::vector<Tensor>{F32({2, 3, 4}, seed), PositiveF32({3}, seed + 1), u8({3}, seed)};
               },
               1, true});
  c.push_back({"QuantizeLinearInt32ToInt8", "QuantizeLinear", {},
               [i8](int seed) {
                 return std::vector<Tensor>{Ints<int32_t>(DType::kI32, {5}, seed), PositiveF32({}, seed), i8({}, seed)};
               },
               1, true});
  c.push_back({"DequantizeLinearHalfScalePerAxis", "DequantizeLinear", {{"axis", int64_t{-1}}},
               [i8](int seed) {
                 return std::vector<Tensor>{i8({2, 3}, seed), ToHalf(PositiveF32({3}, seed), DType::kF16),
                                            i8({3}, seed + 1)};
               },
               1, true});
  c.push_back({"DynamicQuantizeLinear", "DynamicQuantizeLinear", {}, one({3, 4}), 3});
  c.push_back({"MatMulIntegerBatchedPerRowZero", "MatMulInteger", {},
               [u8, i8](int seed) {
                 return std::vector<Tensor>{u8({2, 3, 4}, seed), i8({4, 5}, seed + 1), u8({3}, seed + 2),
                                            i8({}, seed)};
               },
               1, true});
  c.push_back({"QLinearMatMulPerColumnScale", "QLinearMatMul", {},
               [u8, i8](int seed) {
                 return std::vector<Tensor>{u8({3, 4}, seed),      PositiveF32({}, seed), u8({}, seed),
                                            i8({4, 2}, seed + 1),  PositiveF32({2}, seed), i8({2}, seed),
                                            PositiveF32({}, seed), u8({}, seed + 3)};
               },
               1, true});
  c.push_back({"ConvIntegerPaddedPerChannelZero", "ConvInteger", {{"pads", std::vector<int64_t>{1, 1, 0, 0}}},
               [u8, i8](int seed) {
                 return std::vector<Tensor>{u8({1, 2, 4, 4}, seed), i8({3, 2, 2, 2}, seed + 1), u8({}, seed),
                                            i8({3}, seed)};
               },
               1, true});
  c.push_back({"QLinearConvGroupsBias", "QLinearConv", {{"group", int64_t{2}}},
               [u8, i8](int seed) {
                 return std::vector<Tensor>{u8({1, 4, 3, 3}, seed), PositiveF32({}, seed), u8({}, seed),
                                            i8({2, 2, 2, 2}, seed + 1), PositiveF32({2}, seed + 2), i8({2}, seed),
                                            PositiveF32({1}, seed), i8({}, seed + 3),
                                            Ints<int32_t>(DType::kI32, {2}, seed)};
               },
               1, true});
  // The loss group: the class indices checked per run; SoftmaxCrossEntropyLoss's
  // log-probabilities in the workspace.
  c.push_back({"NegativeLogLikelihoodLossWeightedMean", "NegativeLogLikelihoodLoss", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({3, 4}, seed), I64({3}, {seed % 4, 1, 3}), PositiveF32({4}, seed)};
               }});
  c.push_back({"SoftmaxCrossEntropyLossHalfIgnoredBothOutputs", "SoftmaxCrossEntropyLoss",
               {{"reduction", std::string("none")}, {"ignore_index", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{ToHalf(F32({2, 3, 2}, seed), DType::kF16),
                                            I32({2, 2}, {0, seed % 3, 2, 1})};
               },
               2, true});
  c.push_back({"SoftmaxCrossEntropyLossSum", "SoftmaxCrossEntropyLoss", {{"reduction", std::string("sum")}},
               [](int seed) { return std::vector<Tensor>{F32({2, 5}, seed), I64({2}, {4, seed % 5})}; }, 1, true});
  // The vision and signal group.
  c.push_back({"GridSampleBilinearZeros", "GridSample", {},
               [](int seed) { return std::vector<Tensor>{F32({1, 2, 3, 4}, seed), F32({1, 2, 3, 2}, seed + 1)}; }, 1,
               true});
  c.push_back({"GridSampleBicubicReflectionAligned", "GridSample",
               {{"mode", std::string("bicubic")}, {"padding_mode", std::string("reflection")},
                {"align_corners", int64_t{1}}},
               [](int seed) {
                 std::vector<float> g = Pattern(12, seed);
                 for (float& v : g) v *= 1.5f;
                 return std::vector<Tensor>{F32({2, 1, 3, 3}, seed), MakeTensor<float>(DType::kF32, {2, 3, 1, 2}, g)};
               },
               1, true});
  c.push_back({"GridSampleNearestBorder3D", "GridSample",
               {{"mode", std::string("nearest")}, {"padding_mode", std::string("border")}},
               [](int seed) { return std::vector<Tensor>{F32({1, 1, 2, 3, 2}, seed), F32({1, 2, 1, 2, 3}, seed + 2)}; },
               1, true});
  c.push_back({"MaxUnpoolWithOutputShape", "MaxUnpool",
               {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({1, 1, 2, 2}, seed), I64({1, 1, 2, 2}, {seed % 16, 5, 10, 15}),
                                            I64({4}, {1, 1, 5, 4})};
               }});
  c.push_back({"MaxUnpool1D", "MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 1, 3}, seed), I64({2, 1, 3}, {0, 1, 3, seed % 4, 2, 1})};
               }});
  c.push_back({"DFTOnesidedWithLength", "DFT", {{"onesided", int64_t{1}}},
               [](int seed) { return std::vector<Tensor>{F32({1, 6, 1}, seed), I64({}, {8})}; }, 1, true});
  c.push_back({"DFTInverseComplexAxis2", "DFT", {{"inverse", int64_t{1}}, {"axis", int64_t{2}}},
               one({2, 2, 5, 2}), 1, true});
  c.push_back({"STFTWindowed", "STFT", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({1, 16, 1}, seed), I64({}, {4}), PositiveF32({8}, seed)};
               },
               1, true});
  c.push_back({"STFTComplexTwoSidedFrameLength", "STFT", {{"onesided", int64_t{0}}},
               [](int seed) {
                 return std::vector<Tensor>{F32({2, 9, 2}, seed), I32({1}, {3}), PositiveF32({4}, seed), I64({}, {4})};
               },
               1, true});
  c.push_back({"MelWeightMatrix", "MelWeightMatrix", {{"output_datatype", static_cast<int64_t>(DType::kF64)}},
               [](int) {
                 return std::vector<Tensor>{I64({}, {8}), I64({}, {32}), I32({}, {16000}),
                                            MakeTensor<float>(DType::kF32, {}, {20.0f}),
                                            MakeTensor<float>(DType::kF32, {1}, {8000.0f})};
               }});
  // NonMaxSuppression allocates its output (its size is the data's).
  c.push_back({"NonMaxSuppression", "NonMaxSuppression", {},
               [](int seed) {
                 return std::vector<Tensor>{F32({1, 6, 4}, seed), F32({1, 2, 6}, seed + 1), I64({}, {3}),
                                            MakeTensor<float>(DType::kF32, {}, {0.1f * static_cast<float>(seed)}),
                                            MakeTensor<float>(DType::kF32, {1}, {-0.5f})};
               },
               1, true, {{DType::kI64, 18}}});
  c.push_back({"NonMaxSuppressionCenterBoxes", "NonMaxSuppression", {{"center_point_box", int64_t{1}}},
               [](int seed) {
                 return std::vector<Tensor>{PositiveF32({2, 5, 4}, seed), F32({2, 1, 5}, seed), I32({1}, {5})};
               },
               1, true, {{DType::kI64, 30}}});
  return c;
}

// Every CPU kernel has a prepare, but those that act on host values by
// design: control flow (their bodies are plans of their own), the sequence
// and optional ops, Size and the string ops.
TEST(PreparedCpuKernel2Test, EveryCpuKernelHasAPrepare) {
  const std::set<std::string> host_value_ops = {
      "If", "Loop", "Scan", "Size", "StringNormalizer", "TfIdfVectorizer", "Optional", "OptionalHasElement",
      "OptionalGetElement", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
      "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap"};
  const ir::OpRegistry& registry = runtime::GlobalOpRegistry();
  const int cpu = static_cast<int>(ir::Backend::kCpu);
  std::vector<std::string> without;
  for (const std::string& type : registry.Types()) {
    const ir::OpDef* def = registry.Find(type);
    if (def->kernels[cpu] == nullptr || def->prepares[cpu] != nullptr || host_value_ops.count(type) > 0) continue;
    without.push_back(type);
  }
  EXPECT_THAT(without, ::testing::IsEmpty());
}

class PreparedCpuKernel2Test : public ::testing::TestWithParam<Case> {};

TEST_P(PreparedCpuKernel2Test, RegisteredWithAPrepare) {
  const ir::OpDef& def = Def(GetParam().type);
  EXPECT_NE(def.prepares[static_cast<int>(ir::Backend::kCpu)], nullptr);
}

TEST_P(PreparedCpuKernel2Test, OnePrepareManyInvokesMatchFreshRuns) { CheckOnePrepareManyInvokes(GetParam()); }

TEST_P(PreparedCpuKernel2Test, InvokeWithoutPrepareIsAnInternalError) {
  CheckInvokeWithoutPrepareIsAnInternalError(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, PreparedCpuKernel2Test, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Values checked when the step runs
// ---------------------------------------------------------------------------

// Compress's condition, ReverseSequence's lengths, a loss's class indices
// and MaxUnpool's indices are checked per run, with the message of an
// unprepared run.
TEST(PreparedCpuKernel2InvokeTest, DataErrorsAreReportedByTheInvoke) {
  struct Bad {
    std::string type;
    Attrs attrs;
    std::vector<Tensor> first, bad;
    std::vector<Tensor> capacity;
    std::string error;
  };
  std::vector<Bad> cases;
  cases.push_back({"Compress", {{"axis", int64_t{0}}},
                   {F32({2, 3}, 0), MakeTensor<uint8_t>(DType::kBool, {3}, {1, 0, 0})},
                   {F32({2, 3}, 1), MakeTensor<uint8_t>(DType::kBool, {3}, {0, 1, 1})},
                   {Tensor::Create(DType::kF32, {6}).value()},
                   "condition [3] selects entry 2 but the input has only 2 along axis 0"});
  cases.push_back({"ReverseSequence", {}, {F32({3, 2}, 0), I64({2}, {1, 3})}, {F32({3, 2}, 1), I64({2}, {2, 4})},
                   {F32({3, 2}, 0)}, "sequence_lens[1] is 4; expected 0..3"});
  cases.push_back({"NegativeLogLikelihoodLoss", {}, {F32({2, 3}, 0), I64({2}, {0, 2})},
                   {F32({2, 3}, 1), I64({2}, {1, 3})}, {Tensor::Create(DType::kF32, {}).value()},
                   "input 1 (target) holds 3 at [1]; expected a class index in [0, 3)"});
  cases.push_back({"MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2}}},
                   {F32({1, 1, 2}, 0), I64({1, 1, 2}, {0, 2})},
                   {F32({1, 1, 2}, 1), I64({1, 1, 2}, {0, 3})}, {F32({1, 1, 3}, 0)},
                   "input 1 (I) holds 3 at flat position 1; expected an index in [0, 3)"});
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.type);
    PreparedStep step(c.type, c.attrs, c.first, c.capacity);
    absl::StatusOr<ir::PreparedKernel> prepared = step.Prepare();
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    step.Keep(*std::move(prepared));
    size_t largest = 0;
    ASSERT_TRUE(step.Invoke(c.first, &largest).ok());
    const absl::Status s = step.Invoke(c.bad, &largest);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    EXPECT_EQ(RunOp(c.type, Ptrs(c.bad), c.attrs).status().message(), s.message());
  }
}

// ---------------------------------------------------------------------------
// Parameter inputs read when the step runs
// ---------------------------------------------------------------------------

// CumSum's axis, a window's size and a reduction's axes given as values the
// plan does not know are read when the step runs; the prepare defers them
// (and still declares the workspace), each invoke gives a fresh run's bytes.
TEST(PreparedCpuKernel2InvokeTest, ParameterInputsUnknownToThePlanAreReadPerRun) {
  const std::vector<UnknownInputsCase> cases = {
      {"CumSum", {}, [](int seed) { return std::vector<Tensor>{F32({0, 3, 4}, seed), I64({}, {seed % 3})}; }, {1},
       true},
      {"CumSum", {{"reverse", int64_t{1}}},
       [](int seed) { return std::vector<Tensor>{F32({3, 4, 2}, seed), I32({}, {seed % 3 - 3})}; }, {1}, true},
      {"HannWindow", {}, [](int) { return std::vector<Tensor>{I64({}, {6})}; }, {0}, true},
      // (A square input and keepdims 0: the same output shape for either
      // axis. The invoke plans as an unprepared run does: its groups are
      // allocated.)
      {"ReduceMax", {{"keepdims", int64_t{0}}},
       [](int seed) { return std::vector<Tensor>{F32({3, 3}, seed), I64({1}, {seed % 2 - 1})}; }, {1}},
      {"ReduceLogSumExp", {{"keepdims", int64_t{0}}},
       [](int seed) { return std::vector<Tensor>{F32({4, 4}, seed), I64({1}, {seed % 2})}; }, {1}},
      // Scales and zero points are read per run whether the plan knows
      // them or not.
      {"QuantizeLinear", {{"axis", int64_t{0}}},
       [](int seed) {
         return std::vector<Tensor>{F32({3, 2}, seed), PositiveF32({3}, seed),
                                    Ints<int8_t>(DType::kI8, {3}, seed)};
       },
       {1, 2}, true},
      {"QLinearConv", {},
       [](int seed) {
         return std::vector<Tensor>{Ints<uint8_t>(DType::kU8, {1, 1, 3, 3}, seed), PositiveF32({}, seed),
                                    Ints<uint8_t>(DType::kU8, {}, seed), Ints<int8_t>(DType::kI8, {2, 1, 2, 2}, seed),
                                    PositiveF32({2}, seed + 1), Ints<int8_t>(DType::kI8, {2}, seed),
                                    PositiveF32({}, seed + 2), Ints<uint8_t>(DType::kU8, {}, seed + 3)};
       },
       {1, 2, 4, 5, 6, 7}, true},
      // The values that size an output (DFT's dft_length, STFT's
      // frame_step, MaxUnpool's output_shape, MelWeightMatrix's inputs) are
      // planned per run, in the workspace the prepare declared from the
      // planned output.
      {"DFT", {{"onesided", int64_t{1}}},
       [](int seed) { return std::vector<Tensor>{F32({2, 7, 1}, seed), I64({}, {8 + seed % 2})}; }, {1}, true},
      {"STFT", {},
       [](int seed) { return std::vector<Tensor>{F32({1, 12, 1}, seed), I64({}, {seed % 2 == 0 ? 4 : 5})}; }, {1},
       true},
      {"MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2}}},
       [](int seed) {
         return std::vector<Tensor>{F32({1, 1, 2}, seed), I64({1, 1, 2}, {seed % 3, 2}), I64({3}, {1, 1, 4})};
       },
       {2}, true},
      {"MelWeightMatrix", {},
       [](int seed) {
         return std::vector<Tensor>{I64({}, {4}), I64({}, {16 + seed % 2}), I64({}, {8000}),
                                    MakeTensor<float>(DType::kF32, {}, {10.0f * static_cast<float>(seed)}),
                                    MakeTensor<float>(DType::kF32, {}, {3000.0f})};
       },
       {0, 1, 2, 3, 4}, true},
  };
  for (const UnknownInputsCase& c : cases) CheckUnknownInputsAreReadPerRun(c);
}

// ---------------------------------------------------------------------------
// Bad attributes and shapes: the prepare says so (the invoke never runs)
// ---------------------------------------------------------------------------

std::vector<BadCase> BadCases() {
  std::vector<BadCase> c;
  const Tensor nchw = F32({1, 8, 2, 3}, 0);
  c.push_back({"DepthToSpaceMode", "DepthToSpace", {{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}}, {nchw},
               {{DType::kF32, {1, 2, 4, 6}}}, "attribute mode is 'XYZ'"});
  c.push_back({"DepthToSpaceChannels", "DepthToSpace", {{"blocksize", int64_t{3}}}, {nchw},
               {{DType::kF32, {1, 1, 6, 9}}}, "channels must divide by 9"});
  c.push_back({"SpaceToDepthHeight", "SpaceToDepth", {{"blocksize", int64_t{2}}}, {F32({1, 2, 3, 4}, 0)},
               {{DType::kF32, {1, 8, 1, 2}}}, "height and width must divide by the blocksize 2"});
  c.push_back({"SpaceToDepthOutput", "SpaceToDepth", {{"blocksize", int64_t{2}}}, {F32({1, 2, 4, 4}, 0)},
               {{DType::kF32, {1, 8, 4, 1}}}, "output 0"});
  c.push_back({"EyeLikeRank3", "EyeLike", {}, {F32({2, 2, 2}, 0)}, {{DType::kF32, {2, 2, 2}}}, "must be 2-D"});
  c.push_back({"ReverseSequenceFloatLengths", "ReverseSequence", {}, {F32({3, 2}, 0), F32({2}, 1)},
               {{DType::kF32, {3, 2}}}, "input 1 (sequence_lens) has dtype f32; expected i32 or i64"});
  c.push_back({"ReverseSequenceLengthsShape", "ReverseSequence", {}, {F32({3, 2}, 0), I64({3}, {1, 1, 1})},
               {{DType::kF32, {3, 2}}}, "sequence_lens is [3]; expected [2]"});
  c.push_back({"ReverseSequenceAxes", "ReverseSequence", {{"batch_axis", int64_t{0}}},
               {F32({3, 2}, 0), I64({3}, {1, 1, 1})}, {{DType::kF32, {3, 2}}}, "expected rank >= 2 and axes 0 and 1 in either order"});
  c.push_back({"CumSumAxis", "CumSum", {}, {F32({2, 3}, 0), I64({}, {2})}, {{DType::kF32, {2, 3}}},
               "input 1 (axis): axis 2 is out of range for rank 2"});
  c.push_back({"CumSumScalar", "CumSum", {}, {F32({}, 0), I64({}, {0})}, {{DType::kF32, {}}},
               "input 0 (x) is a scalar; CumSum needs rank >= 1"});
  c.push_back({"CumSumFloatAxis", "CumSum", {}, {F32({2}, 0), F32({}, 1)}, {{DType::kF32, {2}}},
               "input 1 (axis) must be one i32 or i64; got f32 []"});
  c.push_back({"EinsumOperands", "Einsum", {{"equation", std::string("ij,jk->ik")}}, {F32({2, 3}, 0)},
               {{DType::kF32, {2, 3}}}, "Einsum"});
  c.push_back({"EinsumOutput", "Einsum", {{"equation", std::string("ij,jk->ik")}}, {F32({2, 3}, 0), F32({3, 4}, 1)},
               {{DType::kF32, {4, 2}}}, "output 0"});
  c.push_back({"DetNotSquare", "Det", {}, {F32({2, 3}, 0)}, {{DType::kF32, {}}},
               "X [2, 3] must be [..., M, M] (square matrices)"});
  c.push_back({"DetInt32", "Det", {}, {I32({1, 1}, {1})}, {{DType::kI32, {}}}, "i32"});
  c.push_back({"ReduceMaxAxes", "ReduceMax", {}, {F32({2, 3}, 0), I64({1}, {2})}, {{DType::kF32, {2, 3}}}, "axis"});
  c.push_back({"ReduceProdOutput", "ReduceProd", {}, {F32({2, 3}, 0), I64({1}, {1})}, {{DType::kF32, {2}}},
               "output 0 was allocated as f32 [2] but the kernel writes f32 [2, 1]"});
  c.push_back({"ReduceL2Bool", "ReduceL2", {}, {Bools({2}, 0)}, {{DType::kBool, {1}}}, "bool"});
  c.push_back({"HannWindowNegative", "HannWindow", {}, {I64({}, {-1})}, {{DType::kF32, {0}}},
               "input 0 (size) is -1; expected >= 0"});
  c.push_back({"HammingWindowFloatSize", "HammingWindow", {}, {F32({}, 0)}, {{DType::kF32, {1}}},
               "input 0 (size) has dtype f32; expected i32 or i64"});
  c.push_back({"BlackmanWindowTwoSizes", "BlackmanWindow", {}, {I64({2}, {3, 4})}, {{DType::kF32, {3}}},
               "input 0 (size) must hold one element (a scalar); got shape [2]"});
  c.push_back({"CompressCondition", "Compress", {}, {F32({4}, 0), I64({2}, {1, 0})}, {{DType::kF32, {4}}},
               "condition is i64 [2]; expected a 1-D bool tensor"});
  c.push_back({"CompressAxis", "Compress", {{"axis", int64_t{3}}}, {F32({4}, 0), Bools({2}, 0)},
               {{DType::kF32, {4}}}, "attribute axis: axis 3 is out of range for rank 1"});
  c.push_back({"UniqueSorted", "Unique", {{"sorted", int64_t{2}}}, {F32({4}, 0)}, {{DType::kF32, {4}}},
               "attribute sorted is 2; expected 0 or 1"});
  c.push_back({"UniqueScalarAxis", "Unique", {{"axis", int64_t{0}}}, {F32({}, 0)}, {{DType::kF32, {1}}},
               "X is a scalar; attribute axis needs rank >= 1"});
  c.push_back({"QuantizeLinearScaleShape", "QuantizeLinear", {}, {F32({2, 4}, 0), PositiveF32({3}, 0)},
               {{DType::kU8, {2, 4}}}, "input 1 (y_scale) has shape [3]; expected [] or [1] (per tensor) or [4]"});
  c.push_back({"DequantizeLinearZeroPointDType", "DequantizeLinear", {},
               {Ints<uint8_t>(DType::kU8, {2}, 0), PositiveF32({}, 0), Ints<int8_t>(DType::kI8, {}, 0)},
               {{DType::kF32, {2}}}, "input 2 (x_zero_point) has dtype i8; expected u8 like input 0 (x)"});
  c.push_back({"DynamicQuantizeLinearHalf", "DynamicQuantizeLinear", {}, {ToHalf(F32({2}, 0), DType::kF16)},
               {{DType::kU8, {2}}}, "input 0 (x) has dtype f16; expected f32"});
  c.push_back({"MatMulIntegerInnerDims", "MatMulInteger", {},
               {Ints<uint8_t>(DType::kU8, {2, 3}, 0), Ints<uint8_t>(DType::kU8, {4, 2}, 0)}, {{DType::kI32, {2, 2}}},
               "inner dims differ"});
  c.push_back({"QLinearMatMulYScale", "QLinearMatMul", {},
               {Ints<uint8_t>(DType::kU8, {2, 3}, 0), PositiveF32({}, 0), Ints<uint8_t>(DType::kU8, {}, 0),
                Ints<uint8_t>(DType::kU8, {3, 2}, 0), PositiveF32({}, 0), Ints<uint8_t>(DType::kU8, {}, 0),
                PositiveF32({2}, 0), Ints<uint8_t>(DType::kU8, {}, 0)},
               {{DType::kU8, {2, 2}}}, "input 6 (y_scale) has shape [2]; expected [] or [1] (per tensor)"});
  c.push_back({"ConvIntegerGroup", "ConvInteger", {},
               {Ints<uint8_t>(DType::kU8, {1, 3, 2, 2}, 0), Ints<int8_t>(DType::kI8, {2, 2, 1, 1}, 0)},
               {{DType::kI32, {1, 2, 2, 2}}}, "do not fit group 1"});
  c.push_back({"QLinearConvBiasDType", "QLinearConv", {},
               {Ints<uint8_t>(DType::kU8, {1, 1, 2, 2}, 0), PositiveF32({}, 0), Ints<uint8_t>(DType::kU8, {}, 0),
                Ints<int8_t>(DType::kI8, {1, 1, 1, 1}, 0), PositiveF32({}, 0), Ints<int8_t>(DType::kI8, {}, 0),
                PositiveF32({}, 0), Ints<uint8_t>(DType::kU8, {}, 0), I64({1}, {0})},
               {{DType::kU8, {1, 1, 2, 2}}}, "input 8 (B) has dtype i64; expected i32"});
  c.push_back({"NegativeLogLikelihoodLossReduction", "NegativeLogLikelihoodLoss", {{"reduction", std::string("avg")}},
               {F32({2, 3}, 0), I64({2}, {0, 1})}, {{DType::kF32, {}}},
               "attribute 'reduction' is 'avg'; expected 'none', 'sum' or 'mean'"});
  c.push_back({"SoftmaxCrossEntropyLossLabelsShape", "SoftmaxCrossEntropyLoss", {},
               {F32({2, 3}, 0), I64({3}, {0, 1, 2})},
               {{DType::kF32, {}}}, "input 1 (labels) has shape [3]; expected [2]"});
  c.push_back({"GridSampleMode", "GridSample", {{"mode", std::string("area")}},
               {F32({1, 1, 2, 2}, 0), F32({1, 1, 1, 2}, 0)},
               {{DType::kF32, {1, 1, 1, 1}}}, "attribute 'mode' is 'area'"});
  c.push_back({"MaxUnpoolIndicesDType", "MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2}}},
               {F32({1, 1, 2}, 0), I32({1, 1, 2}, {0, 1})}, {{DType::kF32, {1, 1, 3}}},
               "input 1 (I) has dtype i32; expected i64"});
  c.push_back({"DFTAxis", "DFT", {{"axis", int64_t{-1}}}, {F32({1, 4, 2}, 0)}, {{DType::kF32, {1, 4, 2}}},
               "attribute 'axis' is -1"});
  c.push_back({"STFTFrameStepShape", "STFT", {}, {F32({1, 8, 1}, 0), I64({2}, {2, 2})}, {{DType::kF32, {1, 1, 5, 2}}},
               "input 1 (frame_step) has shape [2]; expected a scalar"});
  c.push_back({"MelWeightMatrixFloatBins", "MelWeightMatrix", {},
               {F32({}, 0), I64({}, {8}), I64({}, {8000}), F32({}, 0), F32({}, 0)}, {{DType::kF32, {5, 1}}},
               "input 0 (num_mel_bins) has dtype f32; expected one of i64, i32"});
  c.push_back({"NonMaxSuppressionBoxes", "NonMaxSuppression", {}, {F32({1, 2, 3}, 0), F32({1, 1, 2}, 0)},
               {{DType::kI64, {0, 3}}},
               "input 0 (boxes) has shape [1, 2, 3]; expected [num_batches, spatial_dimension, 4]"});
  return c;
}

class PreparedCpuKernel2ErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PreparedCpuKernel2ErrorTest, ThePrepareReportsIt) { CheckThePrepareReportsIt(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, PreparedCpuKernel2ErrorTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace grove::testing
