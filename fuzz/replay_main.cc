// grove_fuzz_replay: runs fuzz targets over files without libFuzzer, so the
// normal build (and the sanitizer build) replays every crash the fuzzers
// found, and their seeds. Each target's entry point is compiled in under its
// own name (fuzz/CMakeLists.txt); a folder's name picks the target:
//
//   grove_fuzz_replay test/fuzz_regressions fuzz/corpus
//     test/fuzz_regressions/onnx_import/crash-xyz  -> the onnx_import target
//
// A crash, a sanitizer report or a hang (ctest's timeout) fails the test;
// refused inputs are the expected outcome.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int GroveFuzzModelLoader(const uint8_t* data, size_t size);
extern "C" int GroveFuzzOnnxImport(const uint8_t* data, size_t size);
extern "C" int GroveFuzzNpyReader(const uint8_t* data, size_t size);
extern "C" int GroveFuzzOpRun(const uint8_t* data, size_t size);
extern "C" int GroveFuzzKernelTable(const uint8_t* data, size_t size);

namespace {

using Target = int (*)(const uint8_t*, size_t);

Target TargetFor(const std::string& name) {
  if (name == "model_loader") return GroveFuzzModelLoader;
  if (name == "onnx_import") return GroveFuzzOnnxImport;
  if (name == "npy_reader") return GroveFuzzNpyReader;
  if (name == "op_run") return GroveFuzzOpRun;
  if (name == "kernel_table") return GroveFuzzKernelTable;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int files = 0;
  for (int a = 1; a < argc; ++a) {
    if (!fs::is_directory(argv[a])) {
      std::fprintf(stderr, "grove_fuzz_replay: %s is not a folder\n", argv[a]);
      return 2;
    }
    for (const fs::directory_entry& target_dir : fs::directory_iterator(argv[a])) {
      if (!target_dir.is_directory()) continue;
      const std::string name = target_dir.path().filename().string();
      Target target = TargetFor(name);
      if (target == nullptr) {
        std::fprintf(stderr, "grove_fuzz_replay: no fuzz target called %s (%s)\n", name.c_str(),
                     target_dir.path().c_str());
        return 2;
      }
      std::vector<fs::path> paths;
      for (const fs::directory_entry& f : fs::recursive_directory_iterator(target_dir.path())) {
        if (f.is_regular_file() && f.path().filename().string()[0] != '.' &&
            f.path().filename() != "README.md") {
          paths.push_back(f.path());
        }
      }
      std::sort(paths.begin(), paths.end());
      for (const fs::path& p : paths) {
        std::ifstream in(p, std::ios::binary);
        std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto start = std::chrono::steady_clock::now();
        target(bytes.data(), bytes.size());
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        std::printf("%-12s %8.1f ms  %s\n", name.c_str(), ms, p.c_str());
        ++files;
      }
    }
  }
  std::printf("grove_fuzz_replay: %d files, no crash\n", files);
  return 0;
}
