#include "device_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace fusejit::emulator {
namespace {

constexpr size_t kGranule = 256;  // cuMemAlloc's alignment; bands fill the last granule
constexpr unsigned char kBandByte = 0xA5;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One mapping: [lead guard page][lead band][data][tail band][tail guard page].
// The data's granules end where the tail guard page begins, so the first
// access past the last granule faults.
struct Allocation {
  unsigned char* map;
  size_t map_bytes;
  unsigned char* data;
  size_t bytes;
  const void* context;  // the owner

  unsigned char* lead_guard() const { return map; }
  unsigned char* lead_band() const { return map + kPage; }
  unsigned char* tail_band() const { return data + bytes; }
  unsigned char* tail_guard() const { return data + round_up(bytes, kGranule); }
};

std::mutex g_mutex;
std::map<uintptr_t, Allocation> g_allocations;  // by the data's address
size_t g_allocated = 0;

// The allocation one of whose guard pages holds `address`, or null. Called
// from the signal handler: reads the map, which no one changes meanwhile
// (the faulting thread holds g_mutex).
const Allocation* guard_owner(uintptr_t address) {
  auto in_page = [address](const unsigned char* page) {
    return address >= reinterpret_cast<uintptr_t>(page) && address < reinterpret_cast<uintptr_t>(page) + kPage;
  };
  auto next = g_allocations.upper_bound(address);
  if (next != g_allocations.end() && in_page(next->second.lead_guard())) return &next->second;
  if (next != g_allocations.begin() && in_page(std::prev(next)->second.tail_guard())) return &std::prev(next)->second;
  return nullptr;
}

// What the SIGSEGV handler saw during run_watched(). The handler allocates
// nothing and takes no lock.
struct Fault {
  uintptr_t address;
  bool write;
  bool seen;
};
Fault g_fault;
constexpr int kMaxOpened = 64;
void* g_opened[kMaxOpened];  // guard pages opened so that the faulting access could finish
int g_opened_count = 0;
struct sigaction g_previous;

bool faulting_access_was_a_write(void* context) {
#if defined(__x86_64__)
  return (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;  // page-fault error code
#else
  (void)context;
  return false;
#endif
}

void on_segv(int, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (guard_owner(address) == nullptr || g_opened_count == kMaxOpened) {
    // Not a guard page (or too many at once): the previous handler's fault,
    // taken when the access repeats on return.
    sigaction(SIGSEGV, &g_previous, nullptr);
    return;
  }
  if (!g_fault.seen) g_fault = Fault{address, faulting_access_was_a_write(context), true};
  // Let the access finish (into the guard page, which is discarded) and the
  // kernel run to its end; run_watched() closes the page again.
  void* page = reinterpret_cast<void*>(address & ~(kPage - 1));
  mprotect(page, kPage, PROT_READ | PROT_WRITE);
  g_opened[g_opened_count++] = page;
}

std::string describe(const char* access, uintptr_t address, uintptr_t data, const Allocation& a) {
  const std::string where = address < data ? fmt::format("{} bytes before", data - address)
                                           : fmt::format("{} bytes past the end of", address - (data + a.bytes) + 1);
  return fmt::format("a {} {} the allocation of {} bytes at 0x{:x}", access, where, a.bytes, data);
}

// The first band byte a write changed, described (empty if none); every
// band is then restored.
std::string check_and_restore_bands() {
  std::string found;
  for (const auto& [data, a] : g_allocations) {
    const std::pair<unsigned char*, unsigned char*> bands[] = {{a.lead_band(), a.data},
                                                               {a.tail_band(), a.tail_guard()}};
    for (const auto& [begin, end] : bands) {
      for (unsigned char* p = begin; p < end && found.empty(); ++p) {
        if (*p != kBandByte) found = describe("write", reinterpret_cast<uintptr_t>(p), data, a);
      }
      std::memset(begin, kBandByte, static_cast<size_t>(end - begin));
    }
  }
  return found;
}

}  // namespace

std::mutex& driver_mutex() { return g_mutex; }

uintptr_t allocate(size_t bytes, const void* context) {
  const size_t granules = round_up(bytes, kGranule);
  const size_t map_bytes = kPage + round_up(granules, kPage) + kPage;
  void* map = mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return 0;
  Allocation a{static_cast<unsigned char*>(map), map_bytes, nullptr, bytes, context};
  a.data = a.map + map_bytes - kPage - granules;
  if (mprotect(a.lead_band(), map_bytes - 2 * kPage, PROT_READ | PROT_WRITE) != 0) {
    munmap(map, map_bytes);
    return 0;
  }
  std::memset(a.lead_band(), kBandByte, static_cast<size_t>(a.data - a.lead_band()));
  // NaN in every float type, as never-written device memory may hold: a
  // kernel that reads what nothing wrote gives NaN, not a stale result.
  std::memset(a.data, 0xFF, bytes);
  std::memset(a.tail_band(), kBandByte, static_cast<size_t>(a.tail_guard() - a.tail_band()));
  const auto data = reinterpret_cast<uintptr_t>(a.data);
  g_allocations[data] = a;
  g_allocated += bytes;
  return data;
}

bool release(uintptr_t data) {
  auto it = g_allocations.find(data);
  if (it == g_allocations.end()) return false;
  g_allocated -= it->second.bytes;
  munmap(it->second.map, it->second.map_bytes);
  g_allocations.erase(it);
  return true;
}

size_t allocated_bytes() { return g_allocated; }

const void* owner_of(uintptr_t ptr) {
  auto it = g_allocations.upper_bound(ptr);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  return ptr >= it->first && ptr < it->first + it->second.bytes ? it->second.context : nullptr;
}

void release_all_of(const void* context) {
  std::vector<uintptr_t> owned;
  for (const auto& [data, a] : g_allocations) {
    if (a.context == context) owned.push_back(data);
  }
  for (uintptr_t data : owned) release(data);
}

bool inside_one_allocation(uintptr_t ptr, size_t bytes) {
  auto it = g_allocations.upper_bound(ptr);
  if (it == g_allocations.begin()) return false;
  --it;
  return ptr >= it->first && ptr + bytes <= it->first + it->second.bytes;
}

std::string run_watched(const std::function<void()>& body) {
  g_fault = Fault{0, false, false};
  g_opened_count = 0;
  struct sigaction watch {};
  watch.sa_sigaction = &on_segv;
  watch.sa_flags = SA_SIGINFO;
  sigemptyset(&watch.sa_mask);
  sigaction(SIGSEGV, &watch, &g_previous);
  body();
  sigaction(SIGSEGV, &g_previous, nullptr);
  for (int i = 0; i < g_opened_count; ++i) mprotect(g_opened[i], kPage, PROT_NONE);
  std::string fault;
  if (g_fault.seen) {
    const Allocation* a = guard_owner(g_fault.address);
    fault = describe(g_fault.write ? "write" : "read", g_fault.address, reinterpret_cast<uintptr_t>(a->data), *a);
  }
  const std::string band = check_and_restore_bands();
  return fault.empty() ? band : fault;
}

}  // namespace fusejit::emulator
