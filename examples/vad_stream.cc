// Streams audio through Silero VAD (a trained voice activity detector imported
// from ONNX with `grove import`) the way a voice application would: small
// chunks, one call each, the recurrent state carried from call to call, all
// through one Session. It streams a spoken phrase at 16 kHz (512 new samples a
// chunk), at 8 kHz (256), then at 16 kHz again, and prints the speech
// probability per chunk next to onnxruntime's, the plans the session made, its
// plan-cache hits and the time per chunk.
//
//   vad_stream silero_vad.grove models/silero_vad/testdata
//
// The model's `sr` input picks the 16 kHz or the 8 kHz path (an If), and each
// chunk size is another input shape: the first chunk of each kind plans, every
// later one only binds pointers and runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "grove/npy.h"

namespace {

constexpr int kStateSize = 2 * 128;  // state f32[2, batch=1, 128]

struct StreamResult {
  bool ok = false;
  double max_diff = 0;  // largest |grove - onnxruntime| over the chunks
};

// One character per chunk, darker for a higher speech probability.
char Shade(float p) {
  static const char kRamp[] = " .:-=+*#%@";
  return kRamp[std::clamp(static_cast<int>(p * 10), 0, 9)];
}

StreamResult Stream(grove::Session& session, const grove::Tensor& signal, const grove::Tensor& reference,
                    int64_t rate, int64_t chunk, int64_t context) {
  StreamResult result;
  const int64_t chunks = signal.shape()[0] / chunk;
  if (reference.shape() != std::vector<int64_t>{chunks}) {
    std::fprintf(stderr, "reference has %lld chunks, want %lld\n",
                 static_cast<long long>(reference.shape().empty() ? -1 : reference.shape()[0]),
                 static_cast<long long>(chunks));
    return result;
  }
  std::printf("\n%lld Hz, %lld new samples a chunk (input 1x%lld with the previous chunk's last %lld):\n",
              static_cast<long long>(rate), static_cast<long long>(chunk), static_cast<long long>(context + chunk),
              static_cast<long long>(context));
  std::printf("  chunk    at      grove   onnxruntime  plans made  cache hits   time\n");

  // Buffers the views borrow; the session reads them during Run only.
  std::vector<float> x(context + chunk, 0.0f);
  std::vector<float> state(kStateSize, 0.0f);
  const int64_t sr = rate;
  const grove::TensorView inputs[] = {
      grove::TensorView(grove::DType::kF32, {1, context + chunk}, x.data()),
      grove::TensorView(grove::DType::kF32, {2, 1, 128}, state.data()),
      grove::TensorView(grove::DType::kI64, {}, &sr),
  };
  const grove::SessionStats start = session.stats();
  std::string strip;
  std::vector<double> times_ms;
  bool speaking = false;
  for (int64_t i = 0; i < chunks; ++i) {
    std::copy(x.end() - context, x.end(), x.begin());
    std::copy(signal.as<float>() + i * chunk, signal.as<float>() + (i + 1) * chunk, x.begin() + context);

    const grove::SessionStats before = session.stats();
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<grove::TensorView>> out = session.Run(inputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) {
      std::fprintf(stderr, "chunk %lld failed: %s\n", static_cast<long long>(i), out.status().ToString().c_str());
      return result;
    }
    // Outputs point into the session: read them before the next Run.
    const float prob = (*out)[0].as<float>()[0];
    std::copy((*out)[1].as<float>(), (*out)[1].as<float>() + kStateSize, state.begin());

    const grove::SessionStats after = session.stats();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    times_ms.push_back(ms);
    const float ref = reference.as<float>()[i];
    result.max_diff = std::max(result.max_diff, static_cast<double>(std::fabs(prob - ref)));
    strip += Shade(prob);
    // The first chunks, and every chunk where speech starts or stops.
    const char* note = "";
    if (prob > 0.5f && !speaking) note = "  speech starts";
    if (prob <= 0.5f && speaking) note = "  speech stops";
    speaking = prob > 0.5f;
    if (i < 3 || *note != '\0') {
      std::printf("  %5lld  %5.2f s   %.4f   %.4f      %6lld      %6lld    %7.3f ms%s\n",
                  static_cast<long long>(i), static_cast<double>(i * chunk) / rate, prob, ref,
                  static_cast<long long>(after.plans_created - before.plans_created),
                  static_cast<long long>(after.plan_cache_hits - before.plan_cache_hits), ms, note);
    }
  }
  std::vector<double> later(times_ms.begin() + 1, times_ms.end());
  std::sort(later.begin(), later.end());
  const grove::SessionStats end = session.stats();
  std::printf("  speech probability per chunk: [%s]\n", strip.c_str());
  std::printf(
      "  %lld chunks: plans made %lld, cache hits %lld; first chunk %.3f ms, later chunks %.3f ms median; "
      "largest difference from onnxruntime %.2g\n",
      static_cast<long long>(chunks), static_cast<long long>(end.plans_created - start.plans_created),
      static_cast<long long>(end.plan_cache_hits - start.plan_cache_hits), times_ms.front(),
      later.empty() ? 0.0 : later[later.size() / 2], result.max_diff);
  result.ok = true;
  return result;
}

absl::StatusOr<grove::Tensor> ReadF32(const std::string& path) {
  absl::StatusOr<grove::Tensor> t = grove::ReadNpy(path);
  if (t.ok() && (t->dtype() != grove::DType::kF32 || t->shape().size() != 1)) {
    return absl::InvalidArgumentError(path + ": want a 1-d f32 array");
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s silero_vad.grove TESTDATA_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[2];
  absl::StatusOr<std::shared_ptr<const grove::Model>> model = grove::Model::LoadFromFile(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], model.status().ToString().c_str());
    return 1;
  }
  grove::SessionOptions options;
  options.device = grove::Device::kCpu;
  absl::StatusOr<std::unique_ptr<grove::Session>> session = grove::Session::Create(*model, options);
  if (!session.ok()) {
    std::fprintf(stderr, "cannot create a session: %s\n", session.status().ToString().c_str());
    return 1;
  }

