// A "module" of the CUDA emulator: CUDA source (what fusejit would give
// NVRTC) compiled for the host with device_shim.h, and loaded with dlopen.
//
// The compiler is $CXX, else c++, at -O1 (the emulator tests logic, not
// speed, and compiles hundreds of modules). Objects are cached by a hash of
// the shim, the compiler command and the source, in $FUSEJIT_EMULATOR_CACHE,
// else $FUSEJIT_CACHE_DIR/emulator, else $TMPDIR/fusejit-emulator-UID, written
// temp-then-rename so that concurrent test processes share them safely.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "emu_state.h"

namespace fusejit::emulator {

class KernelModule {
 public:
  using Launch = void (*)(void** args);  // one CUDA thread of a kernel

  // The module, or nullptr with *error holding the compiler's output.
  static std::unique_ptr<KernelModule> load(const std::string& source, std::string* error);
  ~KernelModule();
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;

  // The kernel `name` (an extern "C" __global__ function of the source), or nullptr.
  Launch kernel(const std::string& name) const;
  FjEmuState& state() const { return *state_; }
  // Fills the module's __shared__ variables with 0xFF bytes (NaN): before
  // each block, so that a kernel reading what its block never wrote gets
  // NaN, not zeros or the last block's values.
  void poison_shared_memory() const;

 private:
  KernelModule() = default;
  void* handle_ = nullptr;
  FjEmuState* state_ = nullptr;
  char* shared_begin_ = nullptr;
  char* shared_end_ = nullptr;
};

// The extern "C" __global__ functions a source defines, in order.
std::vector<std::string> kernel_names(const std::string& source);

}  // namespace fusejit::emulator
