#include "ir/closest_name.h"

#include <algorithm>
#include <cctype>

namespace fusejit {
namespace {

// Case does not count: "EXP" is a misspelled "exp", not three edits away.
bool same_letter(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same_letter(a[i - 1], b[j - 1]) ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_name(std::string_view name, const std::vector<std::string>& candidates,
                                        size_t max_distance) {
  std::optional<std::string> best;
  size_t best_distance = max_distance + 1;
  for (const std::string& candidate : candidates) {
    // Too different in length to be within reach: skip the quadratic work
    // (and any input, however long, costs no more than the candidates).
    const size_t gap = name.size() > candidate.size() ? name.size() - candidate.size() : candidate.size() - name.size();
    if (gap >= best_distance) continue;
    const size_t d = edit_distance(name, candidate);
    // A name every letter of which must change ("" for "x", "y" for "x")
    // is not a misspelling of it.
    if (d >= std::max(name.size(), candidate.size())) continue;
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace fusejit
