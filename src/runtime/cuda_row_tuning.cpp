#include "runtime/cuda_row_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "ir/messages.h"

namespace fusejit {

bool should_autotune(Autotune mode, int64_t elements, size_t candidates) {
  if (candidates < 2 || mode == Autotune::kOff) return false;
  if (mode == Autotune::kAlways) return true;
  if (const char* env = std::getenv("FUSEJIT_AUTOTUNE"); env != nullptr && *env != '\0') {
    const std::string_view v(env);
    if (v == "0") return false;
    if (v == "1") return true;
    static std::mutex mutex;
    static std::set<std::string, std::less<>> warned;  // once per value, not once per kernel
    std::lock_guard lock(mutex);
    if (warned.emplace(v).second) {
      warn(fmt::format("ignoring FUSEJIT_AUTOTUNE={}: want 0 (never time launch shapes) or 1 (always)", v));
    }
  }
  return elements >= kAutotuneMinElements;
}

size_t pick_launch_shape(const std::vector<std::optional<double>>& best_us) {
  if (best_us.empty() || !best_us[0]) {
    // No default time (it cannot happen: the default always launches); the fastest timed one.
    size_t best = 0;
    for (size_t i = 0; i < best_us.size(); ++i) {
      if (best_us[i] && (!best_us[best] || *best_us[i] < *best_us[best])) best = i;
    }
    return best;
  }
  size_t best = 0;
  for (size_t i = 1; i < best_us.size(); ++i) {
    if (best_us[i] && *best_us[i] < *best_us[best]) best = i;
  }
  const double needed = std::max(*best_us[0] * kAutotuneMargin, kAutotuneMarginUs);
  return best != 0 && *best_us[best] < *best_us[0] - needed ? best : 0;
}

std::string describe_tuning(const std::vector<std::string>& shapes, const std::vector<std::optional<double>>& best_us,
                            size_t picked) {
  size_t timed = 0;
  for (const auto& t : best_us) timed += t ? 1 : 0;
  std::string out;
  if (picked == 0) {
    out = fmt::format(
        "default kept: none of the other {} launch shapes timed on its first run was {:.0f}% and "
        "{:.0f} us faster",
        timed - 1, kAutotuneMargin * 100, kAutotuneMarginUs);
  } else {
    out = fmt::format("fastest of {} launch shapes timed on its first run", timed);
  }
  if (picked < best_us.size() && best_us[picked]) out += fmt::format(" ({:.1f} us", *best_us[picked]);
  if (picked != 0 && !best_us.empty() && best_us[0]) {
    out += fmt::format(", default {}: {:.1f} us", shapes.at(0), *best_us[0]);
  }
  if (picked < best_us.size() && best_us[picked]) out += ")";
  return out;
}

}  // namespace fusejit
