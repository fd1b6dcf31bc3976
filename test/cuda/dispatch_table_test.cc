// The dispatch table (jit/dispatch_table.h): shape buckets, write and load
// back, lookups, and the refusals of bad tables (each naming what is wrong).
#include "jit/dispatch_table.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/cuda/test_kernel_families.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("GROVE_TEST_TMP");
  std::string d = dir != nullptr ? dir : "/tmp";
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  return absl::StrCat(d, "/dispatch_table_test_", name);
}

TEST(ShapeBucketTest, KeepsSmallExtentsAndRoundsLargerOnesUpToAPowerOfTwo) {
  jit::KernelProblem b = jit::ShapeBucket(jit::KernelProblem{"f", {DType::kF32}, {{"a", 0}, {"b", 1}, {"c", 3},
                                                                                  {"d", 512}, {"e", 513}, {"f", 8}, {"g", 9}}});
  // Up to 8 an extent is its own bucket (decode's M; counts and flags).
  EXPECT_EQ(b.ToString(), "a=0,b=1,c=3,d=512,e=1024,f=8,g=16");
  EXPECT_EQ(b.family, "f");
  EXPECT_EQ(b.dtypes, std::vector<DType>{DType::kF32});
  EXPECT_EQ(jit::ShapeBucket(RowProblem(509, 37)).ToString(), "n=512,rows=64");
}

class DispatchTableTest : public ::testing::Test {
 protected:
  jit::DispatchTable Table() {
    jit::DispatchTable t;
    t.set_provenance(TestProvenance());
    EXPECT_TRUE(t.Add(RowEntry(90, 512, 64, 128, 4, 3.25), lookup_).ok());
    EXPECT_TRUE(t.Add(RowEntry(90, 100, 1, 64, 2), lookup_).ok());
    EXPECT_TRUE(t.Add(RowEntry(80, 512, 64, 256, 1), lookup_).ok());
    jit::DispatchEntry gemm;
    gemm.arch = 90;
    gemm.problem = jit::KernelProblem{"gemm", {DType::kF16}, {{"batch", 1}, {"k", 768}, {"m", 7}, {"n", 768}}};
    gemm.bucket = jit::ShapeBucket(gemm.problem);
    gemm.config = jit::KernelConfig{"gemm", {DType::kF16}, {{"algo", 3}}};
    gemm.measured_us = 9;
    EXPECT_TRUE(t.Add(gemm, lookup_).ok());
    return t;
  }
  absl::StatusOr<jit::DispatchTable> Load(const std::vector<uint8_t>& bytes) {
    return jit::DispatchTable::Load(bytes, lookup_);
  }
  // A table whose one entry is `e`, serialized without Add's checks: what a
  // tool writing bad tables would make.
  std::vector<uint8_t> BytesOf(const jit::DispatchEntry& e) {
    // Written through a family with a wider space, loaded with the real one.
    RowTestFamily wide({64, 128, 256, 512, 1024});
    jit::DispatchTable w;
    w.set_provenance(TestProvenance());
    absl::Status s = w.Add(e, Families({&wide}));
    EXPECT_TRUE(s.ok()) << s;
    return w.Serialize();
  }

  RowTestFamily family_;
  jit::FamilyLookup lookup_ = Families({&family_});
};

TEST_F(DispatchTableTest, WritesAndLoadsBackEveryField) {
  const jit::DispatchTable t = Table();
  absl::StatusOr<jit::DispatchTable> back = Load(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->provenance().gpu, "test table (written by a unit test)");
  EXPECT_EQ(back->provenance().date, "2026-12-02T00:00:00Z");
  EXPECT_EQ(back->provenance().grove_version, "0.2.0");
  ASSERT_EQ(back->entries().size(), 4u);
  const jit::DispatchEntry* e = back->Find(90, jit::ShapeBucket(RowProblem(300, 40)));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->config.Name(), "rowtest__f32__threads128_vec4");
  EXPECT_EQ(e->measured_us, 3.25);
  EXPECT_EQ(e->generic_us, 6.5);
  EXPECT_EQ(e->problem.ToString(), "n=512,rows=64");
  // The same bucket on another arch has its own entry; a third has none.
  ASSERT_NE(back->Find(80, jit::ShapeBucket(RowProblem(300, 40))), nullptr);
  EXPECT_EQ(back->Find(80, jit::ShapeBucket(RowProblem(300, 40)))->config.Name(), "rowtest__f32__threads256_vec1");
  EXPECT_EQ(back->Find(86, jit::ShapeBucket(RowProblem(300, 40))), nullptr);
  // Another bucket, another dtype: misses.
  EXPECT_EQ(back->Find(90, jit::ShapeBucket(RowProblem(600, 40))), nullptr);
  EXPECT_EQ(back->Find(90, jit::ShapeBucket(RowProblem(300, 40, DType::kF16))), nullptr);
  // cuBLASLt's entry.
  const jit::DispatchEntry* g = back->Find(
      90, jit::ShapeBucket(jit::KernelProblem{"gemm", {DType::kF16}, {{"batch", 1}, {"k", 700}, {"m", 7}, {"n", 1000}}}));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->config.Get("algo", -1), 3);
  // Serializing is stable: the same bytes again.
  EXPECT_EQ(back->Serialize(), t.Serialize());
}

