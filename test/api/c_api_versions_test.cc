// Versioned structs of the C ABI (grove_c.h, "Versioned structs"): callers
// built against an older layout (their own copy of version 1 of the options
// and stats structs, with a canary after it) and against a newer one (fields
// this library does not know), and every bad struct_size.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "grove/grove.h"
#include "grove/grove_c.h"
#include "gtest/gtest.h"
#include "lib/c/c_api_internal.h"
#include "test/api/c_api_test_util.h"

namespace {

using ::testing::HasSubstr;

using grove::c_test::Ok;
using grove::c_test::Failure;  // INVALID_ARGUMENT by default

// Version 1 of the layouts, as a program built against that header declares
// them.
struct OptionsV1 {
  size_t struct_size;
  grove_device_t device;
  int32_t max_cached_plans;
  int32_t cuda_device;
  void* cuda_stream;
  int32_t strict_device;
  int32_t outputs_on_device;
  grove_gemm_math_t gemm_math;
  int64_t run_deadline_ms;
  grove_cancel_token_t* cancel_token;
  int64_t max_body_runs;
};
struct OptionsV2 {
  OptionsV1 v1;
  grove_graph_mode_t cuda_graphs;
  int32_t max_cached_graphs;
};
struct StatsV1 {
  size_t struct_size;
  int64_t runs;
  int64_t plans_created;
  int64_t plan_cache_hits;
  int64_t plans_evicted;
  int64_t kernels_run;
  int64_t device_allocations;
  int64_t device_synchronizations;
  int64_t device_to_host_reads;
  int64_t segments_run;
  int64_t host_waits_inside_segments;
};
struct StatsV2 {
  StatsV1 v1;
  int64_t cpu_fallback_steps;
  int64_t bytes_host_to_device;
  int64_t bytes_device_to_host;
};
static_assert(sizeof(OptionsV1) == GROVE_SESSION_OPTIONS_SIZE_V1);
static_assert(sizeof(OptionsV2) == GROVE_SESSION_OPTIONS_SIZE_V2);
static_assert(sizeof(StatsV1) == GROVE_SESSION_STATS_SIZE_V1);
static_assert(sizeof(StatsV2) == GROVE_SESSION_STATS_SIZE_V2);

// A newer program's structs: today's fields and two this library lacks.
struct OptionsNext {
  grove_session_options_t known;
  int64_t future_option;
  int64_t another_future_option;
};
struct StatsNext {
  grove_session_stats_t known;
  int64_t future_counter;
  int64_t another_future_counter;
};

// A struct with a canary after it, to see writes past its end.
template <typename T>
struct Guarded {
  T value;
  uint64_t canary[4];
};
constexpr uint64_t kCanary = 0xc0ffee00c0ffee00;
constexpr int64_t kFill = 0x5a5a5a5a5a5a5a5a;

template <typename T>
void Fill(Guarded<T>& g) {
  std::memset(&g.value, 0x5a, sizeof(g.value));
  for (uint64_t& c : g.canary) c = kCanary;
}
template <typename T>
bool CanaryIntact(const Guarded<T>& g) {
  for (uint64_t c : g.canary) {
    if (c != kCanary) return false;
  }
  return true;
}

// x[batch, 4] f32 -> y = Relu(x W) [batch, 2]; batch in 1..8.
std::vector<uint8_t> BuildModel() {
  grove::ModelBuilder b;
  b.AddSymbol("batch", 1, 8);
  b.AddInput("x", grove::DType::kF32, {"batch", 4});
  b.AddWeight("w", grove::DType::kF32, {4, 2}, std::vector<float>{1, -1, 2, 0, -1, 1, 0.5f, 2});
  b.AddOp("MatMul", {"x", "w"}, {"xw"});
  b.AddOp("Relu", {"xw"}, {"y"});
  b.AddOutput("y");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

class CApiVersionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<uint8_t> bytes = BuildModel();
    ASSERT_FALSE(bytes.empty());
    ASSERT_TRUE(Ok(grove_model_load_buffer(bytes.data(), bytes.size(), &model_)));
  }
  void TearDown() override { grove_model_release(model_); }

