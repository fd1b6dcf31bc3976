// ONNX's version converter and shape inference trust their input: on a
// malformed model they can read wild memory, divide by zero or run for hours
// (libonnx 1.12's IR import is quadratic in the number of nodes). So grove
// checks what it cheaply can first (every name a node or graph output reads
// is defined), then runs ONNX's checker, shape inference and the converter in
// a forked child with a time limit; the converted model comes back through a
// pipe, and a child that dies by a signal or runs out of time is an error.
#include "tools/onnx/opset_upgrade.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/checker.h"
#include "onnx/common/version.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

namespace grove::onnx_import {
namespace {

bool IsDefault(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// The ai.onnx op types of a graph and of the graphs nested in its nodes.
void CollectOps(const ::onnx::GraphProto& graph, std::set<std::string>* ops) {
  for (const ::onnx::NodeProto& node : graph.node()) {
    if (IsDefault(node.domain())) ops->insert(node.op_type());
    for (const ::onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) CollectOps(a.g(), ops);
      for (const ::onnx::GraphProto& g : a.graphs()) CollectOps(g, ops);
    }
  }
}

// The since_version of `op`'s definition in effect at `opset`, or -1.
int SinceVersion(const std::string& op, int opset) {
  const ::onnx::OpSchema* schema = ::onnx::OpSchemaRegistry::Schema(op, opset, "");
  return schema == nullptr ? -1 : schema->since_version();
}

absl::Status ConverterFailed(const ::onnx::ModelProto& model, int from, int to, const std::string& what) {
  std::set<std::string> ops;
  CollectOps(model.graph(), &ops);
  std::string prefix = absl::StrCat("opset ", from, " is below the ", 11,
                                    " grove imports, and ONNX's version converter failed to convert the model to "
                                    "opset ",
                                    to);
  for (const std::string& op : ops) {
    // The converter's own messages end with the op it lacks an adapter for.
    if (absl::StrContains(what, absl::StrCat(" for ", op)) || absl::StrContains(what, absl::StrCat("For ", op))) {
      return absl::UnimplementedError(absl::StrCat(prefix, " at op ", op, ": ", what));
    }
  }
  std::vector<std::string> changed;
  for (const std::string& op : ops) {
    const int a = SinceVersion(op, from);
    const int b = SinceVersion(op, to);
    if (a < 0) {
      changed.push_back(absl::StrCat(op, " (not in opset ", from, ")"));
    } else if (a != b) {
      changed.push_back(b < 0 ? absl::StrCat(op, " (removed by opset ", to, ")")
                              : absl::StrCat(op, " (", a, " -> ", b, ")"));
    }
  }
  return absl::UnimplementedError(
      absl::StrCat(prefix, ": ", what, changed.empty() ? "" : "; the ops it had to convert: ",
                   absl::StrJoin(changed, ", ")));
}

// PRelu before opset 7 applied a 1-D slope of C > 1 values per channel
// (axis 1), as early PyTorch exports write it; from opset 7 the slope
// broadcasts from the trailing dims, and the version converter leaves the
// slope as it is. A 1-D slope initializer of such a PRelu, used by it alone,
// whose input has a known rank r >= 3, becomes [C, 1, ...] (r - 1 dims), which
// applies it per channel under the new broadcasting.
void ReshapeLegacyPReluSlopes(::onnx::ModelProto* model) {
  ::onnx::GraphProto* graph = model->mutable_graph();
  std::map<std::string, int> rank;
  auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
      rank[v.name()] = v.type().tensor_type().shape().dim_size();
    }
  };
  for (const ::onnx::ValueInfoProto& v : graph->input()) note(v);
  for (const ::onnx::ValueInfoProto& v : graph->value_info()) note(v);
  std::map<std::string, int> uses;
  for (const ::onnx::NodeProto& node : graph->node()) {
    for (const std::string& in : node.input()) ++uses[in];
  }
  for (const ::onnx::NodeProto& node : graph->node()) {
    if (!IsDefault(node.domain()) || node.op_type() != "PRelu" || node.input_size() != 2) continue;
    const auto r = rank.find(node.input(0));
    if (r == rank.end() || r->second < 3 || uses[node.input(1)] != 1) continue;
    for (::onnx::TensorProto& init : *graph->mutable_initializer()) {
      if (init.name() != node.input(1) || init.dims_size() != 1 || init.dims(0) <= 1) continue;
      const int64_t channels = init.dims(0);
      init.clear_dims();
      init.add_dims(channels);
      for (int i = 0; i < r->second - 2; ++i) init.add_dims(1);
      // Models of IR version < 4 list initializers among the graph's inputs.
      for (::onnx::ValueInfoProto& v : *graph->mutable_input()) {
        if (v.name() != init.name() || !v.type().has_tensor_type()) continue;
        ::onnx::TensorShapeProto* shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (int64_t d : init.dims()) shape->add_dim()->set_dim_value(d);
      }
    }
  }
}

