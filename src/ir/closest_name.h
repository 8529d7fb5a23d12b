// "Did you mean ...?" for names a user misspelled: ops in the text format,
// commands and options on the command line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit {

// Levenshtein distance: insertions, deletions and substitutions of letters
// other than in case ("EXP" and "exp" are 0 apart).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, if it is within `max_distance` edits
// (the first such one on a tie) and not wholly different (every letter
// changed: none for "" or for "y" among "x"); none for names longer than
// any candidate could be misspelled into.
std::optional<std::string> closest_name(std::string_view name, const std::vector<std::string>& candidates,
                                        size_t max_distance = 2);

}  // namespace fusejit
