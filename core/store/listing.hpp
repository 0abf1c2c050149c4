// What each directory's previous listing showed, so that a listing can say
// whether it differs (Listing::epoch, Listing::settled), and repeat it
// without reading the directory when nothing it rests on changed. The
// daemon lets the kernel keep a copy of a listing (FOPEN_CACHE_DIR) and
// drops that copy when the listing changes: this is how it knows.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/digest.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

// What a listing of a directory inside an entry rests on, when that is all
// it rests on (no subdirectory, nothing in progress): the directory's own
// stamp (its names and the objects under them), where it is, and the
// enclosing entry's verdict (its manifest says which files are listed).
struct ListingBasis {
  Stamp dir;
  std::string rel;
  std::shared_ptr<const EntryVerdict> entry;
  bool entry_root = false;  // the directory is the entry's root (its manifest is the directory's own)
};

class ListingMemory {
 public:
  static constexpr std::chrono::seconds kSettle = Listing::kSettle;

  // max_dirs bounds the directories remembered (each costs a digest of its
  // items, and the items themselves where a basis is kept: a few hundred
  // bytes for an entry): a directory forgotten gets a new epoch at its next
  // listing.
  explicit ListingMemory(std::size_t max_dirs = 1u << 14) : max_dirs_(max_dirs == 0 ? 1 : max_dirs) {}

  // Records listing.items as what directory (dev, ino) shows now and sets
  // listing.epoch and listing.settled. A directory seen for the first time
  // is settled: there is no earlier listing that a copy could hold. basis:
  // what the items rest on, when repeat() may answer from them.
  void note(dev_t dev, ino_t ino, Listing& listing, std::optional<ListingBasis> basis = std::nullopt);
  // The previous listing of (dev, ino) into listing, when it rests on the
  // same basis and the directory's stamp is settled (R8's one second: a
  // name changed within the same timestamp tick leaves the stamp as it was).
  bool repeat(dev_t dev, ino_t ino, const ListingBasis& now, Listing& listing);
  // Where the previous listing of an entry's root (dev, ino) found it, if
  // it may be repeated: the basis of a repeat that needs no walk from the
  // root to find the entry (the directory is its own entry).
  std::optional<std::string> entry_root_at(dev_t dev, ino_t ino);

 private:
  // A basis as kept: the verdict is held weakly, so that the memory of a
  // listing never keeps a verdict (and its manifest) that the verifier let
  // go of; an expired one is no basis.
  struct KeptBasis {
    Stamp dir;
    std::string rel;
    std::weak_ptr<const EntryVerdict> entry;
    bool entry_root = false;
    bool holds(const ListingBasis& now) const;
  };
  struct Seen {
    Sha256 digest{};  // of the items: what tells a change
    std::uint64_t epoch = 0;
    std::chrono::steady_clock::time_point changed{};  // when the items last differed
    std::optional<KeptBasis> basis;
    std::vector<DirItem> items;  // kept with a basis only (repeat() answers with them)
  };
  void settle(const Seen& seen, Listing& listing) const;

  std::size_t max_dirs_;
  std::mutex mu_;
  std::uint64_t last_epoch_ = 0;  // guarded by mu_
  std::map<std::pair<dev_t, ino_t>, Seen> seen_;
};

}  // namespace sealfs
