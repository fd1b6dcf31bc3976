// Choices read from fuzzer bytes, front to back; past the end every choice is
// its smallest value. (libFuzzer's FuzzedDataProvider, cut to what op_run
// needs, so the replay binary also builds with gcc, which lacks that header.)
#ifndef GROVE_FUZZ_BYTE_CHOICES_H_
#define GROVE_FUZZ_BYTE_CHOICES_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace grove::fuzz {

class ByteChoices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // A value in [lo, hi], from as many bytes as the range needs.
  template <typename T>
  T ConsumeIntegralInRange(T lo, T hi) {
    const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    uint64_t v = 0;
    for (uint64_t seen = 0; seen < range && pos_ < size_; seen = (seen << 8) | 0xff) {
      v = (v << 8) | data_[pos_++];
      if (seen > (UINT64_MAX >> 8)) break;
    }
    if (range != UINT64_MAX) v %= range + 1;
    return static_cast<T>(static_cast<uint64_t>(lo) + v);
  }
  template <typename T>
  T ConsumeIntegral() {
    T v{};
    for (size_t i = 0; i < sizeof(T) && pos_ < size_; ++i) v = static_cast<T>((v << 8) | data_[pos_++]);
    return v;
  }
  bool ConsumeBool() { return (ConsumeIntegral<uint8_t>() & 1) != 0; }
  template <typename T, size_t N>
  const T& PickValueInArray(const T (&values)[N]) {
    return values[ConsumeIntegralInRange<size_t>(0, N - 1)];
  }
  template <typename T>
  T PickValueInArray(std::initializer_list<T> values) {
    return *(values.begin() + ConsumeIntegralInRange<size_t>(0, values.size() - 1));
  }
  std::string ConsumeRandomLengthString(size_t max_length) {
    std::string s(ConsumeIntegralInRange<size_t>(0, max_length), '\0');
    for (char& c : s) c = static_cast<char>(ConsumeIntegral<uint8_t>());
    return s;
  }
  std::vector<uint8_t> ConsumeRemainingBytes() {
    std::vector<uint8_t> rest(data_ + pos_, data_ + size_);
    pos_ = size_;
    return rest;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace grove::fuzz

#endif  // GROVE_FUZZ_BYTE_CHOICES_H_
