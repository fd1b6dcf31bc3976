// Version 6 of the C ABI's session options: kernel_table (a kernel dispatch
// table written by grove tune) reaches SessionOptions::kernel_table; a
// version-5 caller's struct does not carry it; a CPU session does not read it.
#include <cstring>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "grove/grove_c.h"
#include "gtest/gtest.h"
#include "lib/c/c_api_internal.h"
#include "test/api/c_api_test_util.h"

namespace {

using grove::c_test::Ok;

TEST(CApiKernelTable, Version6CarriesTheTablesPath) {
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  EXPECT_EQ(options.struct_size, GROVE_SESSION_OPTIONS_SIZE_V6);
  EXPECT_EQ(options.kernel_table, nullptr);
  grove::SessionOptions made;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.kernel_table, "");

  const std::string path = "/some/where/sm90.bin";
  options.kernel_table = path.c_str();
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.kernel_table, path);

  // A version-5 caller's struct ends before the field: not read.
  options.struct_size = GROVE_SESSION_OPTIONS_SIZE_V5;
  ASSERT_TRUE(Ok(grove::c_internal::ToSessionOptions("test", &options, &made)));
  EXPECT_EQ(made.kernel_table, "");

  // Initializing a version-5 struct leaves the bytes after it alone.
  std::vector<unsigned char> buffer(sizeof(grove_session_options_t), 0xAB);
  grove_session_options_initialize_sized(reinterpret_cast<grove_session_options_t*>(buffer.data()),
                                         GROVE_SESSION_OPTIONS_SIZE_V5);
  EXPECT_EQ(buffer[GROVE_SESSION_OPTIONS_SIZE_V5], 0xAB);
}

TEST(CApiKernelTable, ACpuSessionDoesNotReadTheTable) {
  grove::ModelBuilder b;
  b.AddInput("x", grove::DType::kF32, {2, 4});
  b.AddOp("Relu", {"x"}, {"y"});
  b.AddOutput("y");
  absl::StatusOr<std::vector<uint8_t>> bytes = b.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  grove_model_t* model = nullptr;
  ASSERT_TRUE(Ok(grove_model_load_buffer(bytes->data(), bytes->size(), &model)));
  grove_session_options_t options;
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  options.kernel_table = "/nonexistent-grove-dir/table.bin";
  grove_session_t* session = nullptr;
  EXPECT_TRUE(Ok(grove_session_create(model, &options, &session)));
  grove_session_release(session);
  grove_model_release(model);
}

}  // namespace
