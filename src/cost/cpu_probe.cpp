// Measuring the `cpu` device on this machine, and caching the result.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <immintrin.h>
#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost/device.h"
#include "cost/host_cpu.h"
#include "cost/host_memory.h"
#include "cost/machine_load.h"
#include "cost/streaming_copy.h"
#include "fusejit_version.h"
#include "ir/available_memory.h"
#include "ir/counted.h"
#include "ir/cpu_count.h"
#include "ir/messages.h"
#include "ir/philox.h"

namespace fusejit {
namespace {

using Clock = std::chrono::steady_clock;

int thread_count() { return usable_cpu_count(); }

// Runs body(thread index) on every CPU the process may use and returns the
// seconds the slowest one took.
double run_parallel(const std::function<void(int)>& body) {
  const int n = thread_count();
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < n; ++t) threads.emplace_back(body, t);
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Size of the cache at `level` of cpu0, from sysfs ("32K", "1024K", "32M").
int64_t cache_size(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    if (read_first_line(dir + "level") != std::to_string(level)) continue;
    if (read_first_line(dir + "type") == "Instruction") continue;
    const std::string size = read_first_line(dir + "size");
    if (size.empty()) continue;
    int64_t value = std::atoll(size.c_str());
    if (size.back() == 'K') value *= 1024;
    if (size.back() == 'M') value *= 1024 * 1024;
    return value;
  }
  return 0;
}

// Copy bandwidth counted as STREAM does: bytes read + bytes written, with
// streaming stores (streaming_copy.h says why); every thread copying, and
// one thread copying its part alone (0 for both when out of memory).
struct CopyGbps {
  double all_threads = 0;
  double one_thread = 0;
};
CopyGbps measure_copy_gbps(int64_t bytes) {
  const int n = thread_count();
  for (;; bytes /= 2) {
    // Twice `bytes` (source and destination) beyond what is available:
    // smaller, as when an allocation fails (where overcommit lets it pass).
    if (bytes > (int64_t{64} << 20) && !host_allocation_fits(2 * static_cast<uint64_t>(bytes))) continue;
    const size_t per_thread = static_cast<size_t>(bytes / n);
    std::vector<HostMemory> src(n), dst(n);
    run_parallel([&](int t) {  // first touch by the thread that will use the pages
      src[t] = allocate_host_memory(per_thread);
      dst[t] = allocate_host_memory(per_thread);
      if (src[t] == nullptr || dst[t] == nullptr) return;
      std::memset(src[t].get(), t + 1, per_thread);
      std::memset(dst[t].get(), 0, per_thread);
    });
    const bool allocated =
        std::all_of(src.begin(), src.end(), [](const HostMemory& m) { return m != nullptr; }) &&
        std::all_of(dst.begin(), dst.end(), [](const HostMemory& m) { return m != nullptr; });
    // Out of memory: a smaller copy, down to 32 MiB, still far beyond any
    // core's caches.
    if (!allocated && bytes > (int64_t{64} << 20)) continue;
    if (!allocated) return {};  // the caller's sanity check refuses it
    auto copy = [&](int t) {
      streaming_copy(static_cast<char*>(dst[t].get()), static_cast<char*>(src[t].get()), per_thread);
    };
    double best = 1e30, best_alone = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      best = std::min(best, run_parallel(copy));
      const auto start = Clock::now();
      copy(0);  // on this thread, the others idle: the part is far beyond its caches too
      best_alone = std::min(best_alone, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return {2.0 * static_cast<double>(per_thread * n) / best / 1e9,
            2.0 * static_cast<double>(per_thread) / best_alone / 1e9};
  }
}

// Eight times the last-level cache, at least 256 MiB and at most 1 GiB per
// array (a server's L3 of several hundred MiB is shared by many cores, and
// 8 GiB of arrays would be a burden on the machine for no better figure).
int64_t copy_bytes() {
  return std::clamp<int64_t>(8 * cpu_identity().cache_bytes, int64_t{256} << 20, int64_t{1} << 30);
}

// How the probe copies: the stores, and the pages of the arrays (a cache
// file measured another way is measured again).
std::string copy_method(int64_t bytes) {
  return fmt::format("{}{}", streaming_copy_method(),
                     uses_huge_pages(static_cast<size_t>(bytes / thread_count())) ? " over huge pages" : "");
}

// FMA throughput: 12 independent 8-lane accumulators hide the FMA latency
// on two FMA pipes. AVX2+FMA where the CPU has them (the CPU backend
// compiles with -march=native); plain SSE multiply-add otherwise.
constexpr int kAccumulators = 12;

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iterations) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < kAccumulators; ++i) s += _mm256_cvtss_f32(acc[i]);
  return s;
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < kAccumulators; ++i) s += _mm512_cvtss_f32(acc[i]);
  return s;
}