TEST_F(DispatchTableTest, WritesAndLoadsFiles) {
  const std::string path = TmpPath("file.bin");
  ASSERT_TRUE(Table().WriteFile(path).ok());
  absl::StatusOr<jit::DispatchTable> back = jit::DispatchTable::LoadFile(path, lookup_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entries().size(), 4u);
  absl::StatusOr<jit::DispatchTable> missing = jit::DispatchTable::LoadFile(path + ".none", lookup_);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path + ".none"));
  EXPECT_FALSE(Table().WriteFile("/nonexistent-dir/x.bin").ok());
  std::remove(path.c_str());
}

TEST_F(DispatchTableTest, RefusesTruncatedAndCorruptBytesWithAMessage) {
  const std::vector<uint8_t> bytes = Table().Serialize();
  for (size_t n : {size_t{0}, size_t{3}, size_t{12}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    absl::StatusOr<jit::DispatchTable> t = Load(cut);
    ASSERT_FALSE(t.ok()) << n;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("not a valid kernel table")) << n;
  }
  // Every single flipped byte: refused or a table whose entries all pass
  // the checks; never a crash (ASan runs this too).
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0xA5;
    absl::StatusOr<jit::DispatchTable> t = Load(bad);
    if (t.ok()) {
      for (const jit::DispatchEntry& e : t->entries()) EXPECT_EQ(e.bucket.family.empty(), false);
    }
  }
  // Not a table at all: a model file's identifier (after the size prefix
  // and the root offset).
  std::vector<uint8_t> other = bytes;
  ASSERT_EQ(std::string(bytes.begin() + 8, bytes.begin() + 12), "GKTB");
  other[8] = 'G', other[9] = 'R', other[10] = 'O', other[11] = 'V';
  absl::StatusOr<jit::DispatchTable> t = Load(other);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("GKTB"));
}

TEST_F(DispatchTableTest, RefusesAnUnknownFamilyNamingTheEntry) {
  jit::DispatchEntry e = RowEntry(90, 512, 64, 128, 4);
  jit::DispatchTable t;
  t.set_provenance(TestProvenance());
  ASSERT_TRUE(t.Add(e, lookup_).ok());
  // Loaded by a build whose families do not include "rowtest".
  absl::StatusOr<jit::DispatchTable> back = jit::DispatchTable::Load(t.Serialize(), Families({}));
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("entry 0 (sm_90 rowtest f32 n=512,rows=64)"));
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("unknown kernel family 'rowtest'"));
}

TEST_F(DispatchTableTest, RefusesAConfigTheFamilyNoLongerHas) {
  // Written when the family had 512 threads; this build's family does not.
  absl::StatusOr<jit::DispatchTable> t = Load(BytesOf(RowEntry(90, 512, 64, 512, 4)));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("rowtest__f32__threads512_vec4"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("not in family 'rowtest''s variant space"));
}

TEST_F(DispatchTableTest, RefusesDuplicateKeysBucketsThatAreNotBucketsAndBadGemmEntries) {
  jit::DispatchTable t;
  t.set_provenance(TestProvenance());
  ASSERT_TRUE(t.Add(RowEntry(90, 512, 64, 128, 4), lookup_).ok());
  absl::Status dup = t.Add(RowEntry(90, 500, 50, 64, 1), lookup_);  // the same bucket
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(std::string(dup.message()), HasSubstr("entry 1 (sm_90 rowtest f32 n=512,rows=64): the same key as entry 0"));

  jit::DispatchEntry odd = RowEntry(90, 512, 64, 128, 4);
  odd.bucket = RowProblem(500, 64);  // not rounded
  absl::Status s = t.Add(odd, lookup_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("extent n=500 is not a shape bucket (0..8 or a power of two)"));

  jit::DispatchEntry f16 = RowEntry(90, 512, 64, 128, 4);
  f16.config.dtypes = {DType::kF16};
  EXPECT_FALSE(t.Add(f16, lookup_).ok());  // the config's dtypes are not the entry's

  jit::DispatchEntry i64 = RowEntry(90, 512, 64, 128, 4);
  i64.bucket.dtypes = i64.config.dtypes = {DType::kI64};
  s = t.Add(i64, lookup_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("not built for dtypes i64"));

  jit::DispatchEntry gemm;
  gemm.arch = 90;
  gemm.bucket = gemm.problem = jit::KernelProblem{"gemm", {DType::kF32}, {{"k", 64}, {"m", 8}, {"n", 64}}};
  gemm.config = jit::KernelConfig{"gemm", {DType::kF32}, {{"algo", jit::kMaxGemmAlgorithms}}};
  s = t.Add(gemm, lookup_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("a gemm entry's config is {algo: 0..15}"));
  gemm.config.params = {{"threads", 1}};
  EXPECT_FALSE(t.Add(gemm, lookup_).ok());

  jit::DispatchEntry nan = RowEntry(90, 1024, 64, 128, 4);
  nan.measured_us = -1;
  EXPECT_FALSE(t.Add(nan, lookup_).ok());
  EXPECT_EQ(t.entries().size(), 1u);  // nothing refused was kept
}

TEST_F(DispatchTableTest, RefusesTablesWithoutProvenance) {
  jit::DispatchTable t;
  ASSERT_TRUE(t.Add(RowEntry(90, 512, 64, 128, 4), lookup_).ok());
  absl::StatusOr<jit::DispatchTable> back = Load(t.Serialize());
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("provenance"));
}

}  // namespace
}  // namespace grove::testing
