#include "lib/backends/cuda/exec_context.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/param_device.h"

namespace grove::cuda {

// The sites' messages by site id. Shared with the sites' registrations,
// which end with the prepared params that hold them (a plan dropped, or a
// step prepared for one invoke); a site that ended is retired and its message
// kept until the next wait has read what its kernels recorded. A site id in
// the record is only ever looked up, never dereferenced.
struct ExecContext::CheckSites {
  std::mutex mu;
  uint64_t next = 1;
  absl::flat_hash_map<uint64_t, std::function<absl::Status(const grove_k::CheckRecord&)>> messages;
  std::vector<uint64_t> retired;
};

class ExecContext::WaitHook final : public ParamDevice::WaitHook {
 public:
  explicit WaitHook(ExecContext& ec) : ec_(ec) {}
  absl::Status BeforeWait(Stream stream) override { return ec_.BeforeWait(stream); }
  absl::Status AfterWait() override { return ec_.AfterWait(); }

 private:
  ExecContext& ec_;
};

ExecContext::ExecContext(Device& device, Stream stream)
    : device_(device), stream_(stream), sites_(std::make_shared<CheckSites>()) {}

absl::Status ExecContext::ReadChecksAtWaits(ParamDevice& device) {
  if (static_cast<Device*>(&device) != &device_) {
    return absl::InternalError("ExecContext::ReadChecksAtWaits: not the device this context was made with");
  }
  if (wait_hook_ == nullptr) wait_hook_ = std::make_unique<WaitHook>(*this);
  device.set_wait_hook(wait_hook_.get());
  hooked_ = &device;
  return absl::OkStatus();
}

ExecContext::~ExecContext() {
  if (hooked_ != nullptr) hooked_->set_wait_hook(nullptr);
  if (record_ != nullptr) device_.Free(record_);
}

absl::StatusOr<DeviceCheckSite> ExecContext::CheckSite(
    const ir::KernelContext& ctx, std::function<std::string(const grove_k::CheckRecord&)> message) {
  if (record_ == nullptr) {
    absl::StatusOr<void*> p = device_.Allocate(sizeof(grove_k::CheckRecord));
    if (!p.ok()) return p.status();
    if (absl::Status s = device_.MemsetAsync(*p, 0, sizeof(grove_k::CheckRecord), stream_); !s.ok()) {
      device_.Free(*p);
      return s;
    }
    record_ = static_cast<grove_k::CheckRecord*>(*p);
  }
  std::shared_ptr<CheckSites> sites = sites_;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(sites->mu);
    id = sites->next++;
    sites->messages[id] = [where = ctx.node().Describe(), message = std::move(message)](
                              const grove_k::CheckRecord& r) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", message(r)));
    };
  }
  DeviceCheckSite site;
  site.check.record = record_;
  site.check.site = id;
  // The last copy retires the site (its message dropped after the next wait).
  site.registration = std::shared_ptr<const void>(nullptr, [sites, id](const void*) {
    std::lock_guard<std::mutex> lock(sites->mu);
    sites->retired.push_back(id);
  });
  return site;
}

absl::Status ExecContext::BeforeWait(Stream stream) {
  if (record_ == nullptr || stream != stream_) return absl::OkStatus();
  if (absl::Status s = device_.CopyAsync(&host_record_, record_, sizeof(host_record_), stream_); !s.ok()) return s;
  record_queued_ = true;
  return absl::OkStatus();
}

absl::Status ExecContext::AfterWait() {
  if (!record_queued_) return absl::OkStatus();
  record_queued_ = false;
  const grove_k::CheckRecord failure = host_record_;
  host_record_ = {};
  std::function<absl::Status(const grove_k::CheckRecord&)> message;
  {
    std::lock_guard<std::mutex> lock(sites_->mu);
    if (failure.site != 0) {
      auto it = sites_->messages.find(failure.site);
      if (it != sites_->messages.end()) message = it->second;
    }
    // What the retired sites' kernels recorded has been read now.
    for (uint64_t id : sites_->retired) sites_->messages.erase(id);
    sites_->retired.clear();
  }
  if (failure.site == 0) return absl::OkStatus();
  // Cleared for the next run (queued: that run's work comes after it).
  if (absl::Status s = device_.MemsetAsync(record_, 0, sizeof(grove_k::CheckRecord), stream_); !s.ok()) return s;
  if (message) return message(failure);
  return absl::InvalidArgumentError(absl::StrCat("a check on the device failed in a step whose plan is gone: value ",
                                                 failure.value, ", bound ", failure.bound));
}

absl::Status ExecContext::Synchronize() {
  if (hooked_ != nullptr) return device_.Synchronize(stream_);  // the hook reads the record
  if (absl::Status s = BeforeWait(stream_); !s.ok()) return s;
  if (absl::Status s = device_.Synchronize(stream_); !s.ok()) return s;
  return AfterWait();
}

ExecContext& Exec(const ir::KernelContext& ctx) {
  return *static_cast<ExecContext*>(ctx.host()->backend_context());
}

absl::Status NotPrepared(const ir::KernelContext& ctx) {
  return absl::InternalError(
      ctx.Error("the CUDA kernel was invoked without its prepare (call ir::RunKernel)").message());
}

bool ExecContext::ValuesOnHost(const ir::KernelContext& ctx, int i) const {
  if (!ctx.has_input(i) || ctx.input(i).byte_size() == 0) return true;
  const TensorView* host = host_input(i);
  return host != nullptr && host->data != nullptr;
}

absl::StatusOr<std::vector<uint8_t>> ExecContext::ReadBytes(const ir::KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.Error(absl::StrCat("input ", i, " is omitted"));
  const TensorView& in = ctx.input(i);
  std::vector<uint8_t> bytes(in.byte_size());
  if (bytes.empty()) return bytes;
  if (const TensorView* host = host_input(i); host != nullptr && host->data != nullptr) {
    std::memcpy(bytes.data(), host->data, bytes.size());
    return bytes;
  }
  if (absl::Status s = device_.CopyAsync(bytes.data(), in.data, bytes.size(), stream_); !s.ok()) return s;
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  return bytes;
}

absl::StatusOr<std::vector<int64_t>> ExecContext::ReadInts(const ir::KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::vector<int64_t>{};
  const TensorView& in = ctx.input(i);
  if (in.dtype != DType::kI64 && in.dtype != DType::kI32) {
    return ctx.Error(absl::StrCat("input ", i, " must be i32 or i64, is ", DTypeName(in.dtype)));
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadBytes(ctx, i);
  if (!bytes.ok()) return bytes.status();
  const int64_t n = in.num_elements();
  std::vector<int64_t> out(n);
  for (int64_t k = 0; k < n; ++k) {
    if (in.dtype == DType::kI64) {
      std::memcpy(&out[k], bytes->data() + 8 * k, 8);
    } else {
      int32_t v;
      std::memcpy(&v, bytes->data() + 4 * k, 4);
      out[k] = v;
    }
  }
  return out;
}

LaunchDims Grid1D(int64_t n, int threads_per_block, int64_t max_blocks) {
  LaunchDims d;
  int64_t blocks = (n + threads_per_block - 1) / threads_per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  d.grid = {static_cast<uint32_t>(blocks), 1, 1};
  d.block = {static_cast<uint32_t>(threads_per_block), 1, 1};
  return d;
}

}  // namespace grove::cuda
