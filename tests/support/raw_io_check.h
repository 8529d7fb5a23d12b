// Test helper shared by the CPU and CUDA backend suites: LoadedPlan's raw
// I/O (set_input, read_output) against its HostTensor I/O, and the calls
// it must refuse.
#pragma once

#include "runtime/backend.h"

namespace fusejit::testing {

// Runs a plan whose inputs and outputs are f32, f16 and bf16 through
// `backend` both ways and expects the raw outputs to hold the very bits the
// HostTensor outputs encode to; then checks the refusals (unknown name,
// wrong size, a run before every input is given, outputs of stale inputs).
void expect_raw_io_matches_host_tensors(Backend& backend);

}  // namespace fusejit::testing