std::string NodeWhere(const ::onnx::NodeProto& node, int index) {
  if (node.name().empty()) return absl::StrCat("node #", index, " (op ", node.op_type(), ")");
  return absl::StrCat("node '", node.name(), "' (op ", node.op_type(), ")");
}

// A graph's names, chained to the enclosing graphs' for nested bodies.
struct NameScope {
  const NameScope* parent = nullptr;
  absl::flat_hash_set<std::string> names;
  bool Has(const std::string& name) const {
    for (const NameScope* s = this; s != nullptr; s = s->parent) {
      if (s->names.contains(name)) return true;
    }
    return false;
  }
};

constexpr int kMaxGraphDepth = 64;

// libonnx 1.12's IR import (under the converter) checks each new value's
// generated name against every node of the graph: quadratic, about 10 s for
// 10^4 nodes. Larger models are refused at once rather than timed out.
constexpr int64_t kMaxConvertedNodes = 16384;

int64_t CountNodes(const ::onnx::GraphProto& graph, int depth) {
  int64_t n = graph.node_size();
  if (depth > kMaxGraphDepth) return n;
  for (const ::onnx::NodeProto& node : graph.node()) {
    for (const ::onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) n += CountNodes(a.g(), depth + 1);
      for (const ::onnx::GraphProto& g : a.graphs()) n += CountNodes(g, depth + 1);
    }
  }
  return n;
}

// Every name a node or a graph output reads must be defined before it (by a
// graph input, an initializer, an earlier node or an enclosing graph), and a
// name is defined once per graph: the converter indexes values by name and
// does not check either. Linear in the size of the model.
absl::Status CheckNames(const ::onnx::GraphProto& graph, const NameScope* outer, const std::string& graph_where,
                        int depth) {
  if (depth > kMaxGraphDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(graph_where, " is nested more than ", kMaxGraphDepth, " graphs deep"));
  }
  NameScope scope;
  scope.parent = outer;
  for (const ::onnx::ValueInfoProto& in : graph.input()) scope.names.insert(in.name());
  for (const ::onnx::TensorProto& t : graph.initializer()) scope.names.insert(t.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const ::onnx::NodeProto& node = graph.node(i);
    for (const std::string& in : node.input()) {
      if (in.empty() || scope.Has(in)) continue;
      return absl::InvalidArgumentError(absl::StrCat(graph_where, ": ", NodeWhere(node, i), " reads '", in,
                                                     "', which no graph input, initializer or earlier node "
                                                     "defines"));
    }
    for (const ::onnx::AttributeProto& a : node.attribute()) {
      const std::string body_where = absl::StrCat(graph_where, ": ", NodeWhere(node, i), " attribute '", a.name(), "'");
      if (a.has_g()) {
        if (absl::Status s = CheckNames(a.g(), &scope, body_where, depth + 1); !s.ok()) return s;
      }
      for (const ::onnx::GraphProto& g : a.graphs()) {
        if (absl::Status s = CheckNames(g, &scope, body_where, depth + 1); !s.ok()) return s;
      }
    }
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      if (!scope.names.insert(out).second) {
        return absl::InvalidArgumentError(absl::StrCat(graph_where, ": ", NodeWhere(node, i), " defines '", out,
                                                       "', which is already defined in its graph"));
      }
    }
  }
  for (const ::onnx::ValueInfoProto& out : graph.output()) {
    if (!scope.Has(out.name())) {
      return absl::InvalidArgumentError(absl::StrCat(graph_where, " output '", out.name(),
                                                     "' names nothing (no graph input, initializer or node "
                                                     "defines it)"));
    }
  }
  return absl::OkStatus();
}

