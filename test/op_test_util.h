// Runs one op from the global registry on host tensors: shape function, then
// the CPU kernel. For per-op tests against naive references.
//
//   Tensor a = MakeTensor<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
//   auto out = RunOp("Relu", {&a});
//   ASSERT_TRUE(out.ok()) << out.status();
//   EXPECT_EQ(Values<float>((*out)[0]), ...);
#ifndef GROVE_TEST_OP_TEST_UTIL_H_
#define GROVE_TEST_OP_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grove/grove.h"

namespace grove::testing {

template <typename T>
Tensor MakeTensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t = Tensor::Create(dtype, std::move(shape)).value();
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

// Elements of a shape.
inline int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = t.as<T>();
  return std::vector<T>(p, p + t.view().num_elements());
}

// A kString tensor owning copies of `values`.
Tensor MakeStrings(std::vector<int64_t> shape, const std::vector<std::string>& values);
// The elements of a kString tensor.
std::vector<std::string> Strings(const Tensor& t);

// Runs `type` with `inputs` (nullptr marks an omitted optional input) and
// `attrs`. Fails with the shape function's or kernel's status. The inputs'
// values are visible to the shape function, as after plan-time folding.
absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& type, std::vector<const Tensor*> inputs,
                                          std::vector<std::pair<std::string, AttrValue>> attrs = {},
                                          int num_outputs = 1);

}  // namespace grove::testing

#endif  // GROVE_TEST_OP_TEST_UTIL_H_
