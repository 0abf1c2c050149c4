// Glob matching on '/'-separated relative paths: '*' and '?' stay within one
// component, '**' as a whole component matches zero or more components.
// "tmp/**" matches "tmp" itself and everything below it.
#pragma once

#include <string_view>

namespace sealfs {

bool glob_match(std::string_view pattern, std::string_view path);

}  // namespace sealfs
