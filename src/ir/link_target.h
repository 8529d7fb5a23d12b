// Where a write that renames a temporary file over its destination should
// land when the destination is a symbolic link.
#pragma once

#include <string>

namespace fusejit {

// The file that writing `path` replaces: path itself or, where path is a
// symbolic link, the file at the end of its chain (a relative link read
// against the folder of the link that holds it; 40 links at most, as the
// kernel allows). A writer that renames a temporary over its destination
// renames it over this file and writes the temporary beside it: the link
// the user made stays a link and its target gets the new content, as a
// plain write through the link would give, and the rename stays within one
// file system. A dangling link gives the path it points to, which the
// write then creates.
std::string link_target(const std::string& path);

// Whether `target` (what link_target returned) is a device, a FIFO or a
// socket, which a writer must leave alone: renaming a file over it would
// replace it (a link to /dev/null once had /dev/null replaced).
bool is_special_file(const std::string& target);

}  // namespace fusejit