float fma_loop_sse(int64_t iterations) {
  __m128 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_set1_ps(static_cast<float>(i));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], a), b);
  }
  float s = 0;
  for (int i = 0; i < kAccumulators; ++i) s += _mm_cvtss_f32(acc[i]);
  return s;
}

// The widest FMA the CPU backend's kernels use: AVX-512 where the CPU has
// it (they are compiled with -mprefer-vector-width=512 there), else AVX2.
int fma_lanes() {
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
  return 4;
}

double measure_fma_tflops() {
  constexpr int64_t kIterations = 10'000'000;
  const int lanes = fma_lanes();
  std::vector<float> sink(thread_count());
  const double seconds = run_parallel([&](int t) {
    sink[t] = lanes == 16 ? fma_loop_avx512(kIterations) : lanes == 8 ? fma_loop_avx2(kIterations) : fma_loop_sse(kIterations);
  });
  // Two FLOPs (multiply + add) per lane per accumulator per iteration.
  return static_cast<double>(thread_count()) * kIterations * kAccumulators * lanes * 2 / seconds / 1e12;
}

// Elements per second of `op` from one L1-resident array into another, on
// every thread, times the op's FLOP weight: the class's throughput in the
// model's units. Independent elements, so the loop is limited by the op's
// throughput, not by a chain of dependent additions.
template <typename Op>
double measure_class_tflops(double flops_per_element, Op op) {
  constexpr int kElements = 4096;
  constexpr int kRepeats = 600;
  std::vector<float> sink(thread_count());
  const double seconds = run_parallel([&](int t) {
    std::vector<float> in(kElements), out(kElements);
    for (int i = 0; i < kElements; ++i) in[i] = 0.25f + static_cast<float>(i % 97) * 0.01f;
    for (int r = 0; r < kRepeats; ++r) {
      const uint64_t base = static_cast<uint64_t>(r) * kElements;
      for (int i = 0; i < kElements; ++i) out[i] = op(in[i], base + i);
      in[r % kElements] = out[(r * 7) % kElements] * 1e-3f + 0.25f;  // keeps the work observable
    }
    sink[t] = out[t % kElements];
  });
  const double elements = static_cast<double>(thread_count()) * kElements * kRepeats;
  return flops_per_element * elements / seconds / 1e12;
}

double measure_launch_us() {
  std::vector<double> samples;
  for (int i = 0; i < 21; ++i) samples.push_back(run_parallel([](int) {}) * 1e6);
  std::nth_element(samples.begin(), samples.begin() + 10, samples.end());
  return samples[10];
}

double weight(Op op) { return op_info(op).flops; }

// The op-table FLOP weights the class probes divide by: a figure cached
// under other weights (dropout's went from 18 to 10) would misprice its class.
std::string probe_weights() {
  return fmt::format("simple {}, div_sqrt {}, exp_log {}, erf {}, pow {}, philox {}", weight(Op::kMul) + weight(Op::kAdd),
                     weight(Op::kRsqrt), weight(Op::kExp), weight(Op::kErf), weight(Op::kPow), weight(Op::kDropout));
}

nlohmann::json to_json(const DeviceSpec& d, const std::string& model) {
  nlohmann::json classes;
  for (int c = 0; c < kNumCostClasses; ++c) {
    classes[std::string(cost_class_name(static_cast<CostClass>(c)))] = d.class_tflops[c];
  }
  nlohmann::json j = {{"fusejit", FUSEJIT_VERSION},
                      {"cpu", model},
                      {"threads", thread_count()},
                      {"copy", copy_method(copy_bytes())},
                      {"fma_lanes", fma_lanes()},
                      {"op_weights", probe_weights()},
                      {"bandwidth_gbps", d.bandwidth_gbps},
                      {"thread_bandwidth_gbps", d.thread_bandwidth_gbps},
                      {"peak_f32_tflops", d.peak_f32_tflops},
                      {"launch_overhead_us", d.launch_overhead_us},
                      {"class_tflops", classes}};
  write_busy_fields(j, d.others_busy_share, d.busy_remeasures);
  return j;
}

