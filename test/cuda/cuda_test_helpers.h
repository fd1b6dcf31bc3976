// Shared setup of the CUDA data-movement op tests (test/cuda/layout_test.cc,
// test/cuda/shape_ops_test.cc): tensor builders with distinct, scrambled
// values and a fixture that compares the CUDA kernel (emulated device) with
// the CPU kernel with parameter inputs on the host and only on the device.
#ifndef GROVE_TEST_CUDA_CUDA_TEST_HELPERS_H_
#define GROVE_TEST_CUDA_CUDA_TEST_HELPERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backends/cuda/emulated_device.h"
#include "test/cuda_op_test_util.h"
#include "test/op_test_util.h"

namespace grove::testing {

using Shape = std::vector<int64_t>;
using Ints = std::vector<int64_t>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// Count(shape) comes from test/op_test_util.h.

// Distinct small integers (exact in every dtype but bool) in a scrambled
// order, so a misplaced element shows.
inline Tensor Data(DType t, const Shape& shape, int tag = 0) {
  Tensor f = Tensor::Create(DType::kF32, shape).value();
  for (int64_t i = 0; i < Count(shape); ++i) f.as<float>()[i] = static_cast<float>((i * 37 + tag * 11) % 251 - 125);
  return Tensor::CastOf(f.view(), t).value();
}
inline Tensor I64(const Shape& shape, const Ints& v) { return MakeTensor<int64_t>(DType::kI64, shape, v); }
inline Tensor I64(const Ints& v) { return I64({static_cast<int64_t>(v.size())}, v); }
inline Tensor I32(const Shape& shape, const Ints& v) {
  std::vector<int32_t> w(v.begin(), v.end());
  return MakeTensor<int32_t>(DType::kI32, shape, w);
}
inline Tensor I32(const Ints& v) { return I32({static_cast<int64_t>(v.size())}, v); }

// A test on the shared test device (emulated without a GPU).
class CudaOpTest : public ::testing::Test {
 protected:
  void SetUp() override { dev_ = testing::TestDevice(); }
  // CPU == CUDA with parameter inputs on the host and only on the device.
  void Check(const std::string& op, std::vector<const Tensor*> in, Attrs attrs = {}, int outputs = 1) {
    for (bool host : {true, false}) {
      SCOPED_TRACE(host ? "host values" : "device values");
      ExpectCudaMatchesCpu(*dev_, op, in, attrs, outputs, 0.0, {.host_values = host});
    }
  }
  std::shared_ptr<cuda::Device> dev_;
};

}  // namespace grove::testing

#endif  // GROVE_TEST_CUDA_CUDA_TEST_HELPERS_H_
