// What the C ABI's tests share: a status checked and released.
#ifndef GROVE_TEST_API_C_API_TEST_UTIL_H_
#define GROVE_TEST_API_C_API_TEST_UTIL_H_

#include <string>

#include "grove/grove_c.h"
#include "gtest/gtest.h"

namespace grove::c_test {

// Success, or a failure carrying the status's code name and message; the
// status is released either way.
inline ::testing::AssertionResult Ok(grove_status_t* status) {
  const grove_status_code_t code = grove_status_code(status);
  const std::string message = grove_status_message(status);
  grove_status_release(status);
  if (code == GROVE_STATUS_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << grove_status_code_name(code) << ": " << message;
}

// The message of a call that must fail with `code` (the status released).
inline std::string Failure(grove_status_t* status, grove_status_code_t code = GROVE_STATUS_INVALID_ARGUMENT) {
  EXPECT_EQ(grove_status_code(status), code) << grove_status_message(status);
  std::string message = grove_status_message(status);
  grove_status_release(status);
  return message;
}

}  // namespace grove::c_test

#endif  // GROVE_TEST_API_C_API_TEST_UTIL_H_
