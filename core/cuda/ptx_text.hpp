// PTX text: recognise it and check that it is whole. PTX is compiled by the
// driver, so structure here means the directives the driver needs
// (.version, .target) and a body that was not cut off (balanced braces, no
// unterminated comment or string, no NUL inside the text).
#pragma once

#include <string>
#include <string_view>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {

struct PtxInfo {
  unsigned sm = 0;     // from ".target sm_NN"
  std::string suffix;  // "a" or "f" when the target has one
};

// A ".version" directive at the start of a line within the first 64 KiB,
// before anything that is not text.
bool looks_like_ptx(Bytes bytes);

// text may end in NUL padding (as PTX inside a fatbin does). EBADMSG on defects.
Result<PtxInfo> check_ptx(std::string_view text);

}  // namespace sealfs::cuda::detail
