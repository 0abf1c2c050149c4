// What follows from a verdict (R2, R5): an invalid entry is quarantined, a
// hidden object in the way of a new name is moved out, and the kernel is
// told to forget what it cached about anything that went.
//
// The order of effects: the quarantine first, then on_invalidate (never under
// a store lock). Inside a transaction with crash steps the invalidations wait
// for its end (DeferredInvalidations).
#pragma once

#include <sys/stat.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/hide_reason.hpp"
#include "core/base/result.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/judge.hpp"
#include "core/store/place.hpp"
#include "core/store/quarantine.hpp"
#include "core/store/removals.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"

namespace sealfs {

class Consequences {
 public:
  // All of them must outlive this object (they live in Store::Impl);
  // on_invalidate may be empty.
  Consequences(int root_fd, const Judge& judge, const Locator& places, EntryVerifier& entries,
               Quarantine& quarantine, const std::function<void(const Invalidation&)>& on_invalidate)
      : root_fd_(root_fd),
        judge_(judge),
        places_(places),
        entries_(entries),
        quarantine_(quarantine),
        on_invalidate_(on_invalidate) {}

  // judge_settled() for an operation on an existing, visible object: ENOENT
  // when it is absent or hidden (after acting on an invalid one, as lookup does).
  Result<Judgement> judge_visible(const DirContext& ctx, int dir_fd, std::string_view name);
  // judge_settled() for an unlink or rmdir through M by `remover` (a pid, 0
  // when unknown), R5. First notes a removal in flight in ctx's entry, so
  // that the entry's quarantine waits for it and the remover keeps finding
  // its names (removals.hpp). A name hidden by damage (invalid_self, or
  // invalid_entry inside an entry; not transient) comes back as judged, for
  // the removal to deal with; an absent or otherwise hidden one is ENOENT.
  Result<Judgement> judge_removal(const DirContext& ctx, int dir_fd, std::string_view name, pid_t remover);
  // Whether j, a verdict on a name in ctx's directory, hides it only for
  // damage in an entry that `caller` is removing: then a lookup by the
  // caller finds it still (never cached), so that its removal goes on.
  bool shown_to_remover(const DirContext& ctx, const Judgement& j, pid_t caller) const;
  // `caller` (a pid) listed a directory of the entry rooted at `root`: the
  // first step of a removal (rmtree lists, then unlinks), noted as one
  // (removals.hpp). Nothing is noted for an unknown caller (0).
  void listed(const struct stat& root, pid_t caller) {
    if (caller != 0) removals_.note(root, caller);
  }
  // The directory `st` was removed through M: a removal noted in it is over.
  void removed(const struct stat& st) { removals_.forget(st); }
  // Lookup-time consequences of a judgement: quarantine an invalid entry
  // (unless the verdict is transient: nothing to blame it for, or a removal
  // through M is in flight in it: it stays hidden in place meanwhile).
  void act_on_invalid(const DirContext& ctx, int dir_fd, std::string_view name, const Judgement& j);
  // R5: when name holds a hidden object, quarantine it. Returns the judgement
  // of what the name holds afterwards (absent or visible); ENOENT when the
  // directory itself sits in an invalid entry.
  Result<Judgement> clear_hidden(const DirContext& ctx, int dir_fd, std::string_view name);

  // Quarantines dir_fd/name if it still is `st`, then tells on_invalidate.
  // True when it was moved (false: gone or replaced meanwhile, or the move
  // failed, which is logged).
  bool quarantine_object(int parent_fd, std::string_view name, const struct stat& st, std::string rel,
                         HideReason cause, std::string reason, std::vector<std::string> companions = {});
  void quarantine_entry_root(const EntryRoot& entry, HideReason cause, std::string reason);
  // invalidate() of an entry root, under its name in its parent.
  void invalidate_entry_root(const EntryRoot& entry);
  // Tells on_invalidate that parent_fd/name (st) is no longer what the
  // kernel may have cached.
  void invalidate(int parent_fd, std::string_view name, const struct stat& st);

  // While one lives on this thread, invalidate() holds these consequences'
  // events and its destructor (the end of the transaction) passes them on.
  // Used by the transactions with crash steps (publish, link, unlink, seal):
  // the daemon's invalidator sends an event at once, and the kernel's reverse
  // invalidation of a name takes its directory's lock, which the kernel holds
  // for the very request being handled. Were the daemon to die at a later
  // step of that request, the invalidator thread would stay blocked on the
  // lock, so the daemon could never finish exiting, the connection would
  // never abort, and the request (unkillable once sent) would hang for ever.
  class DeferredInvalidations {
   public:
    explicit DeferredInvalidations(Consequences& owner) : owner_(owner), outer_(current == nullptr) {
      if (outer_) current = this;
    }
    ~DeferredInvalidations();
    DeferredInvalidations(const DeferredInvalidations&) = delete;
    DeferredInvalidations& operator=(const DeferredInvalidations&) = delete;

   private:
    friend class Consequences;
    static inline thread_local DeferredInvalidations* current = nullptr;
    Consequences& owner_;
    bool outer_;  // nested transactions (truncate → seal) leave it to the outermost
    std::vector<Invalidation> held_;
  };

 private:
  int root_fd_;
  const Judge& judge_;
  const Locator& places_;
  EntryVerifier& entries_;
  Quarantine& quarantine_;
  const std::function<void(const Invalidation&)>& on_invalidate_;
  RemovalsInFlight removals_;
};

}  // namespace sealfs
