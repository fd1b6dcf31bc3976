// What the CPU kernels of the Reduce* ops share: the reduced dims and output
// shape of one call (from ir::ReducedDims, as the shape function planned), and
// a walk over the input in memory order that hands each contiguous run of
// elements to the output element or elements it feeds.
//
//   absl::StatusOr<ReducePlan> plan = PlanReduce(ctx);
//   ForEachReduceRow(x.shape, plan->reduced, [&](int64_t in, int64_t out, int64_t len, bool folds) {
//     // folds: x[in..in+len) all feed y[out]; else x[in+j] feeds y[out+j].
//   });
#ifndef GROVE_LIB_BACKENDS_CPU_REDUCE_PLAN_H_
#define GROVE_LIB_BACKENDS_CPU_REDUCE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "grove/grove.h"
#include "lib/backends/cpu/parallel_for.h"
#include "lib/ir/intra_op_threads.h"
#include "lib/ir/op_registry.h"
#include "lib/ir/ops/reduce_axes.h"

namespace grove::cpu {

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  std::vector<int64_t> out_shape;
  int64_t count = 1;  // input elements per output element
};

// Reads the axes (attribute or input 1), keepdims and noop_with_empty_axes,
// and checks that output 0 was allocated with the input's dtype and the
// reduced shape (symbolic dims could have planned another).
inline absl::StatusOr<ReducePlan> PlanReduce(const ir::KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  const int rank = static_cast<int>(x.shape.size());
  std::vector<int64_t> axes = ctx.attrs().GetInts("axes");
  if (ctx.has_input(1)) {
    const TensorView& a = ctx.input(1);
    const int64_t n = a.num_elements();
    axes.resize(static_cast<size_t>(n));
    if (a.dtype == DType::kI64) {
      for (int64_t i = 0; i < n; ++i) axes[i] = a.as<const int64_t>()[i];
    } else if (a.dtype == DType::kI32) {
      for (int64_t i = 0; i < n; ++i) axes[i] = a.as<const int32_t>()[i];
    } else {
      return ctx.Error(absl::StrCat("input 1 (axes) has dtype ", DTypeName(a.dtype), "; expected i64"));
    }
  }
  const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
  const bool noop = ctx.attrs().GetInt("noop_with_empty_axes", 0) != 0;
  absl::StatusOr<std::vector<bool>> reduced = ir::ReducedDims(axes, rank, noop);
  if (!reduced.ok()) return ctx.Error(reduced.status().message());

  ReducePlan plan;
  plan.reduced = *std::move(reduced);
  for (int d = 0; d < rank; ++d) {
    if (plan.reduced[d]) {
      plan.count *= x.shape[d];
      if (keepdims) plan.out_shape.push_back(1);
    } else {
      plan.out_shape.push_back(x.shape[d]);
    }
  }
  if (y.dtype != x.dtype || y.shape != plan.out_shape) {
    return ctx.Error(absl::StrCat("output 0 was allocated as ", DTypeName(y.dtype), " [", absl::StrJoin(y.shape, ", "),
                                  "] but the kernel writes ", DTypeName(x.dtype), " [",
                                  absl::StrJoin(plan.out_shape, ", "), "]"));
  }
  return plan;
}

// The input's dims after merging neighbouring dims that are all kept or all
// reduced and dropping dims of size 1; out_stride is a kept group's stride in
// the output. Empty when the input is empty (`empty` set) or has one element.
struct ReduceGroup {
  int64_t size;
  bool reduced;
  int64_t out_stride;
};
inline std::vector<ReduceGroup> MergeReduceGroups(absl::Span<const int64_t> shape, const std::vector<bool>& reduced,
                                                  bool* empty) {
  std::vector<ReduceGroup> groups;
  *empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) {
      *empty = true;
      return {};
    }
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size *= shape[d];
    } else {
      groups.push_back({shape[d], reduced[d], 0});
    }
  }
  int64_t stride = 1;
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g) {
    if (groups[g].reduced) continue;
    groups[g].out_stride = stride;
    stride *= groups[g].size;
  }
  return groups;
}

