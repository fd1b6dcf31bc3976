// Fused activations: which ONNX nodes map to which post-op, the fused node's
// attributes, and the reference computation (the formulas of the
// activations' own kernels in elementwise.cc and math.cc, in float).
#include "lib/backends/cpu/post_op.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/cpu_features.h"
#include "lib/backends/cpu/simd_exp.h"

namespace grove::cpu {
namespace {

constexpr std::pair<PostOpKind, absl::string_view> kNames[] = {
    {PostOpKind::kRelu, "relu"},         {PostOpKind::kLeakyRelu, "leaky_relu"}, {PostOpKind::kClip, "clip"},
    {PostOpKind::kSigmoid, "sigmoid"},   {PostOpKind::kTanh, "tanh"},            {PostOpKind::kGelu, "gelu"},
    {PostOpKind::kGeluTanh, "gelu_tanh"}, {PostOpKind::kElu, "elu"},             {PostOpKind::kHardSwish, "hard_swish"},
    {PostOpKind::kSoftplus, "softplus"}, {PostOpKind::kSilu, "silu"},
};

// s[i] = Sigmoid(x[i]) for i < n as the Sigmoid kernel computes f32 on this
// CPU when it takes the vectorised path (elementwise.cc); false when it
// does not (then nothing is written).
bool SigmoidVectorised(const float* x, float* s, int64_t n) {
#if defined(GROVE_SIMD_EXP)
  if (UseAvx2Kernels()) {
    (HostCpuFeatures().avx512f ? &SigmoidAvx512 : &SigmoidAvx2)(x, s, n);
    return true;
  }
#endif
  return false;
}

template <typename Fn>
void ForEach(float* y, int64_t n, Fn&& fn) {
  for (int64_t i = 0; i < n; ++i) y[i] = fn(y[i]);
}

}  // namespace

std::optional<PostOp> PostOpOf(const ir::Node& activation, std::optional<float> clip_min,
                               std::optional<float> clip_max) {
  const std::string& type = activation.type;
  const ir::Attributes& attrs = activation.attrs;
  PostOp op;
  if (type == "Relu") {
    op.kind = PostOpKind::kRelu;
  } else if (type == "LeakyRelu") {
    op.kind = PostOpKind::kLeakyRelu;
    op.alpha = static_cast<float>(attrs.GetFloat("alpha", 0.01));
  } else if (type == "Clip") {
    op.kind = PostOpKind::kClip;
    // Opset 6 has its bounds as attributes, later opsets as inputs.
    const float lo = attrs.Has("min") ? static_cast<float>(attrs.GetFloat("min", 0)) : clip_min.value_or(-INFINITY);
    const float hi = attrs.Has("max") ? static_cast<float>(attrs.GetFloat("max", 0)) : clip_max.value_or(INFINITY);
    op.alpha = lo;
    op.beta = hi;
  } else if (type == "Sigmoid") {
    op.kind = PostOpKind::kSigmoid;
  } else if (type == "Tanh") {
    op.kind = PostOpKind::kTanh;
  } else if (type == "Gelu") {
    const std::string approximate = attrs.GetString("approximate", "none");
    if (approximate == "none") {
      op.kind = PostOpKind::kGelu;
    } else if (approximate == "tanh") {
      op.kind = PostOpKind::kGeluTanh;
    } else {
      return std::nullopt;
    }
  } else if (type == "Elu") {
    op.kind = PostOpKind::kElu;
    op.alpha = static_cast<float>(attrs.GetFloat("alpha", 1.0));
  } else if (type == "HardSwish") {
    op.kind = PostOpKind::kHardSwish;
  } else if (type == "Softplus") {
    op.kind = PostOpKind::kSoftplus;
  } else {
    return std::nullopt;
  }
  return op;
}

std::string PostOpName(PostOpKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return std::string(name);
  }
  return "";
}

void SetPostOpAttributes(const PostOp& op, ir::Attributes* attrs) {
  attrs->Set(std::string(kPostOpAttr), PostOpName(op.kind));
  attrs->Set(std::string(kPostOpAlphaAttr), static_cast<double>(op.alpha));
  attrs->Set(std::string(kPostOpBetaAttr), static_cast<double>(op.beta));
}

absl::StatusOr<PostOp> ReadPostOp(const ir::Attributes& attrs) {
  PostOp op;
  if (!attrs.Has(kPostOpAttr)) return op;
  const std::string name = attrs.GetString(kPostOpAttr, "");
  for (const auto& [k, n] : kNames) {
    if (n == name) op.kind = k;
  }
  if (op.kind == PostOpKind::kNone) {
    return absl::InternalError(absl::StrCat("unknown fused activation '", name, "'"));
  }
  op.alpha = static_cast<float>(attrs.GetFloat(kPostOpAlphaAttr, 0));
  op.beta = static_cast<float>(attrs.GetFloat(kPostOpBetaAttr, 0));
  return op;
}

