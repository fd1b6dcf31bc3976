// grove_conformance: runs the ONNX backend test data through grove and
// prints a table per op, a total per directory, and a results file.
//
//   grove_conformance                                  # everything, summary table
//   grove_conformance --filter conv --show-failures    # a subset, with reasons
//   grove_conformance --pass-list pass_list.txt --check          # CI: no regressions
//   grove_conformance --write-pass-list pass_list.txt  # regenerate the list
//
// Each case runs in a forked child, so a case that crashes, hangs or
// exhausts memory is reported as failed and the run goes on.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "test/conformance/onnx_test_case.h"

namespace grove::conformance {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "Usage: grove_conformance [flags]\n"
    "\n"
    "Imports and runs every ONNX backend test case under DATA/{node,pytorch-converted,\n"
    "pytorch-operator,simple} on the CPU and compares with rtol 1e-3, atol 1e-7.\n"
    "\n"
    "Flags:\n"
    "  --data DIR              test data root (default /usr/share/libonnx-testdata/data)\n"
    "  --dirs A,B              subdirectories to walk (default node,pytorch-converted,\n"
    "                          pytorch-operator,simple)\n"
    "  --filter TEXT           only cases whose name (dir/case) contains TEXT\n"
    "  --jobs N                cases run at once, each in its own process (default 2)\n"
    "  --timeout S             seconds per case before it counts as failed (default 60)\n"
    "  --results FILE          write per-case results as JSON (default conformance_results.json)\n"
    "  --pass-list FILE        the cases expected to pass\n"
    "  --check                 exit 1 if a case on --pass-list does not pass\n"
    "  --write-pass-list FILE  write the cases that passed, one per line\n"
    "  --show-failures         print each failed and unsupported case with its reason\n"
    "  --no-fork               run cases in this process (debugging; a crash ends the run)\n"
    "  --upgrade-opset N       convert models below opset 11 to opset N with ONNX's version\n"
    "                          converter first (without it, grove import converts them to 13)\n";

constexpr int kExitSkip = 77;  // CTest's SKIP_RETURN_CODE: no test data here
constexpr size_t kMaxMessage = 1500;

struct Flags {
  std::string data = "/usr/share/libonnx-testdata/data";
  std::vector<std::string> dirs = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string filter;
  int jobs = 2;
  int timeout_s = 60;
  std::string results = "conformance_results.json";
  std::string pass_list;
  bool check = false;
  std::string write_pass_list;
  bool show_failures = false;
  bool fork = true;
  CaseOptions case_options;
};

struct Case {
  std::string name;  // "node/test_add"
  std::string dir;   // "node"
  std::string path;
  CaseResult result;
  double seconds = 0;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto need = [&]() -> bool {
      if (eq != std::string::npos) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--check") {
      f->check = true;
    } else if (arg == "--show-failures") {
      f->show_failures = true;
    } else if (arg == "--no-fork") {
      f->fork = false;
    } else if (arg == "--data" && need()) {
      f->data = value;
    } else if (arg == "--dirs" && need()) {
      f->dirs = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (arg == "--filter" && need()) {
      f->filter = value;
    } else if (arg == "--jobs" && need()) {
      if (!absl::SimpleAtoi(value, &f->jobs) || f->jobs < 1) return false;
    } else if (arg == "--timeout" && need()) {
      if (!absl::SimpleAtoi(value, &f->timeout_s) || f->timeout_s < 1) return false;
    } else if (arg == "--upgrade-opset" && need()) {
      if (!absl::SimpleAtoi(value, &f->case_options.upgrade_opset) || f->case_options.upgrade_opset < 11)
        return false;
    } else if (arg == "--results" && need()) {
      f->results = value;
    } else if (arg == "--pass-list" && need()) {
      f->pass_list = value;
    } else if (arg == "--write-pass-list" && need()) {
      f->write_pass_list = value;
    } else {
      std::fprintf(stderr, "grove_conformance: bad argument '%s'\n", argv[i]);
      return false;
    }
  }
  if (f->check && f->pass_list.empty()) {
    std::fprintf(stderr, "grove_conformance: --check needs --pass-list\n");
    return false;
  }
  return true;
}

std::vector<Case> FindCases(const Flags& flags) {
  std::vector<Case> cases;
  for (const std::string& dir : flags.dirs) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(fs::path(flags.data) / dir, ec)) {
      std::error_code ec2;
      if (fs::exists(e.path() / "model.onnx", ec2)) names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      Case c;
      c.name = absl::StrCat(dir, "/", n);
      if (!flags.filter.empty() && c.name.find(flags.filter) == std::string::npos) continue;
      c.dir = dir;
      c.path = (fs::path(flags.data) / dir / n).string();
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  if (s.size() > kMaxMessage) s = s.substr(0, kMaxMessage) + "...";
  return s;
}

// The child's report: "outcome\top\tmessage\n".
std::string Encode(const CaseResult& r) {
  return absl::StrCat(static_cast<int>(r.outcome), "\t", OneLine(r.op), "\t", OneLine(r.message), "\n");
}

bool Decode(const std::string& line, CaseResult* r) {
  std::vector<std::string> parts = absl::StrSplit(absl::StripSuffix(line, "\n"), absl::MaxSplits('\t', 2));
  int outcome = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &outcome) || outcome < 0 || outcome > 2) return false;
  r->outcome = static_cast<Outcome>(outcome);
  r->op = parts[1];
  r->message = parts[2];
  return true;
}

