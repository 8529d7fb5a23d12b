#include "runtime/dram_counters.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/shared_library.h"

#if FUSEJIT_HAVE_CUPTI
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#endif

namespace fusejit {

#if FUSEJIT_HAVE_CUPTI
namespace {

// The counters, summed: every byte HBM read or wrote for the profiled kernels.
// measure() relies on the order: reads, then writes.
constexpr const char* kMetrics[] = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
constexpr size_t kMetricCount = sizeof(kMetrics) / sizeof(kMetrics[0]);
// Kernel launches one measure() may profile: a cuBLAS call launches a few.
constexpr size_t kMaxRanges = 64;

// X(symbol): the part of CUPTI we call; the types come from its headers.
#define FUSEJIT_CUPTI_FUNCTIONS(X)               \
  X(cuptiGetResultString)                        \
  X(cuptiProfilerInitialize)                     \
  X(cuptiDeviceGetChipName)                      \
  X(cuptiProfilerGetCounterAvailability)         \
  X(cuptiProfilerHostInitialize)                 \
  X(cuptiProfilerHostDeinitialize)               \
  X(cuptiProfilerHostConfigAddMetrics)           \
  X(cuptiProfilerHostGetConfigImageSize)         \
  X(cuptiProfilerHostGetConfigImage)             \
  X(cuptiProfilerHostGetNumOfPasses)             \
  X(cuptiProfilerHostEvaluateToGpuValues)        \
  X(cuptiRangeProfilerEnable)                    \
  X(cuptiRangeProfilerDisable)                   \
  X(cuptiRangeProfilerGetCounterDataSize)        \
  X(cuptiRangeProfilerCounterDataImageInitialize) \
  X(cuptiRangeProfilerSetConfig)                 \
  X(cuptiRangeProfilerStart)                     \
  X(cuptiRangeProfilerStop)                      \
  X(cuptiRangeProfilerDecodeData)                \
  X(cuptiRangeProfilerGetCounterDataInfo)

struct CuptiApi {
#define FUSEJIT_DECLARE_MEMBER(symbol) decltype(&::symbol) symbol = nullptr;
  FUSEJIT_CUPTI_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
#undef FUSEJIT_DECLARE_MEMBER
};

absl::StatusOr<CuptiApi> load_cupti() {
  absl::StatusOr<SharedLibrary> library =
      SharedLibrary::open(cuda_library_candidates({FUSEJIT_CUPTI_SONAME}, {FUSEJIT_CUPTI_PATH}));
  if (!library.ok()) {
    return absl::UnavailableError(fmt::format("CUPTI not found: {}", status_text(library.status())));
  }
  CuptiApi api;
  std::vector<std::string> missing;
#define FUSEJIT_BIND(symbol) \
  if (!library->bind(api.symbol, #symbol)) missing.push_back(#symbol);
  FUSEJIT_CUPTI_FUNCTIONS(FUSEJIT_BIND)
#undef FUSEJIT_BIND
  if (!missing.empty()) {
    return absl::UnavailableError(fmt::format("CUPTI at {} lacks the range profiler ({}); it needs CUDA 12.6 or newer",
                                              library->path(), absl::StrJoin(missing, ", ")));
  }
  // The profiler's host and target halves, which CUPTI opens by bare name.
  library->load_companion("libnvperf_host.so");
  library->load_companion("libnvperf_target.so");
  return api;
}

const absl::StatusOr<CuptiApi>& cupti() {
  static const absl::StatusOr<CuptiApi> api = load_cupti();
  return api;
}

// "cuptiRangeProfilerStart failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", with
// how to allow counter access where that is the reason.
absl::Status cupti_error(const char* call, CUptiResult result) {
  const char* text = nullptr;
  if (cupti()->cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  std::string message = fmt::format("{} failed: {} ({})", call, text, static_cast<int>(result));
  if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    message += "; reading GPU counters needs root or the nvidia module option NVreg_RestrictProfilingToAdminUsers=0";
  }
  return absl::FailedPreconditionError(message);
}

// A CUPTI parameter struct: zeroed, its version's size first. (Braces with
// the size alone do the same, but -Wextra then warns for every other field.)
template <class Params>
Params cupti_params(size_t struct_size) {
  Params params{};
  params.structSize = struct_size;
  return params;
}
#define FUSEJIT_CUPTI_PARAMS(Type) cupti_params<Type>(Type##_STRUCT_SIZE)

#define FUSEJIT_CUPTI_CALL(fn, params)                                                         \
  do {                                                                                         \
    if (const CUptiResult r = cupti()->fn(&(params)); r != CUPTI_SUCCESS) return cupti_error(#fn, r); \
  } while (0)

absl::Status initialize_profiler_once() {
  static const absl::Status status = []() -> absl::Status {
    auto p = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    FUSEJIT_CUPTI_CALL(cuptiProfilerInitialize, p);
    return absl::OkStatus();
  }();
  return status;
}

}  // namespace

struct DramByteCounter::State {
  CUcontext context = nullptr;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  std::vector<uint8_t> config_image;
  std::vector<uint8_t> counter_data;
  // Given to cuptiProfilerHostInitialize, and kept while the host object
  // lives: CUPTI does not say it copies it (NVIDIA's samples keep theirs).
  std::vector<uint8_t> counter_availability;

  ~State() {
    if (profiler != nullptr) {
      auto p = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
      p.pRangeProfilerObject = profiler;
      (void)cupti()->cuptiRangeProfilerDisable(&p);
    }
    if (host != nullptr) {
      auto p = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      p.pHostObject = host;
      (void)cupti()->cuptiProfilerHostDeinitialize(&p);
    }
  }

  absl::Status open(int ordinal) {
    auto chip = FUSEJIT_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<size_t>(ordinal);
    FUSEJIT_CUPTI_CALL(cuptiDeviceGetChipName, chip);

    // Which counters this GPU and driver let us read: the size first, then the image.
    auto availability = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
    availability.ctx = context;
    FUSEJIT_CUPTI_CALL(cuptiProfilerGetCounterAvailability, availability);
    counter_availability.resize(availability.counterAvailabilityImageSize);
    availability.pCounterAvailabilityImage = counter_availability.data();
    FUSEJIT_CUPTI_CALL(cuptiProfilerGetCounterAvailability, availability);

    auto init = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    init.pChipName = chip.pChipName;
    init.pCounterAvailabilityImage = counter_availability.data();
    FUSEJIT_CUPTI_CALL(cuptiProfilerHostInitialize, init);
    host = init.pHostObject;

    std::vector<const char*> metrics(std::begin(kMetrics), std::end(kMetrics));
    auto add = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host;
    add.ppMetricNames = metrics.data();
    add.numMetrics = metrics.size();
    FUSEJIT_CUPTI_CALL(cuptiProfilerHostConfigAddMetrics, add);
    auto size = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host;
    FUSEJIT_CUPTI_CALL(cuptiProfilerHostGetConfigImageSize, size);
    config_image.resize(size.configImageSize);
    auto image = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = host;
    image.configImageSize = config_image.size();
    image.pConfigImage = config_image.data();
    FUSEJIT_CUPTI_CALL(cuptiProfilerHostGetConfigImage, image);
    // More than one pass would replay each kernel, and memory restored
    // between passes would leave L2 dirty for the later ones.
    auto passes = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    passes.configImageSize = config_image.size();
    passes.pConfigImage = config_image.data();
    FUSEJIT_CUPTI_CALL(cuptiProfilerHostGetNumOfPasses, passes);
    if (passes.numOfPasses != 1) {
      return absl::FailedPreconditionError(fmt::format(
          "the DRAM byte counters need {} profiling passes on this GPU; fusejit reads them only in one",
          passes.numOfPasses));
    }

    auto enable = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
    enable.ctx = context;
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerEnable, enable);
    profiler = enable.pRangeProfilerObject;

    auto data_size = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    data_size.pRangeProfilerObject = profiler;
    data_size.pMetricNames = metrics.data();
    data_size.numMetrics = metrics.size();
    data_size.maxNumOfRanges = kMaxRanges;
    data_size.maxNumRangeTreeNodes = static_cast<uint32_t>(kMaxRanges);
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize, data_size);
    counter_data.resize(data_size.counterDataSize);
    return absl::OkStatus();
  }

  absl::StatusOr<double> measure(const std::function<absl::Status()>& launch,
                                 const std::function<absl::Status()>& drain) {
    // Reset, so that the image's ranges are this call's.
    auto init = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    init.pRangeProfilerObject = profiler;
    init.counterDataSize = counter_data.size();
    init.pCounterData = counter_data.data();
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize, init);

    // Auto ranges (one per kernel launch) with kernel replay: CUPTI replays
    // each kernel for as many passes as the counters need, restoring the
    // memory it writes, all inside the launch.
    auto config = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    config.pRangeProfilerObject = profiler;
    config.configSize = config_image.size();
    config.pConfig = config_image.data();
    config.counterDataImageSize = counter_data.size();
    config.pCounterDataImage = counter_data.data();
    config.range = CUPTI_AutoRange;
    config.replayMode = CUPTI_KernelReplay;
    config.maxRangesPerPass = kMaxRanges;
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerSetConfig, config);

