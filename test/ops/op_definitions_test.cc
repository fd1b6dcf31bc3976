// ir::OpDefinitions(), the registry the ONNX importer reads: the same ops as
// the runtime's registry, with no kernel attached.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/ops.h"
#include "lib/runtime/registry.h"

namespace grove::testing {
namespace {

TEST(OpDefinitionsTest, SameOpsAsTheRuntimeRegistry) {
  EXPECT_EQ(ir::OpDefinitions().Types(), runtime::GlobalOpRegistry().Types());
}

TEST(OpDefinitionsTest, NoKernels) {
  const ir::OpRegistry& defs = ir::OpDefinitions();
  ASSERT_NE(defs.Find("Add"), nullptr);
  for (const std::string& type : defs.Types()) {
    EXPECT_FALSE(defs.Supports(type, ir::Backend::kCpu)) << type;
    EXPECT_FALSE(defs.Supports(type, ir::Backend::kCuda)) << type;
  }
}

TEST(OpDefinitionsTest, BuiltOnce) { EXPECT_EQ(&ir::OpDefinitions(), &ir::OpDefinitions()); }

// The registries reserve kOpCountHint ops: raise it when the ops outgrow it.
TEST(OpDefinitionsTest, TheOpCountHintHoldsEveryOp) {
  EXPECT_LE(ir::OpDefinitions().Types().size(), ir::kOpCountHint);
}

TEST(OpDefinitionsTest, AnOpRegisteredTwiceIsRefusedAndTheFirstStays) {
  ir::OpRegistry r;
  ir::OpDef first;
  first.type = "Twice";
  first.min_inputs = 1;
  ASSERT_TRUE(r.Register(first).ok());
  ir::OpDef second = first;
  second.min_inputs = 2;
  const absl::Status s = r.Register(second);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "op Twice is registered twice");
  ASSERT_NE(r.Find("Twice"), nullptr);
  EXPECT_EQ(r.Find("Twice")->min_inputs, 1);
  EXPECT_EQ(r.Types(), std::vector<std::string>{"Twice"});
}

}  // namespace
}  // namespace grove::testing
