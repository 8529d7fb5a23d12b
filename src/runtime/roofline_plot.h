// The roofline chart of a benchmark, drawn by gnuplot: the measured memory
// ceiling as the bandwidth slope, the FP32 peak as the compute roof, and
// every kernel of both plans as a labelled point at its arithmetic
// intensity and achieved FLOP/s.
#pragma once

#include <string>

#include <absl/status/status.h>

#include "runtime/benchmark.h"

namespace fusejit {

// The gnuplot script that draws `result` into `path` (.svg or .png).
std::string roofline_gnuplot_script(const BenchResult& result, const std::string& path);
// Runs gnuplot on that script, drawing into a temporary file beside `path`
// that replaces `path` only once drawn (a failure leaves `path` as it was).
// Unavailable when gnuplot is not installed (scripts/setup.sh installs it),
// InvalidArgument for an extension other than .svg or .png.
absl::Status write_roofline_plot(const BenchResult& result, const std::string& path);
// Whether a chart could be written to `path`, checked before a benchmark
// runs rather than after: gnuplot on PATH, the folder there, and `path`
// either absent or, with `overwrite`, a file (never a folder).
absl::Status check_roofline_plot_target(const std::string& path, bool overwrite);

}  // namespace fusejit
