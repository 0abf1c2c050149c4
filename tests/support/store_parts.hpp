// For the unit tests of the store's parts (judge, consequences, locator,
// records: core/store/impl.hpp), asked directly rather than through Store's
// faces. Entries are made through the fixture's Store as a user's would be;
// parts() is a second StoreState over the same backing directory, wired to
// the same writers and invalidations, so that a test sees what one part does
// and nothing else.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/unique_fd.hpp"
#include "core/layout/paths.hpp"
#include "core/store/impl.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

class StorePartsTest : public StoreTest {
 public:
  // The parts over B(), made on first use.
  StoreState& parts() {
    if (!parts_) {
      UniqueFd root(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      auto st = stat_fd(root.get());
      auto path = fd_path(root.get());
      // A reference must come back: the test fails by exception (gtest reports it).
      if (!root || !st || !path) throw std::runtime_error("cannot open the parts over " + B());
      parts_ =
          std::make_unique<StoreState>(std::move(root), std::move(*path), *st, profile(), wired_options());
    }
    return *parts_;
  }

  // The directory rel (held O_PATH) with its context, as a request has them.
  struct At {
    UniqueFd dir;
    DirContext ctx;
  };
  At at(std::string_view rel) {
    At a{dir(rel), {}};
    auto ctx = parts().places.context_of(a.dir.get());
    EXPECT_TRUE(ctx.ok()) << rel << ": " << (ctx ? "" : ctx.error().message);
    if (ctx) a.ctx = std::move(*ctx);
    return a;
  }

  // The judge's verdict on rel.
  Result<Judgement> judge(std::string_view rel, VerifyDepth depth = VerifyDepth::fresh) {
    auto [parent, name] = split_parent(rel);
    At a = at(parent);
    return parts().judge.judge(a.ctx, a.dir.get(), name, depth);
  }

  // Overwrites a file in B in place, same size, other bytes: damage that
  // only a hash finds.
  void damage(std::string_view rel, const std::string& same_size_content) {
    write_file(B(rel), same_size_content);
  }

 private:
  std::unique_ptr<StoreState> parts_;
};

}  // namespace sealfs::test
