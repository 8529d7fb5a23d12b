#include "kernel_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#ifndef FUSEJIT_EMULATOR_DIR
#error "FUSEJIT_EMULATOR_DIR (the directory of device_shim.h) must be defined"
#endif

namespace fusejit::emulator {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t fnv1a(const std::string& text, uint64_t hash = 0xcbf29ce484222325ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx != nullptr && *cxx != '\0' ? cxx : "c++";
}

fs::path cache_dir() {
  if (const char* dir = std::getenv("FUSEJIT_EMULATOR_CACHE"); dir != nullptr && *dir != '\0') return dir;
  if (const char* dir = std::getenv("FUSEJIT_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return fs::path(dir) / "emulator";
  }
  return fs::temp_directory_path() / fmt::format("fusejit-emulator-{}", getuid());
}

// Runs `command`, returning its exit status and (in *output) what it printed.
int run(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *output = "popen failed";
    return -1;
  }
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output->append(buffer, n);
  return pclose(pipe);
}

// The host object for `source`, compiled unless cached; empty on failure.
std::string compiled_object(const std::string& source, std::string* error) {
  const fs::path dir = FUSEJIT_EMULATOR_DIR;
  std::string module_source = source + "\n// ---- added by the CUDA emulator: one launch entry per kernel ----\n";
  for (const std::string& name : kernel_names(source)) {
    module_source += fmt::format("extern \"C\" void fj_emu_launch_{0}(void** args) {{ fj_emu_call(&{0}, args); }}\n", name);
  }
  const std::string command_prefix = fmt::format(
      "{} -std=c++17 -O1 -fPIC -shared -fno-strict-aliasing -w -I'{}' -include '{}'", compiler(), dir.string(),
      (dir / "device_shim.h").string());
  // The shim's files are read once per process, not once per module.
  static const uint64_t shim_hash = fnv1a(read_file(dir / "emu_state.h"), fnv1a(read_file(dir / "device_shim.h")));
  uint64_t key = fnv1a(command_prefix, shim_hash);
  key = fnv1a(module_source, key);
  std::error_code ec;
  const fs::path cache = cache_dir();
  fs::create_directories(cache, ec);
  const fs::path object = cache / fmt::format("{:016x}.so", key);
  if (fs::exists(object, ec)) return object.string();

  const std::string stem = fmt::format("{:016x}.{}.{}", key, getpid(), reinterpret_cast<uintptr_t>(&source));
  const fs::path source_file = cache / (stem + ".cu");
  const fs::path temp_object = cache / (stem + ".so");
  {
    std::ofstream out(source_file, std::ios::binary);
    out << module_source;
    if (!out) {
      *error = fmt::format("cannot write {}", source_file.string());
      return "";
    }
  }
  std::string output;
  const std::string command =
      fmt::format("{} -x c++ '{}' -o '{}'", command_prefix, source_file.string(), temp_object.string());
  const int status = run(command, &output);
  fs::remove(source_file, ec);
  if (status != 0) {
    fs::remove(temp_object, ec);
    *error = fmt::format("the CUDA emulator could not compile the module for the host:\n{}\n{}", command, output);
    return "";
  }
  fs::rename(temp_object, object, ec);  // atomic: another process may have put the same object there
  if (ec) {
    *error = fmt::format("cannot rename {} to {}: {}", temp_object.string(), object.string(), ec.message());
    return "";
  }
  return object.string();
}

}  // namespace

std::vector<std::string> kernel_names(const std::string& source) {
  static const std::regex kKernel(R"(extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\()");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kKernel); it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1].str());
  }
  return names;
}

std::unique_ptr<KernelModule> KernelModule::load(const std::string& source, std::string* error) {
  const std::string object = compiled_object(source, error);
  if (object.empty()) return nullptr;
  void* handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = fmt::format("dlopen {} failed: {}", object, dlerror());
    return nullptr;
  }
  std::unique_ptr<KernelModule> module(new KernelModule);
  module->handle_ = handle;
  module->state_ = static_cast<FjEmuState*>(dlsym(handle, "fj_emu_state"));
  if (module->state_ == nullptr) {
    *error = fmt::format("{} lacks fj_emu_state (not built with device_shim.h?)", object);
    return nullptr;
  }
  using SharedMemory = void (*)(char**, char**);
  auto shared_memory = reinterpret_cast<SharedMemory>(dlsym(handle, "fj_emu_shared_memory"));
  if (shared_memory == nullptr) {
    *error = fmt::format("{} lacks fj_emu_shared_memory (built with an older device_shim.h?)", object);
    return nullptr;
  }
  shared_memory(&module->shared_begin_, &module->shared_end_);
  return module;
}

void KernelModule::poison_shared_memory() const {
  if (shared_begin_ != nullptr) std::memset(shared_begin_, 0xFF, static_cast<size_t>(shared_end_ - shared_begin_));
}

KernelModule::~KernelModule() {
  if (handle_ != nullptr) dlclose(handle_);
}

KernelModule::Launch KernelModule::kernel(const std::string& name) const {
  return reinterpret_cast<Launch>(dlsym(handle_, ("fj_emu_launch_" + name).c_str()));
}

}  // namespace fusejit::emulator