  // Runs `session` `n` times on a batch of 2.
  void RunTimes(grove_session_t* session, int n) {
    std::vector<float> x(8, 0.5f);
    grove_tensor_t in{};
    in.dtype = GROVE_DTYPE_F32;
    in.rank = 2;
    in.dims[0] = 2;
    in.dims[1] = 4;
    in.data = x.data();
    in.byte_size = x.size() * sizeof(float);
    for (int i = 0; i < n; ++i) {
      grove_tensor_t out{};
      ASSERT_TRUE(Ok(grove_session_run(session, &in, 1, &out, 1)));
    }
  }

  grove_model_t* model_ = nullptr;
};

TEST(CApiVersions, SizesOfEachVersion) {
  if (sizeof(void*) == 8) EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V1, 72u);  // two 4-byte holes
  if (sizeof(void*) == 8) {
    EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V2, 80u);
  }
  EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V3, GROVE_SESSION_OPTIONS_SIZE_V2 + sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V4, GROVE_SESSION_OPTIONS_SIZE_V3 + sizeof(const char*) + sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V5, GROVE_SESSION_OPTIONS_SIZE_V4 + 3 * sizeof(void*) + 2 * sizeof(int32_t));
  EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V6, GROVE_SESSION_OPTIONS_SIZE_V5 + sizeof(const char*));
  EXPECT_EQ(GROVE_SESSION_OPTIONS_SIZE_V6, sizeof(grove_session_options_t));
  grove_session_options_t options;
  std::memset(&options, 0x5a, sizeof(options));
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.intra_op_threads, grove::SessionOptions().intra_op_threads);
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V1, sizeof(size_t) + 10 * sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V2, sizeof(size_t) + 13 * sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V3, sizeof(size_t) + 23 * sizeof(int64_t) + sizeof(const char*));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V4, GROVE_SESSION_STATS_SIZE_V3 + sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V5, GROVE_SESSION_STATS_SIZE_V4 + 4 * sizeof(int64_t) + sizeof(const char*));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V6, GROVE_SESSION_STATS_SIZE_V5 + 2 * sizeof(int64_t));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V7, GROVE_SESSION_STATS_SIZE_V6 + 2 * sizeof(int64_t) + sizeof(const char*));
  EXPECT_EQ(GROVE_SESSION_STATS_SIZE_V7, sizeof(grove_session_stats_t));
  const grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  EXPECT_EQ(stats.struct_size, sizeof(grove_session_stats_t));
  EXPECT_EQ(stats.runs, 0);
  EXPECT_EQ(stats.bytes_device_to_host, 0);
  grove_session_stats_t filled;
  std::memset(&filled, 0x5a, sizeof(filled));
  grove_session_stats_initialize(&filled);
  EXPECT_EQ(filled.struct_size, sizeof(filled));
  EXPECT_EQ(filled.runs, 0);
  EXPECT_EQ(filled.graph_fallback_reason, nullptr);
  grove_session_stats_initialize(nullptr);
  grove_kernel_report_summary_t summary;
  std::memset(&summary, 0x5a, sizeof(summary));
  grove_kernel_report_summary_initialize(&summary);
  EXPECT_EQ(summary.struct_size, sizeof(summary));
  EXPECT_EQ(summary.compiled, 0);
}