// ONNX's checker on each node of the main graph (attribute types, input and
// output counts against the op's schema, nested graphs), without its demand
// that every graph input and output declare a full type, which valid models
// often leave out. Throws onnx::checker::ValidationError.
void CheckNodesWithOnnx(const ::onnx::ModelProto& model) {
  ::onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const ::onnx::OperatorSetIdProto& o : model.opset_import()) {
    opsets[o.domain()] = static_cast<int>(o.version());
  }
  ctx.set_opset_imports(opsets);
  ::onnx::checker::LexicalScopeContext lex;
  const ::onnx::GraphProto& graph = model.graph();
  for (const ::onnx::ValueInfoProto& in : graph.input()) lex.add(in.name());
  for (const ::onnx::TensorProto& t : graph.initializer()) lex.add(t.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const ::onnx::NodeProto& node = graph.node(i);
    try {
      ::onnx::checker::check_node(node, ctx, lex);
    } catch (const ::onnx::checker::ValidationError& e) {
      throw std::runtime_error(absl::StrCat(NodeWhere(node, i), ": ", e.what()));
    }
    for (const std::string& out : node.output()) {
      if (!out.empty()) lex.add(out);
    }
  }
}

// What the child sends back: one tag byte, the payload's length (8 bytes),
// the payload.
enum ChildTag : char {
  kConverted = 'C',  // the converted ModelProto, serialized
  kCheckerFailed = 'K',
  kConverterFailed = 'F',
  kOutOfMemory = 'M',
  kTooLarge = 'L',
};