CaseResult RunGuarded(const std::string& path, const CaseOptions& options) {
  try {
    return RunCase(path, options);
  } catch (const std::exception& e) {
    return CaseResult{Outcome::kFailed, CaseOp(path), absl::StrCat("exception: ", e.what())};
  }
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  std::string out;
  Clock::time_point start;
  bool timed_out = false;
};

void Finish(Child& c, int status, std::vector<Case>& cases, int timeout_s) {
  Case& cs = cases[c.index];
  cs.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
  if (c.timed_out) {
    cs.result = CaseResult{Outcome::kFailed, CaseOp(cs.path), absl::StrCat("timed out after ", timeout_s, " s")};
  } else if (!Decode(c.out, &cs.result)) {
    std::string why =
        WIFSIGNALED(status)
            ? absl::StrCat("crashed (signal ", WTERMSIG(status), ", ", strsignal(WTERMSIG(status)), ")")
            : absl::StrCat("exited with status ", WEXITSTATUS(status), " without a result");
    cs.result = CaseResult{Outcome::kFailed, CaseOp(cs.path), why};
  }
  close(c.fd);
}

void RunForked(std::vector<Case>& cases, const Flags& flags) {
  std::vector<Child> running;
  size_t next = 0;
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < flags.jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        cases[next].result = CaseResult{Outcome::kFailed, "", "pipe() failed"};
        ++next;
        continue;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        // Keep a runaway case from taking the machine down with it.
        struct rlimit limit = {uint64_t{8} << 30, uint64_t{8} << 30};
        setrlimit(RLIMIT_AS, &limit);
        const int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) {
          dup2(null_fd, 1);
          dup2(null_fd, 2);
        }
        const std::string line = Encode(RunGuarded(cases[next].path, flags.case_options));
        size_t done = 0;
        while (done < line.size()) {
          const ssize_t n = write(fds[1], line.data() + done, line.size() - done);
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
        _exit(0);
      }
      close(fds[1]);
      if (pid < 0) {
        close(fds[0]);
        cases[next].result = CaseResult{Outcome::kFailed, "", "fork() failed"};
        ++next;
        continue;
      }
      Child c;
      c.pid = pid;
      c.fd = fds[0];
      c.index = next++;
      c.start = Clock::now();
      running.push_back(std::move(c));
    }
    std::vector<pollfd> pfds;
    for (const Child& c : running) pfds.push_back(pollfd{c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 100);
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      bool eof = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = read(c.fd, buf, sizeof(buf));
        if (n > 0) {
          c.out.append(buf, static_cast<size_t>(n));
        } else {
          eof = true;
        }
      }
      if (!eof && Clock::now() - c.start > std::chrono::seconds(flags.timeout_s)) {
        kill(c.pid, SIGKILL);
        c.timed_out = true;
        eof = true;
      }
      if (!eof) {
        ++i;
        continue;
      }
      int status = 0;
      waitpid(c.pid, &status, 0);
      Finish(c, status, cases, flags.timeout_s);
      pfds.erase(pfds.begin() + static_cast<long>(i));
      running.erase(running.begin() + static_cast<long>(i));
    }
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