absl::StatusOr<ChannelAffine> ReadChannelAffine(const ir::Attributes& attrs, int64_t channels) {
  ChannelAffine affine;
  if (!attrs.Has(kChannelScaleAttr)) return affine;
  const std::vector<double> scale = attrs.GetFloats(kChannelScaleAttr);
  const std::vector<double> shift = attrs.GetFloats(kChannelShiftAttr);
  if (static_cast<int64_t>(scale.size()) != channels || static_cast<int64_t>(shift.size()) != channels) {
    return absl::InternalError(absl::StrCat("the fused BatchNormalization has ", scale.size(), " scales and ",
                                            shift.size(), " shifts for ", channels, " channels"));
  }
  affine.scale.assign(scale.begin(), scale.end());
  affine.shift.assign(shift.begin(), shift.end());
  affine.before_post_op = attrs.GetInt(kChannelAffineFirstAttr, 0) != 0;
  return affine;
}

void SetChannelAffineAttributes(const ChannelAffine& affine, ir::Attributes* attrs) {
  attrs->Set(std::string(kChannelScaleAttr), std::vector<double>(affine.scale.begin(), affine.scale.end()));
  attrs->Set(std::string(kChannelShiftAttr), std::vector<double>(affine.shift.begin(), affine.shift.end()));
  attrs->Set(std::string(kChannelAffineFirstAttr), int64_t{affine.before_post_op ? 1 : 0});
}

void ApplyChannelAffine(const ChannelAffine& affine, float* y, int64_t images, int64_t channels, int64_t inner) {
  if (affine.empty()) return;
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t c = 0; c < channels; ++c, y += inner) {
      const float a = affine.scale[c], b = affine.shift[c];
      for (int64_t i = 0; i < inner; ++i) y[i] = y[i] * a + b;
    }
  }
}

void ApplyPostOp(const PostOp& op, float* y, int64_t n) {
  const float alpha = op.alpha, beta = op.beta;
  switch (op.kind) {
    case PostOpKind::kNone:
      return;
    case PostOpKind::kRelu:
      return ForEach(y, n, [](float x) { return x < 0.0f ? 0.0f : x; });
    case PostOpKind::kLeakyRelu:
      return ForEach(y, n, [alpha](float x) { return x < 0.0f ? alpha * x : x; });
    case PostOpKind::kClip:
      return ForEach(y, n, [alpha, beta](float x) {
        if (x < alpha) x = alpha;
        if (x > beta) x = beta;
        return x;
      });
    case PostOpKind::kSigmoid:
      if (SigmoidVectorised(y, y, n)) return;
      return ForEach(y, n, [](float x) {
        if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
        const float e = std::exp(x);
        return e / (1.0f + e);
      });
    case PostOpKind::kTanh:
      return ForEach(y, n, [](float x) { return std::tanh(x); });
    case PostOpKind::kGelu:
      return ForEach(y, n, [](float x) { return 0.5f * x * std::erfc(x * -0.7071067811865476f); });
    case PostOpKind::kGeluTanh:
      return ForEach(y, n, [](float x) {
        const float z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return x / (1.0f + std::exp(-2.0f * z));
      });
    case PostOpKind::kElu:
      return ForEach(y, n, [alpha](float x) { return x < 0.0f ? alpha * std::expm1(x) : x; });
    case PostOpKind::kHardSwish:
      return ForEach(y, n, [](float x) {
        const float h = x / 6.0f + 0.5f;
        return x * (h < 0.0f ? 0.0f : (h > 1.0f ? 1.0f : h));
      });
    case PostOpKind::kSoftplus:
      return ForEach(y, n, [](float x) { return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
    case PostOpKind::kSilu: {
      // The Sigmoid kernel's value, then the Mul's product.
      float s[256];
      for (int64_t i = 0; i < n; i += 256) {
        const int64_t m = std::min<int64_t>(256, n - i);
        if (!SigmoidVectorised(y + i, s, m)) break;
        for (int64_t j = 0; j < m; ++j) y[i + j] *= s[j];
        if (i + m == n) return;
      }
      return ForEach(y, n, [](float x) {
        if (x >= 0.0f) return x * (1.0f / (1.0f + std::exp(-x)));
        const float e = std::exp(x);
        return x * (e / (1.0f + e));
      });
    }
  }
}

}  // namespace grove::cpu