// A version-1 caller: initialize writes nothing past its struct, a session
// made from it has the defaults, and stats fill its ten counters only.
TEST_F(CApiVersionsTest, OlderCallerGetsDefaultsAndNothingWrittenPastItsStructs) {
  Guarded<OptionsV1> options;
  Fill(options);
  grove_session_options_initialize_sized(reinterpret_cast<grove_session_options_t*>(&options.value),
                                         sizeof(OptionsV1));
  EXPECT_TRUE(CanaryIntact(options)) << "initialize wrote past a version-1 struct";
  EXPECT_EQ(options.value.struct_size, sizeof(OptionsV1));
  EXPECT_EQ(options.value.device, GROVE_DEVICE_AUTO);
  EXPECT_EQ(options.value.max_cached_plans, grove::SessionOptions().max_cached_plans);
  EXPECT_EQ(options.value.max_body_runs, grove::SessionOptions().max_body_runs);
  EXPECT_EQ(options.value.cancel_token, nullptr);
  options.value.device = GROVE_DEVICE_CPU;
  options.value.max_cached_plans = 1;
  options.value.max_body_runs = 77;

  // Its fields are honoured, the later versions' take their defaults.
  grove::SessionOptions made;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions(
      "test", reinterpret_cast<const grove_session_options_t*>(&options.value), &made)));
  EXPECT_EQ(made.device, grove::Device::kCpu);
  EXPECT_EQ(made.max_cached_plans, 1);
  EXPECT_EQ(made.max_body_runs, 77);
  EXPECT_EQ(made.cuda_graphs, grove::SessionOptions().cuda_graphs);
  EXPECT_EQ(made.max_cached_graphs, grove::SessionOptions().max_cached_graphs);
  EXPECT_EQ(made.intra_op_threads, grove::SessionOptions().intra_op_threads);

  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, reinterpret_cast<const grove_session_options_t*>(&options.value),
                                      &session)));
  grove_device_t device = -1;
  EXPECT_TRUE(Ok(grove_session_device(session, &device)));
  EXPECT_EQ(device, GROVE_DEVICE_CPU);
  RunTimes(session, 3);

  Guarded<StatsV1> stats;
  Fill(stats);
  stats.value.struct_size = sizeof(StatsV1);
  ASSERT_TRUE(Ok(grove_session_stats(session, reinterpret_cast<grove_session_stats_t*>(&stats.value))));
  EXPECT_TRUE(CanaryIntact(stats)) << "grove_session_stats wrote past a version-1 struct";
  EXPECT_EQ(stats.value.struct_size, sizeof(StatsV1));
  EXPECT_EQ(stats.value.runs, 3);
  EXPECT_EQ(stats.value.plans_created, 1);
  EXPECT_EQ(stats.value.plan_cache_hits, 2);
  EXPECT_GT(stats.value.kernels_run, 0);
  EXPECT_EQ(stats.value.device_allocations, 0);
  EXPECT_EQ(stats.value.host_waits_inside_segments, 0);
  EXPECT_NE(stats.value.segments_run, kFill);

  // The same session read with today's struct agrees on the shared fields.
  grove_session_stats_t now = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(session, &now)));
  EXPECT_EQ(now.runs, stats.value.runs);
  EXPECT_EQ(now.kernels_run, stats.value.kernels_run);
  EXPECT_EQ(now.segments_run, stats.value.segments_run);
  EXPECT_EQ(now.cpu_fallback_steps, 0);

  // A version-2 caller: no graph counters written, no reason pointer.
  Guarded<StatsV2> v2;
  Fill(v2);
  v2.value.v1.struct_size = sizeof(StatsV2);
  ASSERT_TRUE(Ok(grove_session_stats(session, reinterpret_cast<grove_session_stats_t*>(&v2.value))));
  EXPECT_TRUE(CanaryIntact(v2)) << "grove_session_stats wrote past a version-2 struct";
  EXPECT_EQ(v2.value.v1.runs, 3);
  EXPECT_EQ(v2.value.cpu_fallback_steps, 0);
  EXPECT_EQ(v2.value.bytes_device_to_host, 0);
  grove_session_release(session);
}