struct Counts {
  int passed = 0, failed = 0, unsupported = 0;
  int total() const { return passed + failed + unsupported; }
  void Add(Outcome o) {
    if (o == Outcome::kPassed) ++passed;
    if (o == Outcome::kFailed) ++failed;
    if (o == Outcome::kUnsupported) ++unsupported;
  }
};

double Rate(const Counts& c) { return c.total() == 0 ? 0 : 100.0 * c.passed / c.total(); }

void PrintTables(const std::vector<Case>& cases) {
  std::map<std::string, Counts> by_op;
  std::map<std::string, Counts> by_dir;
  Counts all;
  for (const Case& c : cases) {
    by_op[c.result.op.empty() ? "?" : c.result.op].Add(c.result.outcome);
    by_dir[c.dir].Add(c.result.outcome);
    all.Add(c.result.outcome);
  }
  std::printf("%-32s %7s %7s %12s %6s\n", "op", "passed", "failed", "unsupported", "total");
  for (const auto& [op, n] : by_op) {
    std::printf("%-32s %7d %7d %12d %6d\n", op.c_str(), n.passed, n.failed, n.unsupported, n.total());
  }
  std::printf("\n%-32s %7s %7s %12s %6s %9s\n", "directory", "passed", "failed", "unsupported", "total",
              "pass rate");
  for (const auto& [dir, n] : by_dir) {
    std::printf("%-32s %7d %7d %12d %6d %8.1f%%\n", dir.c_str(), n.passed, n.failed, n.unsupported, n.total(),
                Rate(n));
  }
  std::printf("%-32s %7d %7d %12d %6d %8.1f%%\n", "total", all.passed, all.failed, all.unsupported, all.total(),
              Rate(all));
}

bool WriteResults(const std::string& path, const std::vector<Case>& cases) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return false;
  Counts all;
  for (const Case& c : cases) all.Add(c.result.outcome);
  f << "{\n  \"rtol\": " << kRtol << ", \"atol\": " << kAtol << ",\n";
  f << "  \"summary\": {\"passed\": " << all.passed << ", \"failed\": " << all.failed
    << ", \"unsupported\": " << all.unsupported << ", \"total\": " << all.total() << "},\n";
  f << "  \"cases\": [\n";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    f << "    {\"name\": " << JsonString(c.name) << ", \"dir\": " << JsonString(c.dir)
      << ", \"op\": " << JsonString(c.result.op) << ", \"outcome\": \"" << OutcomeName(c.result.outcome)
      << "\", \"seconds\": " << absl::StrFormat("%.3f", c.seconds)
      << ", \"message\": " << JsonString(c.result.message) << "}" << (i + 1 < cases.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
  return static_cast<bool>(f);
}

