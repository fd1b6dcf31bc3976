// Walks N inputs broadcast to one output (numpy rules) as rows of the
// innermost dim, where each input steps by 0 or 1 element. Dims that are
// contiguous for every operand are merged first, so same-shape operands and
// scalar operands collapse to a single row and the row loop is the fast path.
//
//   absl::StatusOr<BroadcastPlan<2>> plan = BroadcastPlan<2>::Make(out.shape, {&a.shape, &b.shape});
//   plan->ForEachRow([&](int64_t o, const std::array<int64_t, 2>& in, int64_t len) { ... });
#ifndef GROVE_LIB_BACKENDS_CPU_BROADCAST_PLAN_H_
#define GROVE_LIB_BACKENDS_CPU_BROADCAST_PLAN_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace grove::cpu {

template <int N>
class BroadcastPlan {
 public:
  // Fails when the inputs do not broadcast, or broadcast to a shape other
  // than `out_shape` (symbolic dims planned as equal that were not).
  static absl::StatusOr<BroadcastPlan> Make(absl::Span<const int64_t> out_shape,
                                            const std::array<const std::vector<int64_t>*, N>& in_shapes) {
    size_t rank = 0;
    for (const std::vector<int64_t>* s : in_shapes) rank = std::max(rank, s->size());
    std::vector<int64_t> joint(rank, 1);
    for (int k = 0; k < N; ++k) {
      const std::vector<int64_t>& s = *in_shapes[k];
      const size_t off = rank - s.size();
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t& o = joint[off + i];
        if (s[i] == 1 || s[i] == o) continue;
        if (o != 1) {
          return absl::InvalidArgumentError(absl::StrCat("input shapes ", DescribeShapes(in_shapes),
                                                         " do not broadcast: dim ", off + i, " is ", o,
                                                         " in one input and ", s[i], " in input ", k));
        }
        o = s[i];
      }
    }
    if (absl::Span<const int64_t>(joint) != out_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("input shapes ", DescribeShapes(in_shapes), " broadcast to [", absl::StrJoin(joint, ", "),
                       "] but the output was planned as [", absl::StrJoin(out_shape, ", "),
                       "] (symbolic dims that differ at run time)"));
    }

    BroadcastPlan plan;
    plan.num_elements_ = 1;
    for (int64_t d : out_shape) plan.num_elements_ *= d;
    if (plan.num_elements_ == 0) return plan;

    // Per-operand strides in the output's index space (0 along broadcast
    // dims), dropping output dims of size 1, merging contiguous neighbours.
    std::array<std::vector<int64_t>, N> full;
    for (int k = 0; k < N; ++k) {
      const std::vector<int64_t>& s = *in_shapes[k];
      full[k].assign(rank, 0);
      int64_t stride = 1;
      for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
        full[k][rank - s.size() + i] = s[i] == 1 ? 0 : stride;
        stride *= s[i];
      }
    }
    for (size_t i = 0; i < rank; ++i) {
      if (out_shape[i] == 1) continue;
      if (!plan.dims_.empty()) {
        bool contiguous = true;
        for (int k = 0; k < N; ++k) contiguous &= plan.strides_[k].back() == full[k][i] * out_shape[i];
        if (contiguous) {
          plan.dims_.back() *= out_shape[i];
          for (int k = 0; k < N; ++k) plan.strides_[k].back() = full[k][i];
          continue;
        }
      }
      plan.dims_.push_back(out_shape[i]);
      for (int k = 0; k < N; ++k) plan.strides_[k].push_back(full[k][i]);
    }
    if (plan.dims_.empty()) {
      plan.dims_.push_back(1);
      for (int k = 0; k < N; ++k) plan.strides_[k].push_back(0);
    }
    for (int k = 0; k < N; ++k) plan.steps_[k] = plan.strides_[k].back();
    return plan;
  }

  int64_t num_elements() const { return num_elements_; }
  // How far each input moves per element inside a row: 0 (broadcast) or 1.
  const std::array<int64_t, N>& row_steps() const { return steps_; }

  // Calls row(out_offset, in_offsets, len) for the output elements
  // [begin, end) in order: the rows that cross them, cut at begin and end.
  // Disjoint ranges together give what ForEachRow gives (cpu::ParallelFor).
  template <typename RowFn>
  void ForEachRowIn(int64_t begin, int64_t end, RowFn&& row) const {
    end = std::min(end, num_elements_);
    if (begin >= end) return;
    const int outer = static_cast<int>(dims_.size()) - 1;
    const int64_t len = dims_.back();
    absl::InlinedVector<int64_t, 8> index(outer, 0);
    std::array<int64_t, N> in{};
    int64_t rest = begin / len;
    for (int d = outer - 1; d >= 0; --d) {
      index[d] = rest % dims_[d];
      rest /= dims_[d];
      for (int k = 0; k < N; ++k) in[k] += index[d] * strides_[k][d];
    }
    int64_t col = begin % len;
    for (int64_t out = begin; out < end;) {
      const int64_t n = std::min(len - col, end - out);
      std::array<int64_t, N> at = in;
      for (int k = 0; k < N; ++k) at[k] += col * steps_[k];
      row(out, at, n);
      out += n;
      col = 0;
      for (int d = outer - 1; d >= 0; --d) {
        for (int k = 0; k < N; ++k) in[k] += strides_[k][d];
        if (++index[d] < dims_[d]) break;
        for (int k = 0; k < N; ++k) in[k] -= strides_[k][d] * dims_[d];
        index[d] = 0;
      }
    }
  }

  // Calls row(out_offset, in_offsets, len) for every row, in output order.
  template <typename RowFn>
  void ForEachRow(RowFn&& row) const {
    if (num_elements_ == 0) return;
    const int outer = static_cast<int>(dims_.size()) - 1;
    const int64_t len = dims_.back();
    const int64_t rows = num_elements_ / len;
    std::vector<int64_t> index(outer, 0);
    std::array<int64_t, N> in{};
    int64_t out = 0;
    for (int64_t r = 0; r < rows; ++r, out += len) {
      row(out, in, len);
      for (int d = outer - 1; d >= 0; --d) {
        for (int k = 0; k < N; ++k) in[k] += strides_[k][d];
        if (++index[d] < dims_[d]) break;
        for (int k = 0; k < N; ++k) in[k] -= strides_[k][d] * dims_[d];
        index[d] = 0;
      }
    }
  }

 private:
  static std::string DescribeShapes(const std::array<const std::vector<int64_t>*, N>& shapes) {
    std::vector<std::string> parts;
    for (const std::vector<int64_t>* s : shapes) parts.push_back(absl::StrCat("[", absl::StrJoin(*s, ", "), "]"));
    return absl::StrJoin(parts, ", ");
  }

  int64_t num_elements_ = 0;
  std::vector<int64_t> dims_;
  std::array<std::vector<int64_t>, N> strides_;
  std::array<int64_t, N> steps_{};
};

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_BROADCAST_PLAN_H_