// Runs in the child: ONNX's checker on the nodes, shape inference, grove's
// PRelu fix-up, the converter.
void ConvertInChild(const ::onnx::ModelProto& model, int from, int to, char* tag, std::string* payload) {
  try {
    CheckNodesWithOnnx(model);
  } catch (const std::bad_alloc&) {
    *tag = kOutOfMemory;
    return;
  } catch (const std::exception& e) {
    *tag = kCheckerFailed;
    *payload = e.what();
    return;
  }
  try {
    // Some adapters (Add and Gemm 6 -> 7, to broadcasting) need the shapes
    // of their inputs, which the converter does not infer itself.
    ::onnx::ModelProto shaped = model;
    try {
      ::onnx::shape_inference::InferShapes(shaped);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception&) {
      shaped = model;  // convert without the shapes; an adapter that needs one says so
    }
    if (from < 7) ReshapeLegacyPReluSlopes(&shaped);
    ::onnx::ModelProto converted = ::onnx::version_conversion::ConvertVersion(shaped, to);
    if (converted.ByteSizeLong() > static_cast<size_t>(INT32_MAX)) {
      *tag = kTooLarge;
      return;
    }
    *tag = kConverted;
    *payload = converted.SerializeAsString();
  } catch (const std::bad_alloc&) {
    *tag = kOutOfMemory;
    payload->clear();
  } catch (const std::exception& e) {
    *tag = kConverterFailed;
    *payload = e.what();
  } catch (...) {
    *tag = kConverterFailed;
    *payload = "an unknown exception";
  }
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

// Forks, runs ConvertInChild there and reads its answer; the child is killed
// once `timeout_seconds` have passed.
absl::StatusOr<::onnx::ModelProto> ConvertInChildProcess(const ::onnx::ModelProto& model, int from, int to,
                                                         double timeout_seconds) {
  // The schema registry is built on first use; build it here, so a child
  // forked while another thread builds it cannot inherit a held lock.
  (void)::onnx::OpSchemaRegistry::Schema("Relu", 13, "");
  const std::string converting = absl::StrCat("converting the model from opset ", from, " to ", to);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ONNX's version converter (pipe: ", std::strerror(errno), ")"));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ONNX's version converter (fork: ", std::strerror(err), ")"));
  }
  if (pid == 0) {
    // The child: a crash ends it by its signal, with no core file and no
    // sanitizer report (libonnx is not grove's code to report on).
    ::close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) ::signal(sig, SIG_DFL);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    char tag = kConverterFailed;
    std::string payload;
    ConvertInChild(model, from, to, &tag, &payload);
    const uint64_t size = payload.size();
    char header[9];
    header[0] = tag;
    std::memcpy(header + 1, &size, sizeof(size));
    const bool ok = WriteAll(fds[1], header, sizeof(header)) && WriteAll(fds[1], payload.data(), payload.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);

  // Read the answer until it is complete, the child closes the pipe, or time
  // runs out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::string answer;
  uint64_t want = UINT64_MAX;  // header + payload, once the header is in
  bool timed_out = false;
  char buf[1 << 16];
  while (answer.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (n == 0) break;  // the child is gone
    answer.append(buf, static_cast<size_t>(n));
    if (want == UINT64_MAX && answer.size() >= 9) {
      uint64_t size = 0;
      std::memcpy(&size, answer.data() + 1, sizeof(size));
      want = size > (uint64_t{1} << 40) ? 0 : 9 + size;
    }
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX's version converter did not finish ", converting, " within ", timeout_seconds,
        " s and was stopped (a malformed model, or one too large for it: its run time grows with the square of the "
        "number of nodes)"));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::InvalidArgumentError(absl::StrCat("ONNX's version converter crashed on this model (signal ", sig,
                                                   ", ", SignalName(sig), ") while ", converting,
                                                   "; the model is malformed"));
  }
  if (want == UINT64_MAX || answer.size() < want || want < 9) {
    return absl::InternalError(absl::StrCat("ONNX's version converter ended without an answer while ", converting,
                                            WIFEXITED(status) ? absl::StrCat(" (exit status ", WEXITSTATUS(status), ")")
                                                              : std::string()));
  }
  const char tag = answer[0];
  std::string payload = answer.substr(9, want - 9);
  switch (tag) {
    case kConverted: {
      ::onnx::ModelProto converted;
      if (!converted.ParseFromString(payload)) {
        return absl::InternalError(absl::StrCat("the model ONNX's version converter returned does not parse (",
                                                converting, ")"));
      }
      return converted;
    }
    case kCheckerFailed:
      return absl::InvalidArgumentError(absl::StrCat("the model fails ONNX's checker: ", payload));
    case kOutOfMemory:
      return absl::ResourceExhaustedError(absl::StrCat("out of memory while ", converting));
    case kTooLarge:
      return absl::InvalidArgumentError(
          absl::StrCat("the model as converted from opset ", from, " is larger than 2 GiB"));
    case kConverterFailed:
      return ConverterFailed(model, from, to, payload);
    default:
      return absl::InternalError(absl::StrCat("ONNX's version converter answered nonsense while ", converting));
  }
}

}  // namespace

int64_t DefaultDomainOpset(const ::onnx::ModelProto& model) {
  int64_t opset = -1;
  for (const ::onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (IsDefault(o.domain())) opset = o.version();
  }
  return opset;
}

absl::StatusOr<::onnx::ModelProto> UpgradeOpset(const ::onnx::ModelProto& model, int from, int to,
                                                double timeout_seconds) {
  if (absl::Status s = CheckNames(model.graph(), nullptr, "the graph", 0); !s.ok()) return s;
  if (const int64_t nodes = CountNodes(model.graph(), 0); nodes > kMaxConvertedNodes) {
    return absl::UnimplementedError(absl::StrCat(
        "opset ", from, " is below the ", 11, " grove imports, and the model has ", nodes,
        " nodes: ONNX's version converter (libonnx ", ::onnx::LAST_RELEASE_VERSION, ") takes time quadratic in the "
        "number of nodes, so grove converts models of at most ", kMaxConvertedNodes,
        " nodes; export the model at opset ", 11, " or later"));
  }
  if (!model.has_ir_version() || model.ir_version() < 2) {
    // The converter's IR import returns null for these.
    return absl::InvalidArgumentError(
        absl::StrCat("the model's IR version (", model.ir_version(), ") is not a valid ONNX IR version"));
  }
  return ConvertInChildProcess(model, from, to, timeout_seconds);
}

}  // namespace grove::onnx_import