std::vector<std::string> ReadPassList(const std::string& path, bool* ok) {
  std::vector<std::string> names;
  std::ifstream f(path);
  *ok = static_cast<bool>(f);
  std::string line;
  while (std::getline(f, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#') continue;
    names.emplace_back(l);
  }
  return names;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::error_code ec;
  if (!fs::is_directory(flags.data, ec)) {
    std::printf("grove_conformance: no test data at %s (install libonnx-testdata); skipping\n",
                flags.data.c_str());
    return kExitSkip;
  }
  std::vector<Case> cases = FindCases(flags);
  if (cases.empty()) {
    std::fprintf(stderr, "grove_conformance: no cases found under %s\n", flags.data.c_str());
    return 1;
  }
  // Kernels use one BLAS thread per process; the parallelism is the jobs.
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  const Clock::time_point start = Clock::now();
  if (flags.fork) {
    RunForked(cases, flags);
  } else {
    for (Case& c : cases) {
      const Clock::time_point t0 = Clock::now();
      c.result = RunGuarded(c.path, flags.case_options);
      c.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  if (flags.show_failures) {
    for (const Case& c : cases) {
      if (c.result.outcome == Outcome::kPassed) continue;
      std::printf("%-11s %s [%s]: %s\n", std::string(OutcomeName(c.result.outcome)).c_str(), c.name.c_str(),
                  c.result.op.c_str(), c.result.message.c_str());
    }
    std::printf("\n");
  }
  PrintTables(cases);
  std::printf("%zu cases in %.1f s\n", cases.size(), seconds);

  if (!flags.results.empty()) {
    if (WriteResults(flags.results, cases)) {
      std::printf("results: %s\n", flags.results.c_str());
    } else {
      std::fprintf(stderr, "grove_conformance: cannot write %s\n", flags.results.c_str());
    }
  }
  if (!flags.write_pass_list.empty()) {
    std::ofstream f(flags.write_pass_list, std::ios::trunc);
    f << "# ONNX backend test cases grove passes (grove_conformance --write-pass-list).\n"
         "# The 'conformance' ctest fails if one of these stops passing.\n";
    int n = 0;
    for (const Case& c : cases) {
      if (c.result.outcome == Outcome::kPassed) {
        f << c.name << "\n";
        ++n;
      }
    }
    if (!f) {
      std::fprintf(stderr, "grove_conformance: cannot write %s\n", flags.write_pass_list.c_str());
      return 1;
    }
    std::printf("pass list: %d cases written to %s\n", n, flags.write_pass_list.c_str());
  }

  if (!flags.pass_list.empty()) {
    bool ok = false;
    const std::vector<std::string> expected = ReadPassList(flags.pass_list, &ok);
    if (!ok) {
      std::fprintf(stderr, "grove_conformance: cannot read %s\n", flags.pass_list.c_str());
      return 1;
    }
    std::map<std::string, const Case*> by_name;
    for (const Case& c : cases) by_name[c.name] = &c;
    const std::set<std::string> listed(expected.begin(), expected.end());
    int regressions = 0;
    for (const std::string& name : expected) {
      if (!flags.filter.empty() && name.find(flags.filter) == std::string::npos) continue;
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        std::printf("REGRESSION %s: not found under %s\n", name.c_str(), flags.data.c_str());
        ++regressions;
      } else if (it->second->result.outcome != Outcome::kPassed) {
        std::printf("REGRESSION %s: %s: %s\n", name.c_str(),
                    std::string(OutcomeName(it->second->result.outcome)).c_str(),
                    it->second->result.message.c_str());
        ++regressions;
      }
    }
    int newly = 0;
    for (const Case& c : cases) {
      if (c.result.outcome == Outcome::kPassed && !listed.contains(c.name)) {
        std::printf("newly passing (not on the pass list): %s\n", c.name.c_str());
        ++newly;
      }
    }
    std::printf("pass list: %zu listed, %d regressed, %d newly passing%s\n", expected.size(), regressions, newly,
                newly > 0 ? " (regenerate with --write-pass-list)" : "");
    if (flags.check && regressions > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace grove::conformance

int main(int argc, char** argv) { return grove::conformance::Main(argc, argv); }
