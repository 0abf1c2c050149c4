// Shared by the store's unit tests: a backing directory in a TempDir, a Store
// over it with a test profile, and helpers that walk it the way the daemon
// does (directory fds from lookups, names one component at a time).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/layout/paths.hpp"
#include "core/store/store.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

// volatile: tmp/** and **/.staging/**; size-only: **/*.src; every file goes
// through "test-reject".
inline Profile test_profile() {
  Profile p;
  p.name = "unit";
  p.volatile_globs = {"tmp/**", "**/.staging/**"};
  p.size_only_globs = {"**/*.src"};
  p.validators = {{"**", "test-reject"}};
  return p;
}

// Members are public so that table-driven tests can drive a fixture from
// free functions (see publish_test.cpp).
class StoreFixture : public ::testing::Test {
 public:
  void SetUp() override {
    make_dirs(B("tmp"));
    options_.durability = Durability::none;
    options_.verdict_ttl = std::chrono::nanoseconds(0);  // every lookup re-checks stamps
    open_store();
  }

  std::string B(std::string_view rel = "") const { return rel.empty() ? tmp_.path() : tmp_ / rel; }

  // Options and profile for the next open_store(); callbacks are wired to this fixture.
  StoreOptions& options() { return options_; }
  Profile& profile() { return profile_; }
  // options() with its callbacks wired to this fixture's writers and
  // invalidations.
  StoreOptions wired_options() {
    StoreOptions o = options_;
    o.in_progress = [this](dev_t dev, ino_t ino) {
      std::lock_guard lock(mu_);
      return writers_.count({dev, ino}) != 0;
    };
    o.on_invalidate = [this](const Invalidation& inv) {
      std::lock_guard lock(mu_);
      invalidations_.push_back(inv);
    };
    return o;
  }
  void open_store() {
    store_.reset();
    auto s = Store::open_backing(B(), profile_, wired_options());
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(*s);
  }
  Store& store() { return *store_; }

  void add_writer(const struct stat& st) {
    std::lock_guard lock(mu_);
    writers_.insert({st.st_dev, st.st_ino});
  }
  void clear_writers() {
    std::lock_guard lock(mu_);
    writers_.clear();
  }
  std::size_t invalidation_count() {
    std::lock_guard lock(mu_);
    return invalidations_.size();
  }

  // O_PATH fd of a directory in B, opened directly (as the daemon holds them).
  UniqueFd dir(std::string_view rel) const {
    int fd = ::open(B(rel).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << "open " << B(rel);
    return UniqueFd(fd);
  }

  Result<Found> lookup(std::string_view rel) {
    auto [parent, name] = split_parent(rel);
    UniqueFd d = dir(parent);
    return store_->lookup(d.get(), name);
  }
  bool visible(std::string_view rel) { return lookup(rel).ok(); }
  int lookup_errno(std::string_view rel) { return lookup(rel).code(); }

  std::set<std::string> listed(std::string_view rel) {
    UniqueFd d = dir(rel);
    auto items = store_->list(d.get());
    EXPECT_TRUE(items.ok()) << (items.ok() ? "" : items.error().message);
    std::set<std::string> names;
    if (items)
      for (const auto& i : items->items) names.insert(i.name);
    return names;
  }

  // Content of a visible file read through Store::open_file, or nullopt.
  std::optional<std::string> read_visible(std::string_view rel) {
    auto f = lookup(rel);
    if (!f) return std::nullopt;
    auto fd = store_->open_file(f->fd.get(), O_RDONLY);
    if (!fd) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd->get(), buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  Status rename(std::string_view from, std::string_view to, unsigned flags = 0) {
    auto [sp, sn] = split_parent(from);
    auto [dp, dn] = split_parent(to);
    UniqueFd s = dir(sp);
    UniqueFd d = dir(dp);
    return store_->rename(s.get(), sn, d.get(), dn, flags);
  }

  // A staged directory under tmp/ with the given files (rel → content).
  void stage(std::string_view rel, const std::map<std::string, std::string>& files) {
    make_dirs(B(rel));
    for (const auto& [name, content] : files) {
      auto [parent, leaf] = split_parent(name);
      if (!parent.empty()) make_dirs(B(join_rel(rel, parent)));
      write_file(B(join_rel(rel, name)), content);
    }
  }

  // Every visible non-volatile object below rel, as the store shows it:
  // directories as "<dir>", files by content, symlinks as "-> target".
  // The slots in B/.sealfs/quarantine.
  std::size_t quarantine_slots() {
    auto d = dir(".sealfs/quarantine");
    auto names = read_dir(d.get());
    return names ? names->size() : 0;
  }

  std::map<std::string, std::string> snapshot(std::string_view rel = "") {
    std::map<std::string, std::string> out;
    snapshot_into(std::string(rel), out, 0);
    return out;
  }

  TempDir tmp_{"sealfs-store"};
  Profile profile_ = test_profile();
  StoreOptions options_;
  std::unique_ptr<Store> store_;
  std::mutex mu_;
  std::set<std::pair<dev_t, ino_t>> writers_;
  std::vector<Invalidation> invalidations_;

 private:
  void snapshot_into(const std::string& rel, std::map<std::string, std::string>& out, int depth) {
    if (depth > 32) return;
    UniqueFd d = dir(rel);
    auto items = store_->list(d.get());
    if (!items) return;
    for (const auto& item : items->items) {
      const std::string child = join_rel(rel, item.name);
      if (store_->profile().is_volatile(child)) continue;
      auto f = store_->lookup(d.get(), item.name);
      if (!f) continue;  // listed at stat level, hidden on verification
      if (S_ISDIR(f->st.st_mode)) {
        out[child] = "<dir>";
        snapshot_into(child, out, depth + 1);
      } else if (S_ISLNK(f->st.st_mode)) {
        auto target = read_link_at(d.get(), item.name);
        out[child] = "-> " + (target ? *target : std::string("?"));
      } else if (auto content = read_visible(child)) {
        out[child] = *content;
      }
    }
  }
};

// The store's own unit tests (tests/unit/store/store*_test.cpp): a
// StoreFixture that can publish an entry.
class StoreTest : public StoreFixture {
 public:
  // Publishes tmp/<name> with files into c/<name> (c made as a container).
  void publish_entry(const std::string& name, const std::map<std::string, std::string>& files) {
    if (!exists_nofollow(B("c"))) {
      UniqueFd root = dir("");
      ASSERT_TRUE(store().mkdir(root.get(), "c", 0755).ok());
    }
    stage("tmp/" + name, files);
    Status s = rename("tmp/" + name, "c/" + name);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
};

inline std::string slurp(const std::string& path) { return read_file(path).value_or("<unreadable>"); }

}  // namespace sealfs::test
