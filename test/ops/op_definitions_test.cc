// ir::OpDefinitions(), the registry the ONNX importer reads: the same ops as
// the runtime's registry, with no kernel attached.
#include <string>

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

}  // namespace
}  // namespace grove::testing