    auto start = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
    start.pRangeProfilerObject = profiler;
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerStart, start);
    absl::Status launched = launch();
    if (launched.ok()) launched = drain();
    auto stop = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
    stop.pRangeProfilerObject = profiler;
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerStop, stop);
    if (!launched.ok()) return launched;
    if (!stop.isAllPassSubmitted) {
      return absl::InternalError("the CUPTI range profiler did not finish its passes within the kernel launches");
    }
    auto decode = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
    decode.pRangeProfilerObject = profiler;
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerDecodeData, decode);
    if (decode.numOfRangeDropped > 0) {
      return absl::ResourceExhaustedError(fmt::format(
          "the CUPTI range profiler dropped {} of the kernels launched (at most {} are profiled at once)",
          decode.numOfRangeDropped, kMaxRanges));
    }

    auto info = FUSEJIT_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    FUSEJIT_CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo, info);
    if (info.numTotalRanges < 2) {
      return absl::InternalError(fmt::format("the CUPTI range profiler saw {} kernel launches, expected the measured "
                                             "kernel's and the L2 drain's",
                                             info.numTotalRanges));
    }
    std::vector<const char*> metrics(std::begin(kMetrics), std::end(kMetrics));
    double bytes = 0;
    const size_t drain_range = info.numTotalRanges - 1;  // auto ranges are in launch order
    for (size_t range = 0; range < info.numTotalRanges; ++range) {
      double values[kMetricCount] = {};
      auto eval = FUSEJIT_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
      eval.pHostObject = host;
      eval.pCounterDataImage = counter_data.data();
      eval.counterDataImageSize = counter_data.size();
      eval.rangeIndex = range;
      eval.ppMetricNames = metrics.data();
      eval.numMetrics = metrics.size();
      eval.pMetricValues = values;
      FUSEJIT_CUPTI_CALL(cuptiProfilerHostEvaluateToGpuValues, eval);
      // Of the drain, only the write-backs of the measured kernels' lines
      // (kMetrics[1]); its own reads are not theirs.
      bytes += range == drain_range ? values[1] : values[0] + values[1];
    }
    return bytes;
  }
};

