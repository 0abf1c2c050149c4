#include "core/store/dir_context.hpp"

#include <fcntl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"

namespace sealfs {
namespace {

std::optional<UniqueFd> dup_fd(int fd) {
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return std::nullopt;
  return UniqueFd(copy);
}

}  // namespace

DirContextCache::DirContextCache(std::chrono::nanoseconds ttl, std::size_t max_entries)
    : ttl_(ttl), max_entries_(max_entries == 0 ? 1 : max_entries) {}

std::uint64_t DirContextCache::generation() {
  std::lock_guard lock(mu_);
  return generation_;
}

std::optional<DirContext> DirContextCache::find(std::string_view rel, UniqueFd* dir_fd) {
  if (ttl_.count() <= 0) return std::nullopt;
  DirContext out;
  {
    std::lock_guard lock(mu_);
    auto it = by_rel_.find(std::string(rel));
    if (it == by_rel_.end()) return std::nullopt;
    const Stored& s = it->second;
    if (std::chrono::steady_clock::now() - s.at >= ttl_) {
      by_rel_.erase(it);
      return std::nullopt;
    }
    out.rel = s.ctx.rel;
    out.st = s.ctx.st;
    out.is_volatile = s.ctx.is_volatile;
    out.sub = s.ctx.sub;
    if (s.ctx.entry) {
      auto fd = dup_fd(s.ctx.entry->fd.get());
      if (!fd) return std::nullopt;
      out.entry = EntryRoot{std::move(*fd), s.ctx.entry->st, s.ctx.entry->rel};
    }
    if (dir_fd != nullptr) {
      auto fd = dup_fd(s.dir.get());
      if (!fd) return std::nullopt;
      *dir_fd = std::move(*fd);
    }
  }
  // An entry whose manifest was removed behind the mount is no entry: walk.
  if (out.entry) {
    struct stat m {};
    if (::fstatat(out.entry->fd.get(), std::string(kDirManifest).c_str(), &m, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(m.st_mode))
      return std::nullopt;
  }
  return out;
}

void DirContextCache::put(std::uint64_t generation, int dir_fd, const DirContext& ctx) {
  if (ttl_.count() <= 0) return;
  auto dir = dup_fd(dir_fd);
  if (!dir) return;
  Stored s{std::move(*dir), DirContext{ctx.rel, ctx.st, ctx.is_volatile, std::nullopt, ctx.sub},
           std::chrono::steady_clock::now()};
  if (ctx.entry) {
    auto e = dup_fd(ctx.entry->fd.get());
    if (!e) return;
    s.ctx.entry = EntryRoot{std::move(*e), ctx.entry->st, ctx.entry->rel};
  }
  std::lock_guard lock(mu_);
  if (generation != generation_) return;  // something moved during the walk
  if (by_rel_.size() >= max_entries_ && by_rel_.find(ctx.rel) == by_rel_.end()) {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(by_rel_, [&](const auto& kv) { return now - kv.second.at >= ttl_; });
    // Still full of live contexts: start again rather than track use; a mount
    // that touches more than max_entries directories within the TTL walks as
    // it would without a cache.
    if (by_rel_.size() >= max_entries_) by_rel_.clear();
  }
  by_rel_.insert_or_assign(ctx.rel, std::move(s));
}

void DirContextCache::moved() {
  std::lock_guard lock(mu_);
  ++generation_;
  by_rel_.clear();
}

}  // namespace sealfs
