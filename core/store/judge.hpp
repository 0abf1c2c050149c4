// Visibility (R2, R3, R4, R7): what the rules make of one name in a
// directory. The judge only reads (and may hash, as deep as asked): it never
// quarantines, moves or invalidates anything. Acting on its verdicts is
// consequences.hpp's job; lookup, list, open and every transaction ask it.
// Its one write: a hard link's record brought up to date from its inode's
// (links.hpp), which is no verdict but what a seal through another name of
// the same file would have written.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/profile.hpp"
#include "core/store/dir_context.hpp"
#include "core/store/links.hpp"
#include "core/store/policy.hpp"
#include "core/store/store.hpp"
#include "core/verify/entry.hpp"
#include "core/verify/verifier.hpp"

namespace sealfs {

enum class Verdict {
  absent,         // no such name
  visible,        // lookup shows it, as `kind`
  hidden,         // foreign (unsealed, or unsigned with -o key_file), unlisted, reserved, abandoned…
  invalid_self,   // an entry that fails verification: quarantine it (and companions)
  invalid_entry,  // the enclosing entry fails verification: quarantine that
};

// The reasons a name without a verdict of its own is hidden, said the same
// way by a lookup's judgement and by fsck, which asks the judge (fsck.cpp).
inline constexpr std::string_view kUnlistedReason = "not listed in the entry's manifest";
inline constexpr std::string_view kForeignReason = "foreign: no manifest covers it";
// A valid entry whose hard link's record a read-only judge left stale.
inline constexpr std::string_view kStaleLinkRecordReason =
    "valid; a hard link's record is out of date (a lookup or fsck --repair brings it up to date)";

struct Judgement {
  Verdict verdict = Verdict::absent;
  ObjectKind kind = ObjectKind::container;
  struct stat st {};
  std::string reason;                      // for hidden/invalid; a visible entry's note, if any
  HideReason cause = HideReason::foreign;  // the same, as a counter's label
  std::vector<std::string> companions;     // a file entry's sidecar, moved with it
  bool transient = false;                  // invalid only because it changed while judged: judge again
  // Visible on an entry verdict that hashed nothing (stat level): at
  // cached_only the same name would be EAGAIN.
  bool unhashed = false;
  // Hidden because its manifest is not signed by a listed key (-o key_file):
  // foreign, never opened, never quarantined except to free its name (R5).
  bool unauthenticated = false;
  // A file judged by a manifest (file_in_entry, sealed_file, or a file whose
  // entry is invalid): where that manifest is (its fd borrowed from the
  // context or directory judged in), the file's key in it, and the stamp its
  // verdict saw for the file (none when it saw none). Store::open_file checks
  // the opened file against these instead of judging twice.
  std::optional<EntryLocation> where;
  std::string key;
  std::optional<Stamp> seen;

  bool sealed_file() const { return verdict == Verdict::visible && is_sealed(kind); }
};

class Judge {
 public:
  // All of them must outlive the judge (they live in Store::Impl).
  // write_links false: a judge that writes nothing (fsck without --repair).
  // It leaves a hard link's stale record as it finds it; an entry that
  // verifies with the record brought up to date is valid, and its verdict's
  // reason says the record is stale (kStaleLinkRecordReason).
  Judge(const Profile& profile, EntryVerifier& entries, const Policy& policy, const LinkRecords& links,
        Metrics& metrics, bool write_links = true)
      : profile_(profile),
        entries_(entries),
        policy_(policy),
        links_(links),
        metrics_(metrics),
        write_links_(write_links) {}

  // The verdict on ctx's directory dir_fd / name, verifying as deep as depth
  // allows (EAGAIN when cached_only finds no fresh verdict). Errors that are
  // no verdict (EMFILE, EIO…) come back as errors (R2). entry_verdict: the
  // enclosing entry's verdict at this depth when the caller already has it
  // (a listing checks the entry once, not once per name).
  Result<Judgement> judge(const DirContext& ctx, int dir_fd, std::string_view name, VerifyDepth depth,
                          const EntryVerdict* entry_verdict = nullptr) const;
  // judge(), again while the answer is "invalid" only because the object
  // changed while it was judged (a concurrent publish), for up to a second.
  Result<Judgement> judge_settled(const DirContext& ctx, int dir_fd, std::string_view name,
                                  VerifyDepth depth) const;
  // Each child of ctx's directory dir_fd, in readdir order, with its verdict
  // at stat level; reserved names (manifests, sidecars, .sealfs) are never
  // judged and come with judged null. visit returns false to stop. This is
  // the one "what does this directory show" loop: listings, rmdir's
  // emptiness test and rename's. Errors are those of reading the directory.
  using ChildVisit = std::function<bool(const DirChild& child, const Result<Judgement>* judged)>;
  Status each_child(const DirContext& ctx, int dir_fd, const EntryVerdict* entry_verdict,
                    const ChildVisit& visit) const;
  // j, a visible sealed file's verdict, checked again against the file a
  // caller opened (st): rehash hashes it again; otherwise its manifest is
  // verified afresh when st's stamp is not the one j saw. Damage turns j
  // invalid (or hidden, for an entry found foreign) as judge() would have;
  // a check that could not decide is an error (R2).
  Result<Judgement> recheck(Judgement j, const struct stat& st, bool rehash) const;
  // EntryVerifier::check, and when the verdict fails on content, the records
  // of listed hard-linked files brought up to date from their inodes' first
  // (links.hpp) and the entry checked again. At stat level nothing is hashed
  // or written: a verdict that would hold with the inodes' records is valid
  // there, *provisional set (a listing must not keep it). Errors are no
  // verdict (R2).
  Result<std::shared_ptr<const EntryVerdict>> check_entry(const EntryLocation& where, VerifyDepth depth,
                                                          const ForceHash& force = {},
                                                          const Stamp* manifest_now = nullptr,
                                                          bool* provisional = nullptr) const;

 private:
  Result<Judgement> judge_dir(const DirContext& ctx, int dir_fd, std::string_view name, Judgement j,
                              VerifyDepth depth) const;
  Result<Judgement> judge_in_entry(const DirContext& ctx, int dir_fd, std::string_view name, Judgement j,
                                   VerifyDepth depth, const EntryVerdict* known) const;
  Result<Judgement> judge_file_entry(const DirContext& ctx, int dir_fd, std::string_view name, Judgement j,
                                     VerifyDepth depth) const;

  const Profile& profile_;
  EntryVerifier& entries_;
  const Policy& policy_;
  const LinkRecords& links_;
  Metrics& metrics_;  // judgements: each call of judge()
  bool write_links_;
};

}  // namespace sealfs