// A caller newer than this library: its known fields are honoured, the
// initializer zeroes the ones this library lacks, a session is made while
// they stay 0 and refused (naming the byte) once one is set; stats leave the
// unknown counters as the caller set them.
TEST_F(CApiVersionsTest, NewerCallerKnownFieldsHonouredUnknownOptionsMustBeZero) {
  Guarded<OptionsNext> options;
  Fill(options);
  grove_session_options_initialize_sized(&options.value.known, sizeof(OptionsNext));
  EXPECT_TRUE(CanaryIntact(options));
  EXPECT_EQ(options.value.known.struct_size, sizeof(OptionsNext));
  EXPECT_EQ(options.value.known.max_body_runs, grove::SessionOptions().max_body_runs);
  EXPECT_EQ(options.value.future_option, 0) << "initialize leaves fields it does not know at 0";
  EXPECT_EQ(options.value.another_future_option, 0);
  options.value.known.device = GROVE_DEVICE_CPU;
  options.value.known.max_cached_graphs = 3;
  options.value.known.intra_op_threads = 2;
  grove::SessionOptions made;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options.value.known, &made)));
  EXPECT_EQ(made.device, grove::Device::kCpu);
  EXPECT_EQ(made.max_cached_graphs, 3);
  EXPECT_EQ(made.intra_op_threads, 2);

  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options.value.known, &session)));
  grove_device_t device = -1;
  EXPECT_TRUE(Ok(grove_session_device(session, &device)));
  EXPECT_EQ(device, GROVE_DEVICE_CPU);
  RunTimes(session, 2);

  Guarded<StatsNext> stats;
  Fill(stats);
  stats.value.known.struct_size = sizeof(StatsNext);
  stats.value.future_counter = -7;
  stats.value.another_future_counter = -8;
  ASSERT_TRUE(Ok(grove_session_stats(session, &stats.value.known)));
  EXPECT_TRUE(CanaryIntact(stats));
  EXPECT_EQ(stats.value.known.struct_size, sizeof(StatsNext));
  EXPECT_EQ(stats.value.known.runs, 2);
  EXPECT_EQ(stats.value.known.bytes_device_to_host, 0);
  EXPECT_EQ(stats.value.future_counter, -7) << "a counter this library does not know was written";
  EXPECT_EQ(stats.value.another_future_counter, -8);
  grove_session_release(session);

  // An option this library does not have, set: refused, naming the byte.
  options.value.another_future_option = 1;
  session = nullptr;
  const std::string message = Failure(grove_session_create(model_, &options.value.known, &session));
  EXPECT_THAT(message, HasSubstr("grove_session_create: options->struct_size is " +
                                 std::to_string(sizeof(OptionsNext)) + " (a newer grove_session_options_t) and byte " +
                                 std::to_string(offsetof(OptionsNext, another_future_option))));
  EXPECT_THAT(message, HasSubstr("knows only the first " + std::to_string(sizeof(grove_session_options_t)) +
                                 " bytes: a field it does not have was set"));
  EXPECT_EQ(session, nullptr);
}

TEST_F(CApiVersionsTest, BadOptionsStructSizeIsAnErrorNamingTheStruct) {
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  grove_session_t* session = nullptr;

  options.struct_size = 0;
  std::string message = Failure(grove_session_create(model_, &options, &session));
  EXPECT_THAT(message, HasSubstr("grove_session_create: options->struct_size is 0 (not set)"));
  EXPECT_THAT(message, HasSubstr("grove_session_options_t versions are " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V1) + ", " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V2) + ", " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V3) + ", " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V4) + ", " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V5) + ", " +
                                 std::to_string(GROVE_SESSION_OPTIONS_SIZE_V6) + " bytes"));
  EXPECT_THAT(message, HasSubstr("set it with grove_session_options_initialize()"));

  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V1 - 8;
  message = Failure(grove_session_create(model_, &options, &session));
  EXPECT_THAT(message, HasSubstr("options->struct_size is " + std::to_string(GROVE_SESSION_OPTIONS_SIZE_V1 - 8) +
                                 ", below the first version's"));

  options.struct_size = sizeof(size_t);
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)), HasSubstr("below the first version's"));

  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V1 + 4;
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("between the sizes of two versions"));
  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V2 + 4;
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("between the sizes of two versions"));

  // Garbage (an uninitialized struct) is refused before any byte past the
  // struct is read.
  std::memset(&options, 0x5a, sizeof(options));
  message = Failure(grove_session_create(model_, &options, &session));
  EXPECT_THAT(message, HasSubstr("above GROVE_MAX_STRUCT_SIZE (4096)"));
  EXPECT_THAT(message, HasSubstr("grove_session_options_t"));
  EXPECT_EQ(session, nullptr);

  // NULL options are the defaults; NULL out_session an error.
  ASSERT_TRUE(Ok(grove_session_create(model_, nullptr, &session)));
  grove_session_release(session);
  grove_session_options_initialize(&options);
  EXPECT_THAT(Failure(grove_session_create(model_, &options, nullptr)), HasSubstr("out_session is NULL"));
}