// The rows of groups [first, end - 1) over the inner group, from input
// offset `in` and output offset `out`, in memory order; of each row only the
// columns [c0, c1) when the inner group is kept.
template <typename RowFn>
void WalkReduceRows(absl::Span<const ReduceGroup> groups, int first, int64_t in, int64_t out, int64_t c0, int64_t c1,
                    RowFn& row) {
  const ReduceGroup& inner = groups.back();
  const int outer = static_cast<int>(groups.size()) - 1;
  int64_t rows = 1;
  for (int g = first; g < outer; ++g) rows *= groups[g].size;
  absl::InlinedVector<int64_t, 8> index(outer, 0);
  for (int64_t r = 0; r < rows; ++r, in += inner.size) {
    if (inner.reduced) {
      row(in, out, inner.size, true);
    } else {
      row(in + c0, out + c0, c1 - c0, false);
    }
    for (int g = outer - 1; g >= first; --g) {
      out += groups[g].out_stride;
      if (++index[g] < groups[g].size) break;
      out -= groups[g].out_stride * groups[g].size;
      index[g] = 0;
    }
  }
}

// Calls row(in_offset, out_offset, len, folds) for the input's elements in
// memory order, after merging neighbouring dims that are all kept or all
// reduced and dropping dims of size 1. Nothing is called for an empty input.
template <typename RowFn>
void ForEachReduceRow(absl::Span<const int64_t> shape, const std::vector<bool>& reduced, RowFn&& row) {
  bool empty;
  const std::vector<ReduceGroup> groups = MergeReduceGroups(shape, reduced, &empty);
  if (empty) return;
  if (groups.empty()) {
    row(int64_t{0}, int64_t{0}, int64_t{1}, true);
    return;
  }
  WalkReduceRows(groups, 0, 0, 0, 0, groups.back().size, row);
}

// ForEachReduceRow split over the session's threads where that keeps every
// output element's inputs in the same order (so the same sums at any thread
// count): by slices of the outermost dims when they are kept, else by
// columns of the innermost dims when those are kept; a reduction of the
// outermost and innermost dims both (all of them: a scalar) runs on one
// thread. Calls for disjoint output elements may run at once.
template <typename RowFn>
void ForEachReduceRowParallel(ir::IntraOpThreads* threads, absl::Span<const ReduceGroup> groups, int64_t grain,
                              RowFn&& row);

template <typename RowFn>
void ForEachReduceRowParallel(ir::IntraOpThreads* threads, absl::Span<const int64_t> shape,
                              const std::vector<bool>& reduced, int64_t grain, RowFn&& row) {
  bool empty;
  const std::vector<ReduceGroup> groups = MergeReduceGroups(shape, reduced, &empty);
  if (empty) return;
  ForEachReduceRowParallel(threads, absl::Span<const ReduceGroup>(groups), grain, row);
}

// The same over groups merged once (MergeReduceGroups of a non-empty input:
// a prepare keeps them).
template <typename RowFn>
void ForEachReduceRowParallel(ir::IntraOpThreads* threads, absl::Span<const ReduceGroup> groups, int64_t grain,
                              RowFn&& row) {
  if (groups.empty()) {
    row(int64_t{0}, int64_t{0}, int64_t{1}, true);
    return;
  }
  int64_t total = 1;
  for (const ReduceGroup& g : groups) total *= g.size;
  const ReduceGroup& first = groups.front();
  const ReduceGroup& inner = groups.back();
  if (!first.reduced && groups.size() > 1) {
    const int64_t slice = total / first.size;  // input elements per index of the outermost group
    ParallelFor(threads, first.size, RowGrain(slice, grain), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        WalkReduceRows(groups, 1, i * slice, i * first.out_stride, 0, inner.size, row);
      }
    });
  } else if (!inner.reduced) {
    ParallelFor(threads, inner.size, RowGrain(total / inner.size, grain), [&](int64_t c0, int64_t c1) {
      WalkReduceRows(groups, 0, 0, 0, c0, c1, row);
    });
  } else {
    WalkReduceRows(groups, 0, 0, 0, 0, inner.size, row);
  }
}

}  // namespace grove::cpu

#endif  // GROVE_LIB_BACKENDS_CPU_REDUCE_PLAN_H_
