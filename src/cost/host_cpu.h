// What /proc/cpuinfo says about the CPU this process runs on: the model name
// shown to users, and the identity (model and feature flags) that decides
// whether code compiled with -march=native here may run.
#pragma once

#include <string>

namespace fusejit {

// The "model name" of the first CPU, or "unknown CPU".
std::string host_cpu_model();

// The model name and feature-flag lines of the first CPU, verbatim; empty
// where /proc/cpuinfo cannot be read.
std::string host_cpu_identity();

// Whether the CPU has AVX512-BF16, so that JIT kernels compiled with
// -march=native narrow bf16 spans natively (DeviceSpec::native_bf16_stores).
// $FUSEJIT_CXXFLAGS can take it away from the kernels ("-mno-avx512f");
// the model does not follow it there.
bool host_cpu_has_avx512_bf16();
// Whether the CPU has F16C and AVX (nearly every x86-64 CPU since 2012),
// so that JIT kernels narrow f16 spans natively
// (DeviceSpec::native_f16_stores). As above, $FUSEJIT_CXXFLAGS can take
// that away from the kernels (with GCC: "-mno-f16c -mno-avx512dq"); the
// model does not follow it there.
bool host_cpu_has_f16c();

}  // namespace fusejit