#undef FUSEJIT_CUPTI_CALL

absl::Status cupti_status() { return cupti().status(); }

absl::StatusOr<std::unique_ptr<DramByteCounter>> DramByteCounter::create(cuda::Context context, int ordinal) {
  if (absl::Status s = cupti_status(); !s.ok()) return s;
  if (absl::Status s = initialize_profiler_once(); !s.ok()) return s;
  auto state = std::make_unique<State>();
  state->context = reinterpret_cast<CUcontext>(context);
  if (absl::Status s = state->open(ordinal); !s.ok()) return s;
  return std::unique_ptr<DramByteCounter>(new DramByteCounter(std::move(state)));
}

absl::StatusOr<double> DramByteCounter::measure(const std::function<absl::Status()>& launch,
                                                const std::function<absl::Status()>& drain) {
  return state_->measure(launch, drain);
}

#else  // !FUSEJIT_HAVE_CUPTI

struct DramByteCounter::State {};

absl::Status cupti_status() {
  return absl::UnavailableError("fusejit was built without the CUPTI headers (cupti_range_profiler.h, CUDA 12.6+)");
}

absl::StatusOr<std::unique_ptr<DramByteCounter>> DramByteCounter::create(cuda::Context, int) {
  return cupti_status();
}

absl::StatusOr<double> DramByteCounter::measure(const std::function<absl::Status()>&,
                                                const std::function<absl::Status()>&) {
  return cupti_status();
}

#endif  // FUSEJIT_HAVE_CUPTI

DramByteCounter::DramByteCounter(std::unique_ptr<State> state) : state_(std::move(state)) {}
DramByteCounter::~DramByteCounter() = default;

}  // namespace fusejit