TEST_F(CApiVersionsTest, BadStatsStructSizeIsAnErrorAndWritesNothing) {
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, nullptr, &session)));
  const size_t bad_sizes[] = {0, 1, sizeof(size_t), GROVE_SESSION_STATS_SIZE_V1 - 8, GROVE_SESSION_STATS_SIZE_V1 + 8,
                              GROVE_SESSION_STATS_SIZE_V2 - 1, GROVE_SESSION_STATS_SIZE_V3 - 8,
                              GROVE_MAX_STRUCT_SIZE + 1, ~size_t{0}};
  for (size_t size : bad_sizes) {
    SCOPED_TRACE(size);
    Guarded<grove_session_stats_t> stats;
    Fill(stats);
    stats.value.struct_size = size;
    const std::string message = Failure(grove_session_stats(session, &stats.value));
    EXPECT_THAT(message, HasSubstr("grove_session_stats: out_stats->struct_size is " + std::to_string(size)));
    EXPECT_THAT(message, HasSubstr("grove_session_stats_t versions are " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V1) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V2) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V3) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V4) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V5) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V6) + ", " +
                                   std::to_string(GROVE_SESSION_STATS_SIZE_V7) + " bytes"));
    EXPECT_THAT(message, HasSubstr("GROVE_SESSION_STATS_INIT"));
    EXPECT_EQ(stats.value.struct_size, size);
    EXPECT_EQ(stats.value.runs, kFill) << "a refused call wrote the stats";
    EXPECT_TRUE(CanaryIntact(stats));
  }
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  stats.struct_size = GROVE_SESSION_STATS_SIZE_V1 + 8;
  EXPECT_THAT(Failure(grove_session_stats(session, &stats)), HasSubstr("between the sizes of two versions"));
  EXPECT_THAT(Failure(grove_session_stats(session, nullptr)), HasSubstr("out_stats is NULL"));
  EXPECT_THAT(Failure(grove_session_stats(nullptr, &stats)), HasSubstr("session is NULL"));
  grove_session_release(session);
}

// A version-2 caller (before intra_op_threads): initialize writes nothing
// past its struct and its sessions get the default thread count; today's
// callers set it, and a bad one is refused naming the field.
TEST_F(CApiVersionsTest, IntraOpThreadsVersion3) {
  Guarded<OptionsV2> v2;
  Fill(v2);
  grove_session_options_initialize_sized(reinterpret_cast<grove_session_options_t*>(&v2.value), sizeof(OptionsV2));
  EXPECT_TRUE(CanaryIntact(v2)) << "initialize wrote past a version-2 struct";
  EXPECT_EQ(v2.value.max_cached_graphs, grove::SessionOptions().max_cached_graphs);
  v2.value.v1.device = GROVE_DEVICE_CPU;
  v2.value.max_cached_graphs = 5;
  grove::SessionOptions made;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions(
      "test", reinterpret_cast<const grove_session_options_t*>(&v2.value), &made)));
  EXPECT_EQ(made.max_cached_graphs, 5);
  EXPECT_EQ(made.intra_op_threads, 1);
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, reinterpret_cast<const grove_session_options_t*>(&v2.value),
                                      &session)));
  RunTimes(session, 2);
  grove_session_release(session);

  grove_session_options_t options;
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.intra_op_threads, 1);
  options.device = GROVE_DEVICE_CPU;
  for (int64_t threads : {int64_t{0}, int64_t{1}, int64_t{3}}) {
    SCOPED_TRACE(threads);
    options.intra_op_threads = threads;
    ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
    EXPECT_EQ(made.intra_op_threads, threads);
    session = nullptr;
    ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
    RunTimes(session, 2);
    grove_session_release(session);
  }
  for (int64_t bad : {int64_t{-1}, int64_t{257}, int64_t{1} << 40}) {
    SCOPED_TRACE(bad);
    options.intra_op_threads = bad;
    session = nullptr;
    const std::string message = Failure(grove_session_create(model_, &options, &session));
    EXPECT_THAT(message, HasSubstr("grove_session_create: options->intra_op_threads is " + std::to_string(bad) +
                                   " (1 to 256, or 0 for one per core, expected)"));
    EXPECT_EQ(session, nullptr);
  }
}

