// Tests of readers given a FIFO: a regression must fail, not hang the suite.
#ifndef GROVE_TEST_SPECIAL_FILE_UTIL_H_
#define GROVE_TEST_SPECIAL_FILE_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>

#include "gtest/gtest.h"

namespace grove::testing {

// Runs `read` (which opens `fifo`) and fails if it has not returned within
// 10 s; a reader stuck in open() or read() on the FIFO is then released by
// opening its other end, so a regression fails instead of hanging the suite.
template <typename Fn>
auto WithinTenSeconds(const std::string& fifo, Fn read) -> decltype(read()) {
  auto result = std::async(std::launch::async, read);
  if (result.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "reading " << fifo << " blocked";
    const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
    result.wait();
    if (fd >= 0) ::close(fd);
  }
  return result.get();
}

}  // namespace grove::testing

#endif  // GROVE_TEST_SPECIAL_FILE_UTIL_H_
