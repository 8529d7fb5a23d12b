// Test helpers shared by the CPU and CUDA backend suites: what every
// backend's LoadedPlan must do alike, beyond matching the reference.
#pragma once

#include "runtime/backend.h"

namespace fusejit::testing {

// Runs a plan whose inputs and outputs are f32, f16 and bf16 through
// `backend` both ways and expects the raw outputs to hold the very bits the
// HostTensor outputs encode to; then checks the refusals (unknown name,
// wrong size, a run before every input is given, outputs of stale inputs).
void expect_raw_io_matches_host_tensors(Backend& backend);

// A plan loaded from a graph with one dropout seed and given another by
// set_dropout_seed() gives the very bits of the graph built with the other
// seed (fused and unfused; the other dropout keeps its own); then checks
// the refusals (a node that is not a dropout, an unknown name, a negative
// seed, outputs drawn with the old seed).
void expect_new_dropout_seed_draws_that_seeds_mask(Backend& backend);

}  // namespace fusejit::testing