// Version 4 of the options (shape_buckets, max_graph_bytes) and 5 of the stats (the bucket
// counters): a version-3 caller gets the default buckets; the string's
// entries reach SessionOptions; one that is not SYMBOL=RULE, or a rule
// Session::Create refuses, is an error naming it; the stats' reason is a
// string the session owns.
TEST_F(CApiVersionsTest, ShapeBucketsVersion4) {
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.shape_buckets, nullptr);
  grove::SessionOptions made;
  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V3;
  options.shape_buckets = "batch=exact";  // past a version-3 struct: not read
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_TRUE(made.shape_buckets.empty());

  options.struct_size = sizeof(options);
  options.device = GROVE_DEVICE_CPU;
  options.shape_buckets = "batch=2,8,64;*=pow2;";
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.shape_buckets, (std::vector<std::pair<std::string, std::string>>{{"batch", "2,8,64"},
                                                                                  {"*", "pow2"}}));
  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
  RunTimes(session, 1);
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  ASSERT_TRUE(Ok(grove_session_stats(session, &stats)));
  EXPECT_EQ(stats.buckets_made, 0);  // the CPU has no graphs to share
  EXPECT_EQ(stats.bucket_padding_bytes, 0);
  ASSERT_NE(stats.bucket_fallback_reason, nullptr);
  EXPECT_STREQ(stats.bucket_fallback_reason, "");
  grove_session_release(session);

  options.max_graph_bytes = 1 << 20;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.max_graph_bytes, 1 << 20);
  options.max_graph_bytes = -1;
  session = nullptr;
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("options->max_graph_bytes is negative (-1)"));
  options.max_graph_bytes = 0;
  options.shape_buckets = "batch";
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("options->shape_buckets: 'batch' is not SYMBOL=RULE"));
  options.shape_buckets = "=pow2";
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)), HasSubstr("is not SYMBOL=RULE"));
  options.shape_buckets = "nope=pow2";
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)), HasSubstr("no symbol 'nope'"));
  options.shape_buckets = "batch=pow3";
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)), HasSubstr("none of auto, pow2"));
  EXPECT_EQ(session, nullptr);
}

// Version 5 of the options (trace_path, log_callback, log_user_data,
// trace_max_runs, log_level): a version-4 caller traces nothing and logs
// nothing; the fields reach SessionOptions; the callback gets the session's
// messages with the caller's user_data; a trace is written at release and by
// grove_session_write_trace; bad values are errors naming the field.
struct LogRecord {
  std::vector<std::pair<grove_log_level_t, std::string>> messages;
};
void RecordLog(void* user_data, grove_log_level_t level, const char* message) {
  static_cast<LogRecord*>(user_data)->messages.emplace_back(level, message);
}