// The cached spec, if the file exists, parses, and describes this machine,
// measured the way this version measures: the same copy over the same
// pages, FMAs as wide, the same op weights (an older file holds a memcpy's
// bandwidth, a quarter low, or 4 KiB pages, or an AVX2 peak on an AVX-512
// CPU, or dropout priced at 18 FLOPs: measured again).
std::optional<DeviceSpec> from_json(const nlohmann::json& j, const std::string& model) {
  if (j.value("fusejit", "") != FUSEJIT_VERSION || j.value("cpu", "") != model ||
      j.value("threads", 0) != thread_count() || j.value("copy", "") != copy_method(copy_bytes()) ||
      j.value("fma_lanes", 0) != fma_lanes() || j.value("op_weights", "") != probe_weights()) {
    return std::nullopt;
  }
  DeviceSpec d = cpu_identity();
  d.bandwidth_gbps = j.at("bandwidth_gbps").get<double>();
  d.thread_bandwidth_gbps = j.at("thread_bandwidth_gbps").get<double>();  // absent (an older file): measured again
  d.peak_f32_tflops = j.at("peak_f32_tflops").get<double>();
  d.peak_tensor_tflops = d.peak_f32_tflops;
  d.launch_overhead_us = j.at("launch_overhead_us").get<double>();
  for (int c = 0; c < kNumCostClasses; ++c) {
    d.class_tflops[c] = j.at("class_tflops").at(std::string(cost_class_name(static_cast<CostClass>(c)))).get<double>();
  }
  read_busy_fields(j, d.others_busy_share, d.busy_remeasures);  // absent (an older file): measured again
  if (!plausible_measured_figures(d)) return std::nullopt;
  return d;
}

}  // namespace

// What is known about this CPU without measuring: name, threads, caches.
DeviceSpec cpu_identity() {
  DeviceSpec d;
  d.name = "cpu";
  d.measured = true;
  d.compute_units = thread_count();
  d.description = fmt::format("{}, {} (measured on this machine)", host_cpu_model(), counted(thread_count(), "thread"));
  d.cache_bytes = std::max(cache_size(3), cache_size(2));
  // CPU row kernels read a row once however long it is (codegen/cpu/row.cpp);
  // a model that re-read long rows predicted a 40,000-column chain 0.40x
  // fused where it measured 1.48x.
  d.persistent_row_limit = kAnyRowLength;
  d.overlap = 0;  // a core's memory and compute times add (DeviceSpec::overlap)
  d.native_bf16_stores = host_cpu_has_avx512_bf16();
  d.native_f16_stores = host_cpu_has_f16c();
  return d;
}

std::string cache_directory() {
  if (const char* dir = std::getenv("FUSEJIT_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  // As the XDG base directory spec says, a relative $XDG_CACHE_HOME is
  // ignored; so is an empty or relative $HOME, which would put the cache
  // in whatever folder the program runs in. Without either, the home
  // folder the password database gives; without that, a folder of this
  // user's own under /tmp, which KernelCache refuses to load kernels
  // from if another user made it (untrusted_folder_reason).
  auto absolute = [](const char* dir) { return dir != nullptr && dir[0] == '/'; };
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); absolute(xdg)) {
    return (std::filesystem::path(xdg) / "fusejit").string();
  }
  if (const char* home = std::getenv("HOME"); absolute(home)) {
    return (std::filesystem::path(home) / ".cache" / "fusejit").string();
  }
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      absolute(found->pw_dir) && std::string_view(found->pw_dir) != "/") {
    return (std::filesystem::path(found->pw_dir) / ".cache" / "fusejit").string();
  }
  return fmt::format("/tmp/fusejit-cache-{}", geteuid());
}

