// Concurrency: what grove shares between threads, used from many at once.
// Sessions on 8 threads share one Model (1,000 runs each, varying shapes, so
// plans are made and hit concurrently) and must give the single-threaded
// results; the kernel cache compiles each module once when threads ask for
// it first at the same time, the process-wide cache included. Run in the
// normal build and under ThreadSanitizer (scripts/sanitize.sh thread), where
// a data race fails the test.
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/models/demo_models.h"
#include "grove/grove.h"
#include "gtest/gtest.h"
#include "jit/kernel_cache.h"
#include "jit/module.h"
#include "lib/runtime/model_impl.h"
#include "test/model_test_util.h"

namespace grove {
namespace {

constexpr int kThreads = 8;

std::string NewTempDir(const std::string& name) {
  const char* base = std::getenv("GROVE_TEST_TMP");
  std::string root = base != nullptr && base[0] != '\0' ? base : "/tmp";
  std::string dir = absl::StrCat(root, "/concurrency_", name, "_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Every thread runs its own session of `model` `runs` times over `inputs`
// (round robin) and compares each output with `expected` bit for bit.
void RunOnThreads(const std::shared_ptr<const Model>& model, const std::vector<std::vector<Tensor>>& inputs,
                  const std::vector<std::vector<std::vector<float>>>& expected, int runs) {
  std::latch start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      SessionOptions options;
      options.device = Device::kCpu;
      absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(model, options);
      start.arrive_and_wait();
      if (!session.ok()) {
        ++failures;
        first_error[t] = session.status().ToString();
        return;
      }
      for (int r = 0; r < runs; ++r) {
        const size_t which = static_cast<size_t>(r + t) % inputs.size();
        std::vector<TensorView> views;
        for (const Tensor& x : inputs[which]) views.push_back(x.view());
        absl::StatusOr<std::vector<TensorView>> out = (*session)->Run(views);
        if (!out.ok()) {
          if (failures++ == 0 || first_error[t].empty()) first_error[t] = out.status().ToString();
          continue;
        }
        for (size_t o = 0; o < out->size(); ++o) {
          if (testing::ToVector((*out)[o]) != expected[which][o]) {
            if (failures++ == 0 || first_error[t].empty()) {
              first_error[t] = absl::StrCat("run ", r, " input set ", which, " output ", o, " differs");
            }
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(first_error[t], "") << "thread " << t;
}

// The expected outputs: one session, one thread.
std::vector<std::vector<std::vector<float>>> Expected(const std::shared_ptr<const Model>& model,
                                                      const std::vector<std::vector<Tensor>>& inputs) {
  std::unique_ptr<Session> session = testing::CpuSession(model);
  std::vector<std::vector<std::vector<float>>> expected;
  for (const std::vector<Tensor>& set : inputs) {
    std::vector<TensorView> views;
    for (const Tensor& x : set) views.push_back(x.view());
    absl::StatusOr<std::vector<TensorView>> out = session->Run(views);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::vector<float>> outs;
    if (out.ok()) {
      for (const TensorView& v : *out) outs.push_back(testing::ToVector(v));
    }
    expected.push_back(std::move(outs));
  }
  return expected;
}

TEST(SharedUseTest, SessionsOnEightThreadsShareOneModel) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t batch : {1, 3, 2, 5}) {
    inputs.push_back({testing::TensorF32({batch, 16}, testing::RandomF32(batch * 16, 7 + batch))});
  }
  RunOnThreads(model, inputs, Expected(model, inputs), 1000);
}

// Control flow: If picks a branch per run (the output width depends on the
// data), so each thread's plans for both branches are made and reused.
TEST(SharedUseTest, SessionsOnEightThreadsShareAnIfModel) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildEarlyExit());
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t batch : {1, 2, 3}) {
    std::vector<float> pos = testing::RandomF32(batch * 8, 11 + batch);
    std::vector<float> neg = pos;
    for (float& v : pos) v = v < 0 ? -v + 0.1f : v + 0.1f;
    for (float& v : neg) v = v > 0 ? -v - 0.1f : v - 0.1f;
    inputs.push_back({testing::TensorF32({batch, 8}, pos)});
    inputs.push_back({testing::TensorF32({batch, 8}, neg)});
  }
  RunOnThreads(model, inputs, Expected(model, inputs), 250);
}

// A model's outputs are described on first use: threads that ask for them
// at once (outputs() and Summary(), while others run sessions) all get the
// one description.
TEST(SharedUseTest, OutputsDescribedOnceForEightThreads) {
  std::shared_ptr<const Model> model = testing::LoadOrDie(demo::BuildMlp());
  ASSERT_FALSE(model->impl().outputs_described());
  // oneDNN's process-wide state (its primitive cache) is made on first use,
  // inside libdnnl, which ThreadSanitizer cannot see into: made here first,
  // as the other tests do (Expected), the threads below only use it. A run
  // does not describe the outputs.
  {
    Tensor x = testing::TensorF32({2, 16}, testing::RandomF32(32, 99));
    ASSERT_TRUE(testing::CpuSession(model)->Run({x.view()}).ok());
    ASSERT_FALSE(model->impl().outputs_described());
  }
  std::latch start(kThreads);
  std::vector<const std::vector<TensorInfo>*> got(kThreads);
  std::vector<std::string> notes(kThreads, "unset"), errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Session> session = t % 4 == 3 ? testing::CpuSession(model) : nullptr;
      start.arrive_and_wait();
      if (session != nullptr) {
        Tensor x = testing::TensorF32({2, 16}, testing::RandomF32(32, t));
        absl::StatusOr<std::vector<TensorView>> out = session->Run({x.view()});
        if (!out.ok()) errors[t] = out.status().ToString();
      }
      if (t % 2 == 0) notes[t] = model->Summary().shape_inference_note;
      got[t] = &model->outputs();
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(model->impl().outputs_described());
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(got[t], got[0]) << "thread " << t;
    if (t % 2 == 0) EXPECT_EQ(notes[t], "") << "thread " << t;
  }
  ASSERT_EQ(got[0]->size(), 1u);
  EXPECT_EQ((*got[0])[0].name, "y");
  ASSERT_EQ((*got[0])[0].shape.size(), 2u);
  EXPECT_EQ((*got[0])[0].shape[0].symbol, "batch");
  EXPECT_EQ((*got[0])[0].shape[1].value, 4);
}

// Threads ask one cache for several modules at once, each in its own order:
// every module compiles once and all threads get the same entry.
TEST(SharedUseTest, KernelCacheFirstUseFromEightThreads) {
  const std::string dir = NewTempDir("kernel_cache");
  jit::KernelCache cache({.disk_dir = dir});
  const std::vector<jit::ModuleSpec> modules = {{"selftest", {DType::kF32}}, {"selftest", {DType::kF16}}};
  constexpr int kArch = 90;
  std::latch start(kThreads);
  std::vector<std::vector<const jit::CachedModule*>> got(kThreads, std::vector<const jit::CachedModule*>(2));
  std::vector<std::string> errors(kThreads);
  std::vector<std::shared_ptr<const jit::CachedModule>> keep(kThreads * 2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int k = 0; k < 2; ++k) {
        const int m = (t + k) % 2;
        absl::StatusOr<std::shared_ptr<const jit::CachedModule>> entry = cache.Get(modules[m], kArch);
        if (!entry.ok()) {
          errors[t] = entry.status().ToString();
          return;
        }
        keep[t * 2 + m] = *entry;
        got[t][m] = entry->get();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(got[t][0], got[0][0]);
    EXPECT_EQ(got[t][1], got[0][1]);
  }
  const jit::CacheStats stats = cache.stats();
  EXPECT_EQ(stats.compiles, 2);
  EXPECT_EQ(stats.memory_hits, 2 * kThreads - 2);
  std::filesystem::remove_all(dir);
}

// The process-wide cache's first use (its construction included) from
// eight threads at once, as sessions on a fresh process do.
TEST(SharedUseTest, GlobalKernelCacheFirstUseFromEightThreads) {
  const std::string dir = NewTempDir("global_cache");
  setenv("GROVE_CACHE_DIR", dir.c_str(), 1);
  const jit::ModuleSpec module{"selftest", {DType::kF32}};
  std::latch start(kThreads);
  std::vector<const jit::CachedModule*> got(kThreads);
  std::vector<std::shared_ptr<const jit::CachedModule>> keep(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      absl::StatusOr<std::shared_ptr<const jit::CachedModule>> entry = jit::KernelCache::Global().Get(module, 90);
      if (!entry.ok()) {
        errors[t] = entry.status().ToString();
        return;
      }
      keep[t] = *entry;
      got[t] = entry->get();
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(got[t], got[0]);
  }
  EXPECT_LE(jit::KernelCache::Global().stats().compiles, 1);
  unsetenv("GROVE_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace grove