  struct Run {
    int64_t rate, chunk, context;
    const char* signal;
    const char* reference;
  };
  const Run runs[] = {
      {16000, 512, 64, "signal_16k.npy", "stream_16k_512_probs.npy"},
      {8000, 256, 32, "signal_8k.npy", "stream_8k_256_probs.npy"},
      {16000, 512, 64, "signal_16k.npy", "stream_16k_512_probs.npy"},  // again: every plan is cached
  };
  std::printf("Silero VAD on \"Hello from grove.\" (2 s), streamed through one session\n");
  double max_diff = 0;
  for (const Run& r : runs) {
    absl::StatusOr<grove::Tensor> signal = ReadF32(dir + "/" + r.signal);
    absl::StatusOr<grove::Tensor> reference = ReadF32(dir + "/" + r.reference);
    if (!signal.ok() || !reference.ok()) {
      std::fprintf(stderr, "cannot read the signal: %s\n",
                   (signal.ok() ? reference.status() : signal.status()).ToString().c_str());
      return 1;
    }
    StreamResult result = Stream(**session, *signal, *reference, r.rate, r.chunk, r.context);
    if (!result.ok) return 1;
    max_diff = std::max(max_diff, result.max_diff);
  }
  const grove::SessionStats stats = (*session)->stats();
  std::printf("\nsession: %lld runs, %lld plans made, %lld plan-cache hits, %lld evicted\n",
              static_cast<long long>(stats.runs), static_cast<long long>(stats.plans_created),
              static_cast<long long>(stats.plan_cache_hits), static_cast<long long>(stats.plans_evicted));
  if (max_diff > 1e-4) {
    std::fprintf(stderr, "FAILED: grove differs from onnxruntime by %.3g\n", max_diff);
    return 1;
  }
  return 0;
}