DeviceSpec measure_cpu_device() {
  DeviceSpec d = cpu_identity();
  MachineLoadMeter load;
  load.start();
  const CopyGbps copy = measure_copy_gbps(copy_bytes());
  d.bandwidth_gbps = copy.all_threads;
  d.thread_bandwidth_gbps = copy.one_thread;
  d.peak_f32_tflops = measure_fma_tflops();
  d.peak_tensor_tflops = d.peak_f32_tflops;  // no tensor cores: matmul runs on the FMA units
  d.launch_overhead_us = measure_launch_us();
  auto set = [&](CostClass c, double tflops) { d.class_tflops[static_cast<int>(c)] = tflops; };
  set(CostClass::kSimple, measure_class_tflops(weight(Op::kMul) + weight(Op::kAdd),
                                               [](float x, uint64_t) { return x * 0.999f + 0.001f; }));
  set(CostClass::kDivSqrt, measure_class_tflops(weight(Op::kRsqrt), [](float x, uint64_t) {
        return 1.0f / std::sqrt(x);
      }));
  set(CostClass::kExpLog, measure_class_tflops(weight(Op::kExp), [](float x, uint64_t) { return std::exp(x); }));
  set(CostClass::kErf, measure_class_tflops(weight(Op::kErf), [](float x, uint64_t) { return std::erf(x); }));
  // Library math has no cheaper GeLU for 16-bit results; the CPU backend's
  // calibration (runtime/cpu_calibration.h) measures its own.
  set(CostClass::kGelu16Bit, d.class_tflops[static_cast<int>(CostClass::kErf)]);
  set(CostClass::kPow, measure_class_tflops(weight(Op::kPow), [](float x, uint64_t) { return std::pow(x, 1.7f); }));
  set(CostClass::kPhilox, measure_class_tflops(weight(Op::kDropout), [](float x, uint64_t i) {
        return dropout_keeps(42, i, 0.1) ? x * dropout_scale(0.1) : 0.0f;
      }));
  set(CostClass::kMatmul, d.peak_f32_tflops);
  // The FMA units' rate here too: the CPU backend's calibration measures
  // the generated GEMM's two rates (runtime/cpu_calibration.h), the bf16
  // one about twice the other where the CPU has AVX512-BF16.
  set(CostClass::kMatmulBf16, d.peak_f32_tflops);
  load.stop();
  d.others_busy_share = load.others_share();
  return d;
}

std::string cpu_device_cache_path() {
  return (std::filesystem::path(cache_directory()) / "cpu-device.json").string();
}

namespace {

DeviceSpec cpu_device_one_at_a_time() {
  const std::string model = host_cpu_model();
  const std::filesystem::path path = cpu_device_cache_path();
  std::error_code ec;
  std::string why = "once per CPU model";
  std::optional<DeviceSpec> busy;  // cached figures measured on a busy machine
  if (std::filesystem::exists(path, ec) && !is_small_regular_file(path, kDeviceCacheFileMaxBytes)) {
    why = "its cache file is not a regular file of a cache file's size";
  } else if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    why = "its cache file is not JSON";
    if (!j.is_discarded()) {
      why =
          "its cache file was measured for another CPU, thread count, fusejit version, copy method, FMA width or "
          "op weights, lacks a figure this version measures, or is damaged";
      try {
        if (auto d = from_json(j, model)) {
          static std::atomic<bool> measured_here{false};
          if (!measure_busy_figures_again(d->others_busy_share, d->busy_remeasures, measured_here)) return *d;
          why = busy_figures_reason(d->others_busy_share);
          busy = d;
        }
      } catch (const nlohmann::json::exception&) {
        // A file of another shape: measure again and replace it.
      }
    }
  }
  // A second of silence would look like a hang, and a replaced file should
  // not go unmentioned.
  note(fmt::format("measuring this CPU's memory bandwidth and FP32 peak for the cost model ({}; the figures go to {})",
                   why, path.string()));
  DeviceSpec d = measure_cpu_device();
  if (d.others_busy_share > kBusyShare) {
    warn(busy_measurement_warning("this CPU's memory bandwidth and FP32 peak", d.others_busy_share));
  }
  if (busy) d = better_measured_figures(*busy, d);
  if (d.bandwidth_gbps <= 0) {
    // Not even 32 MiB to copy: predictions here are meaningless, and a
    // later process with memory to spare measures again.
    warn(
        "out of memory for the copy that measures this CPU's bandwidth; memory-bound predictions are meaningless "
        "in this process");
    return d;
  }
  // Temp file then rename, so a concurrent reader never sees half a file.
  std::filesystem::create_directories(path.parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path.string(), ::getpid());
  {
    // Created afresh, never through a link another user planted under
    // that predictable name (O_EXCL refuses an existing name, links
    // included); a leftover of a killed process of this pid is removed
    // first, and a link there is what remove() removes.
    std::filesystem::remove(tmp, ec);
    const std::string text = to_json(d, model).dump(2) + "\n";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : 0;
    for (size_t done = 0; fd >= 0 && err == 0 && done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0) err = n < 0 ? errno : EIO;
      done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) {
      std::filesystem::remove(tmp, ec);
      // Caching is an optimisation; an unwritable directory only costs time.
      warn(fmt::format("cannot write {} ({}); the next process measures this CPU again", path.string(),
                       std::strerror(err)));
      return d;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return d;
}

}  // namespace

DeviceSpec cpu_device() {
  // One measurement at a time in a process: threads measuring together
  // would time each other's copies, and share the temporary file's name.
  // The later ones read what the first one cached.
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  return cpu_device_one_at_a_time();
}

}  // namespace fusejit