TEST_F(CApiVersionsTest, TraceAndLogVersion5) {
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.trace_path, nullptr);
  EXPECT_EQ(options.log_callback, nullptr);
  EXPECT_EQ(options.trace_max_runs, grove::SessionOptions().trace_max_runs);
  EXPECT_EQ(options.log_level, GROVE_LOG_WARNING);
  const char* dir = std::getenv("GROVE_TEST_TMP");
  const std::string base = dir != nullptr ? dir : ::testing::TempDir();
  std::filesystem::create_directories(base);
  const std::string path = base + "/c_api_trace_" + std::to_string(getpid()) + ".json";
  LogRecord log;
  grove::SessionOptions made;
  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V4;
  options.trace_path = path.c_str();  // past a version-4 struct: not read
  options.log_callback = &RecordLog;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.trace_path, "");
  EXPECT_EQ(made.log_sink, nullptr);

  options.struct_size = sizeof(options);
  options.device = GROVE_DEVICE_CPU;
  options.log_user_data = &log;
  options.log_level = GROVE_LOG_DEBUG;
  options.trace_max_runs = 3;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.trace_path, path);
  EXPECT_EQ(made.trace_max_runs, 3);
  EXPECT_EQ(made.log_level, grove::LogLevel::kDebug);
  ASSERT_NE(made.log_sink, nullptr);

  grove_session_t* session = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
  RunTimes(session, 5);
  ASSERT_FALSE(log.messages.empty());
  EXPECT_EQ(log.messages[0].first, GROVE_LOG_DEBUG);
  EXPECT_THAT(log.messages[0].second, HasSubstr("plan made for subgraph 'main'"));
  const std::string copy = path + ".copy.json";
  ASSERT_TRUE(Ok(grove_session_write_trace(session, copy.c_str())));
  grove_session_release(session);  // writes `path`
  for (const std::string& file : {path, copy}) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    size_t runs = 0;
    for (size_t at = text.str().find("\"cat\":\"run\""); at != std::string::npos;
         at = text.str().find("\"cat\":\"run\"", at + 1)) {
      ++runs;
    }
    EXPECT_EQ(runs, 3u) << file << ": the last trace_max_runs runs";
    std::remove(file.c_str());
  }

  session = nullptr;
  options.trace_max_runs = 0;
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("options->trace_max_runs is 0 (at least 1 expected)"));
  options.trace_max_runs = 1;
  options.log_level = 7;
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)), HasSubstr("options->log_level is 7"));
  options.log_level = GROVE_LOG_ERROR;
  options.trace_path = "/nonexistent-grove-dir/t.json";
  EXPECT_THAT(Failure(grove_session_create(model_, &options, &session)),
              HasSubstr("trace file '/nonexistent-grove-dir/t.json' cannot be written"));
  EXPECT_EQ(session, nullptr);

  options.trace_path = nullptr;
  ASSERT_TRUE(Ok(grove_session_create(model_, &options, &session)));
  EXPECT_THAT(Failure(grove_session_write_trace(session, nullptr), GROVE_STATUS_FAILED_PRECONDITION),
              HasSubstr("does not trace"));
  grove_session_release(session);
  EXPECT_THAT(Failure(grove_session_write_trace(nullptr, nullptr)), HasSubstr("session"));
}

// The initializer writes nothing for a NULL struct or a size the library
// would refuse (it cannot report an error: its callers pass sizeof).
TEST(CApiVersions, InitializeIgnoresNullAndBadSizes) {
  grove_session_options_initialize_sized(nullptr, sizeof(grove_session_options_t));
  grove_session_options_initialize(nullptr);
  for (size_t size : {size_t{0}, sizeof(size_t), GROVE_SESSION_OPTIONS_SIZE_V1 - 1, size_t{GROVE_MAX_STRUCT_SIZE + 1}}) {
    SCOPED_TRACE(size);
    Guarded<grove_session_options_t> options;
    Fill(options);
    grove_session_options_initialize_sized(&options.value, size);
    EXPECT_EQ(options.value.max_body_runs, kFill);
    EXPECT_TRUE(CanaryIntact(options));
  }
}

}  // namespace
