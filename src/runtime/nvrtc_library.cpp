#include "runtime/nvrtc_library.h"

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/shared_library.h"

#if FUSEJIT_HAVE_CUDA
#include <nvrtc.h>

#include "runtime/abi_check.h"
#endif

// NVRTC's program handle; nvrtc.h names it the same way.
struct _nvrtcProgram;

namespace fusejit {
namespace {

using Result = int;  // nvrtcResult; 0 is NVRTC_SUCCESS
using Program = _nvrtcProgram*;

// X(member, symbol, return type, parameters): the part of NVRTC we call.
#define FUSEJIT_NVRTC_FUNCTIONS(X)                                                                                \
  X(version, nvrtcVersion, Result, (int* major, int* minor))                                                      \
  X(get_error_string, nvrtcGetErrorString, const char*, (Result result))                                          \
  X(get_num_supported_archs, nvrtcGetNumSupportedArchs, Result, (int* count))                                     \
  X(get_supported_archs, nvrtcGetSupportedArchs, Result, (int* archs))                                            \
  X(create_program, nvrtcCreateProgram, Result,                                                                   \
    (Program * program, const char* source, const char* name, int num_headers, const char* const* headers,        \
     const char* const* include_names))                                                                           \
  X(destroy_program, nvrtcDestroyProgram, Result, (Program * program))                                            \
  X(compile_program, nvrtcCompileProgram, Result, (Program program, int num_options, const char* const* options)) \
  X(get_program_log_size, nvrtcGetProgramLogSize, Result, (Program program, size_t * size))                       \
  X(get_program_log, nvrtcGetProgramLog, Result, (Program program, char* log))                                    \
  X(get_ptx_size, nvrtcGetPTXSize, Result, (Program program, size_t * size))                                      \
  X(get_ptx, nvrtcGetPTX, Result, (Program program, char* ptx))                                                   \
  X(get_cubin_size, nvrtcGetCUBINSize, Result, (Program program, size_t * size))                                  \
  X(get_cubin, nvrtcGetCUBIN, Result, (Program program, char* cubin))

struct NvrtcApi {
#define FUSEJIT_DECLARE_MEMBER(member, symbol, result, params) result(*member) params = nullptr;
  FUSEJIT_NVRTC_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
#undef FUSEJIT_DECLARE_MEMBER
};

#if FUSEJIT_HAVE_CUDA
#define FUSEJIT_CHECK_FUNCTION(member, symbol, result, params)                                \
  static_assert(abi_check::kSameAbi<decltype(&::symbol), decltype(NvrtcApi::member)>, #symbol \
                " differs from "                                                              \
                "nvrtc.h");
FUSEJIT_NVRTC_FUNCTIONS(FUSEJIT_CHECK_FUNCTION)
#undef FUSEJIT_CHECK_FUNCTION
static_assert(std::is_same_v<Program, nvrtcProgram> && NVRTC_SUCCESS == 0);
#endif

absl::StatusOr<NvrtcApi> load_nvrtc() {
#ifdef FUSEJIT_NVRTC_SONAME
  absl::StatusOr<SharedLibrary> library =
      SharedLibrary::open(cuda_library_candidates({FUSEJIT_NVRTC_SONAME}, {FUSEJIT_NVRTC_PATH}));
  if (!library.ok()) {
    return absl::UnavailableError(fmt::format("NVRTC not found: {}", status_text(library.status())));
  }
  NvrtcApi api;
  std::vector<std::string> missing;
#define FUSEJIT_BIND(member, symbol, result, params) \
  if (!library->bind(api.member, #symbol)) missing.push_back(#symbol);
  FUSEJIT_NVRTC_FUNCTIONS(FUSEJIT_BIND)
#undef FUSEJIT_BIND
  if (!missing.empty()) {
    return absl::UnavailableError(fmt::format("NVRTC at {} lacks {}", library->path(), absl::StrJoin(missing, ", ")));
  }
  // NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR at its first compile.
  int major = 0, minor = 0;
  if (api.version(&major, &minor) == 0)
    library->load_companion(fmt::format("libnvrtc-builtins.so.{}.{}", major, minor));
  return api;
#else
  return absl::UnavailableError("fusejit was built without the CUDA toolkit (NVRTC)");
#endif
}

// Loaded once per process; C++ makes the first call's initialisation thread-safe.
const absl::StatusOr<NvrtcApi>& nvrtc() {
  static const absl::StatusOr<NvrtcApi> api = load_nvrtc();
  return api;
}

// Fails with the call's name and NVRTC's description.
absl::Status check(const NvrtcApi& api, Result result, std::string_view call) {
  if (result == 0) return absl::OkStatus();
  return absl::InternalError(fmt::format("{} failed: {}", call, api.get_error_string(result)));
}

// Destroys the program on every path out of run_nvrtc.
class ProgramHandle {
 public:
  explicit ProgramHandle(const NvrtcApi& api) : api_(api) {}
  ~ProgramHandle() {
    if (program_ != nullptr) api_.destroy_program(&program_);
  }
  ProgramHandle(const ProgramHandle&) = delete;
  ProgramHandle& operator=(const ProgramHandle&) = delete;
  Program* out() { return &program_; }
  Program get() const { return program_; }

 private:
  const NvrtcApi& api_;
  Program program_ = nullptr;
};

// Reads one of the program's outputs through its size and copy functions.
// The log and the PTX are C strings whose size counts the terminating NUL.
enum class Output { kText, kBinary };
absl::StatusOr<std::string> program_output(const NvrtcApi& api, Program program, Result (*size_fn)(Program, size_t*),
                                           Result (*copy_fn)(Program, char*), std::string_view what, Output kind) {
  size_t size = 0;
  if (absl::Status s = check(api, size_fn(program, &size), what); !s.ok()) return s;
  std::string out(size, '\0');
  if (size == 0) return out;
  if (absl::Status s = check(api, copy_fn(program, out.data()), what); !s.ok()) return s;
  if (const size_t nul = out.find('\0'); kind == Output::kText && nul != std::string::npos) out.resize(nul);
  return out;
}

}  // namespace

absl::Status nvrtc_library_status() { return nvrtc().status(); }

absl::StatusOr<std::pair<int, int>> nvrtc_library_version() {
  const absl::StatusOr<NvrtcApi>& api = nvrtc();
  if (!api.ok()) return api.status();
  int major = 0;
  int minor = 0;
  if (absl::Status s = check(*api, api->version(&major, &minor), "nvrtcVersion"); !s.ok()) return s;
  return std::pair{major, minor};
}

absl::StatusOr<std::vector<int>> nvrtc_library_archs() {
  const absl::StatusOr<NvrtcApi>& api = nvrtc();
  if (!api.ok()) return api.status();
  int count = 0;
  if (absl::Status s = check(*api, api->get_num_supported_archs(&count), "nvrtcGetNumSupportedArchs"); !s.ok()) {
    return s;
  }
  std::vector<int> archs(count);
  if (absl::Status s = check(*api, api->get_supported_archs(archs.data()), "nvrtcGetSupportedArchs"); !s.ok()) {
    return s;
  }
  return archs;
}

absl::StatusOr<NvrtcOutput> run_nvrtc(const std::string& source, const std::string& file_name,
                                      const std::vector<std::string>& options) {
  const absl::StatusOr<NvrtcApi>& api = nvrtc();
  if (!api.ok()) return api.status();
  ProgramHandle program(*api);
  absl::Status created =
      check(*api, api->create_program(program.out(), source.c_str(), file_name.c_str(), 0, nullptr, nullptr),
            "nvrtcCreateProgram");
  if (!created.ok()) return created;
  std::vector<const char*> argv;
  for (const std::string& option : options) argv.push_back(option.c_str());
  const Result compiled = api->compile_program(program.get(), static_cast<int>(argv.size()), argv.data());
  NvrtcOutput out;
  absl::StatusOr<std::string> log = program_output(*api, program.get(), api->get_program_log_size, api->get_program_log,
                                                   "nvrtcGetProgramLog", Output::kText);
  if (!log.ok()) return log.status();
  out.log = *std::move(log);
  if (compiled != 0) {
    out.error = api->get_error_string(compiled);
    return out;
  }
  absl::StatusOr<std::string> ptx =
      program_output(*api, program.get(), api->get_ptx_size, api->get_ptx, "nvrtcGetPTX", Output::kText);
  if (!ptx.ok()) return ptx.status();
  out.ptx = *std::move(ptx);
  // For a virtual architecture (compute_XX) NVRTC reports a CUBIN of size 0.
  absl::StatusOr<std::string> cubin =
      program_output(*api, program.get(), api->get_cubin_size, api->get_cubin, "nvrtcGetCUBIN", Output::kBinary);
  if (!cubin.ok()) return cubin.status();
  out.cubin = *std::move(cubin);
  return out;
}

}  // namespace fusejit
