// R4's seal journal without a mount: its text (records, superseding, done
// marks, torn and hostile lines), this daemon's own file (written per close,
// cut back when nothing is pending, compacted, removed at a clean end), and
// the replay by a later daemon (journal_replay.hpp): a journal whose daemon
// is gone is replayed and removed, a file changed or renamed since its close
// is left hidden, a locked journal of a live daemon is left alone, one of a
// daemon that stopped serving is waited for, one of another boot is dropped.
#include "core/writers/seal_journal.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "core/writers/journal_replay.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs {
namespace {

using test::read_file;
using test::write_file;

JournalRecord record_of(const std::string& rel, dev_t dev, ino_t ino, off_t size) {
  JournalRecord r;
  r.rel = rel;
  r.stamp.dev = dev;
  r.stamp.ino = ino;
  r.stamp.size = size;
  r.stamp.mtime = {1700000000, 5};
  r.stamp.ctime = {1700000001, 999999999};
  return r;
}

const JournalHeader kHeader{4242, "boot-a", "0:77"};

TEST(SealJournalText, RecordsRoundTripAndDoneOnesGo) {
  const std::string text = format_header(kHeader) + format_close(1, record_of("a/b c\n%d", 1, 10, 5)) +
                           format_close(2, record_of("x", 1, 11, 6)) + format_done(2);
  const JournalText parsed = parse_journal(text);
  ASSERT_TRUE(parsed.headed);
  EXPECT_EQ(parsed.header.pid, 4242);
  EXPECT_EQ(parsed.header.boot_id, "boot-a");
  EXPECT_EQ(parsed.header.device, "0:77");
  ASSERT_EQ(parsed.pending.size(), 1u);
  EXPECT_EQ(parsed.pending[0].rel, "a/b c\n%d") << "spaces, newlines and % are escaped";
  EXPECT_TRUE(parsed.pending[0].stamp == record_of("a/b c\n%d", 1, 10, 5).stamp);
  EXPECT_EQ(parsed.malformed, 0u);
  EXPECT_EQ(parsed.refused, 0u);
}

TEST(SealJournalText, ALaterCloseOfTheSameFileSupersedesAndAnOldDoneDoesNotUndoIt) {
  const std::string text = format_header(kHeader) + format_close(3, record_of("f", 1, 10, 5)) +
                           format_close(7, record_of("f", 1, 10, 9)) + format_done(3);
  const JournalText parsed = parse_journal(text);
  ASSERT_EQ(parsed.pending.size(), 1u);
  EXPECT_EQ(parsed.pending[0].stamp.size, 9);
  EXPECT_TRUE(parse_journal(text + format_done(7)).pending.empty());
}

TEST(SealJournalText, TornAndMalformedLinesAreCountedAndSkipped) {
  const std::string good = format_close(1, record_of("ok", 1, 10, 5));
  const std::string text = format_header(kHeader) + "C 2 1 11 zz 1 2 3 4 bad\n" + "garbage\n" + "D x\n" +
                           "C 3 1 12 1 1 2000000000 3 4 nsec-out-of-range\n" + "C 4 1 13 1 1 2 3 4 bad%zz\n" +
                           good + good.substr(0, good.size() / 2);  // torn: no newline
  const JournalText parsed = parse_journal(text);
  EXPECT_EQ(parsed.malformed, 6u);
  ASSERT_EQ(parsed.pending.size(), 1u);
  EXPECT_EQ(parsed.pending[0].rel, "ok");
}

TEST(SealJournalText, WithoutAValidHeaderNothingIsTrusted) {
  const std::string records = format_close(1, record_of("f", 1, 10, 5));
  for (const std::string& head : {std::string(), std::string("sealfs-journal 2 1 b d\n"),
                                  std::string("sealfs-journal 1 -5 b d\n"), std::string("\n")}) {
    const JournalText parsed = parse_journal(head + records);
    EXPECT_FALSE(parsed.headed) << head;
    EXPECT_TRUE(parsed.pending.empty()) << head;
  }
  EXPECT_TRUE(parse_journal("").pending.empty());
}

TEST(SealJournalText, RecordsNamingNoFileBelowBAreRefused) {
  std::string text = format_header(kHeader);
  std::uint64_t seq = 1;
  for (const char* rel : {"/etc/passwd", "../outside", "a/../../b", ".", "a//b", "a/", ".sealfs/quarantine/x",
                          ".sealfs/journal/j", "d/.sealfs-manifest.f", "a/./b"}) {
    text += format_close(seq, record_of(rel, 1, static_cast<ino_t>(seq), 1));
    ++seq;
  }
  const JournalText parsed = parse_journal(text);
  EXPECT_TRUE(parsed.pending.empty());
  EXPECT_EQ(parsed.refused, seq - 1);
  EXPECT_TRUE(journal_rel_acceptable("a/b/c.so"));
  EXPECT_TRUE(journal_rel_acceptable("tmp/x y"));
  EXPECT_FALSE(journal_rel_acceptable(std::string("a\0b", 3)));
  EXPECT_FALSE(journal_rel_acceptable(""));
}

class SealJournalFile : public test::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    UniqueFd root(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    auto dir = open_journal_dir(root.get());
    ASSERT_TRUE(dir.ok()) << dir.error().message;
    dir_ = std::move(*dir);
  }
  std::set<std::string> journal_names() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(B(".sealfs/journal")))
      names.insert(e.path().filename().string());
    return names;
  }
  std::string journal_text(const SealJournal& j) const {
    return read_file(B(".sealfs/journal/" + j.name())).value_or("<missing>");
  }
  // A file in B and the record of its close now.
  JournalRecord closed_now(const std::string& rel, const std::string& data) {
    write_file(B(rel), data);
    struct stat st {};
    EXPECT_EQ(::lstat(B(rel).c_str(), &st), 0);
    return JournalRecord{rel, Stamp::of(st)};
  }
  ReplayOptions replay_options(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    ReplayOptions o;
    o.boot_id = this_boot_id();
    o.wait = wait;
    o.owner_serving = [this](const JournalHeader&) { return owner_serving_; };
    o.log = [this](const std::string& line) { log_ += line + "\n"; };
    return o;
  }
  UniqueFd dir_;
  bool owner_serving_ = false;
  std::string log_;
};

TEST_F(SealJournalFile, OneWritePerCloseCutBackWhenNothingIsPendingRemovedAtAnEmptyEnd) {
  auto j = SealJournal::create(dir_.get(), kHeader);
  ASSERT_TRUE(j.ok()) << j.error().message;
  const off_t header = static_cast<off_t>(format_header(kHeader).size());
  EXPECT_EQ((*j)->size(), header);
  EXPECT_EQ(journal_names(), std::set<std::string>{(*j)->name()});
  ASSERT_TRUE((*j)->closed(record_of("a", 1, 10, 1)).ok());
  ASSERT_TRUE((*j)->closed(record_of("b", 1, 11, 1)).ok());
  EXPECT_EQ(parse_journal(journal_text(**j)).pending.size(), 2u);
  EXPECT_TRUE((*j)->pending(1, 10));
  (*j)->done(1, 10);
  EXPECT_FALSE((*j)->pending(1, 10));
  EXPECT_EQ(parse_journal(journal_text(**j)).pending.size(), 1u);
  (*j)->done(1, 11);
  EXPECT_TRUE(parse_journal(journal_text(**j)).pending.empty());
  const off_t small = (*j)->size();
  (*j)->done(1, 12);  // none pending: nothing written
  EXPECT_EQ((*j)->size(), small);
  int cut_back = 0;
  for (ino_t i = 100; i < 300; ++i) {
    ASSERT_TRUE((*j)->closed(record_of("f", 1, i, 1)).ok());
    (*j)->done(1, i);
    if ((*j)->size() == header) ++cut_back;
    ASSERT_LE((*j)->size(), SealJournal::kCutBackAt + 256);
  }
  EXPECT_GE(cut_back, 2) << "nothing pending past kCutBackAt: back to the header";
  j->reset();
  EXPECT_TRUE(journal_names().empty()) << "a clean end with nothing pending leaves no journal";
}

TEST_F(SealJournalFile, ItStaysSmallUnderAFileAlwaysPending) {
  auto j = SealJournal::create(dir_.get(), kHeader);
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE((*j)->closed(record_of("always/open", 1, 1, 1)).ok());  // never done
  for (ino_t i = 2; i < 5000; ++i) {
    ASSERT_TRUE((*j)->closed(record_of("dir/file" + std::to_string(i), 1, i, 1)).ok());
    (*j)->done(1, i);
  }
  EXPECT_LE((*j)->size(), SealJournal::kCompactAt + 256) << "compaction keeps it bounded";
  const JournalText parsed = parse_journal(journal_text(**j));
  ASSERT_EQ(parsed.pending.size(), 1u);
  EXPECT_EQ(parsed.pending[0].rel, "always/open");
  EXPECT_EQ(parsed.malformed, 0u);
  j->reset();
  EXPECT_EQ(journal_names().size(), 1u) << "a journal with a pending record stays for the next daemon";
}

TEST_F(SealJournalFile, ADeadDaemonsJournalIsReplayedAndRemoved) {
  const JournalRecord kept = closed_now("kept", "closed normally");
  const JournalRecord changed = closed_now("changed", "closed normally");
  const JournalRecord renamed = closed_now("renamed", "closed normally");
  {
    auto j = SealJournal::create(dir_.get(), JournalHeader{1, this_boot_id(), "0:1"});
    ASSERT_TRUE(j.ok());
    for (const auto& r : {kept, changed, renamed}) ASSERT_TRUE((*j)->closed(r).ok());
  }  // the daemon's end with seals pending: its journal stays, unlocked
  write_file(B("changed"), "closed normally, then changed");
  ASSERT_EQ(::rename(B("renamed").c_str(), B("moved").c_str()), 0);
  EXPECT_FALSE(visible("kept")) << "unsealed: foreign before the replay";
  const ReplayReport r = replay_journals(store(), dir_.get(), replay_options());
  EXPECT_EQ(r.journals, 1u);
  EXPECT_EQ(r.sealed, 1u);
  EXPECT_EQ(r.changed, 1u);
  EXPECT_EQ(r.missing, 1u);
  EXPECT_TRUE(visible("kept"));
  EXPECT_EQ(read_visible("kept"), "closed normally");
  EXPECT_FALSE(visible("changed"));
  EXPECT_FALSE(visible("moved"));
  EXPECT_TRUE(journal_names().empty());
  EXPECT_NE(log_.find("changed since its close"), std::string::npos) << log_;
}

TEST_F(SealJournalFile, AHostileJournalIsIgnoredWithALineNeverACrash) {
  const JournalRecord kept = closed_now("kept", "data");
  write_file(B("secret"), "not journalled");
  std::string text = format_header(JournalHeader{1, this_boot_id(), "0:1"}) + format_close(1, kept) +
                     "C 2 0 0 0 0 0 0 0 ..%2Fetc%2Fpasswd\n" + "C 3 0 0 0 0 0 0 0 .sealfs%2Fquarantine\n" +
                     std::string(3000, 'x') + "\n" + std::string("\0\0\0", 3) + "\n";
  write_file(B(".sealfs/journal/hostile.journal"), text);
  write_file(B(".sealfs/journal/noheader.journal"), format_close(1, closed_now("other", "x")));
  ASSERT_EQ(::symlink("/etc/passwd", B(".sealfs/journal/link.journal").c_str()), 0);
  ASSERT_EQ(::mkfifo(B(".sealfs/journal/fifo.journal").c_str(), 0600), 0);
  const ReplayReport r = replay_journals(store(), dir_.get(), replay_options());
  EXPECT_EQ(r.sealed, 1u);
  EXPECT_EQ(r.ignored, 5u) << log_;
  EXPECT_TRUE(visible("kept"));
  EXPECT_FALSE(visible("other")) << "a journal without a header is not trusted";
  EXPECT_NE(log_.find("no valid header"), std::string::npos) << log_;
}

TEST_F(SealJournalFile, AJournalOfAnotherBootIsNeitherReplayedNorRemoved) {
  const JournalRecord kept = closed_now("kept", "data");
  {
    auto j = SealJournal::create(dir_.get(), JournalHeader{1, "another-boot", "0:1"});
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE((*j)->closed(kept).ok());
  }
  const ReplayReport r = replay_journals(store(), dir_.get(), replay_options());
  EXPECT_EQ(r.sealed, 0u);
  EXPECT_FALSE(visible("kept")) << "a power cut may have lost what its stamp described";
  EXPECT_EQ(r.other_boot, 1u);
  EXPECT_EQ(journal_names().size(), 1u) << "another host's journal over a shared B is not removed";
}

TEST_F(SealJournalFile, ALiveDaemonsJournalIsLeftAloneAnEndingOnesIsWaitedFor) {
  const JournalRecord kept = closed_now("kept", "data");
  auto j = SealJournal::create(dir_.get(), JournalHeader{1, this_boot_id(), "0:1"});
  ASSERT_TRUE(j.ok());
  ASSERT_TRUE((*j)->closed(kept).ok());
  owner_serving_ = true;
  ReplayReport r = replay_journals(store(), dir_.get(), replay_options(std::chrono::seconds(10)));
  EXPECT_EQ(r.live, 1u);
  EXPECT_FALSE(visible("kept"));
  owner_serving_ = false;  // unmounted: the old daemon only seals now
  r = replay_journals(store(), dir_.get(), replay_options(std::chrono::milliseconds(100)));
  EXPECT_EQ(r.timed_out, 1u) << "still held after the wait: left to its daemon";
  EXPECT_FALSE(visible("kept"));
  std::thread ending([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    j->reset();  // the old daemon exits with its seal still pending
  });
  const auto start = std::chrono::steady_clock::now();
  r = replay_journals(store(), dir_.get(), replay_options(std::chrono::seconds(10)));
  ending.join();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250)) << "it did not wait";
  EXPECT_EQ(r.sealed, 1u);
  EXPECT_TRUE(visible("kept"));
  EXPECT_TRUE(journal_names().empty());
}

// R10: new mode, owner or times after a close leave the file what was closed,
// so the record takes its new stamp. Not once its size moved, nor its mtime
// without a times change to explain it: a writer opened it again and wrote,
// and the record would vouch for writes no normal close ended.
TEST_F(SealJournalFile, AttributesSetAfterACloseRefreshTheRecordUnlessTheContentMoved) {
  auto j = SealJournal::create(dir_.get(), kHeader);
  ASSERT_TRUE(j.ok());
  const JournalRecord closed = closed_now("f", "data");
  EXPECT_TRUE((*j)->attributes_set(closed, true).ok());
  EXPECT_EQ((*j)->pending_count(), 0u) << "nothing pending: nothing refreshed";
  ASSERT_TRUE((*j)->closed(closed).ok());
  auto stamp_now = [&] {
    struct stat st {};
    EXPECT_EQ(::lstat(B("f").c_str(), &st), 0);
    return JournalRecord{"f", Stamp::of(st)};
  };
  auto pending_stamp = [&] {
    const JournalText t = parse_journal(journal_text(**j));
    EXPECT_EQ(t.pending.size(), 1u);
    return t.pending.empty() ? Stamp{} : t.pending.front().stamp;
  };
  const struct timespec old_times[2] = {{978307200, 0}, {978307200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, B("f").c_str(), old_times, 0), 0);
  const JournalRecord touched = stamp_now();
  ASSERT_FALSE(touched.stamp == closed.stamp);
  ASSERT_TRUE((*j)->attributes_set(touched, true).ok());
  EXPECT_TRUE(pending_stamp() == touched.stamp) << journal_text(**j);
  ASSERT_EQ(::chmod(B("f").c_str(), 0600), 0);
  const JournalRecord chmodded = stamp_now();
  ASSERT_TRUE((*j)->attributes_set(chmodded, false).ok());
  EXPECT_TRUE(pending_stamp() == chmodded.stamp) << journal_text(**j);
  // Same size, new mtime, then a chmod: written since, not refreshed.
  write_file(B("f"), "DATA", 0600);
  ASSERT_TRUE((*j)->attributes_set(stamp_now(), false).ok());
  EXPECT_TRUE(pending_stamp() == chmodded.stamp) << "a rewritten file's record was refreshed";
  // A new size, then new times: not refreshed either.
  write_file(B("f"), "half written", 0600);
  ASSERT_EQ(::utimensat(AT_FDCWD, B("f").c_str(), old_times, 0), 0);
  ASSERT_TRUE((*j)->attributes_set(stamp_now(), true).ok());
  EXPECT_TRUE(pending_stamp() == chmodded.stamp) << "a resized file's record was refreshed";
}

// What `sealfs fsck` reports: each journal's pending seals, whose they are,
// and whether its daemon still holds it; reading them writes nothing.
TEST_F(SealJournalFile, ASurveyTellsEachJournalsPendingSealsAndWhetherItIsLive) {
  const JournalRecord a = closed_now("a", "data");
  const JournalRecord b = closed_now("b", "data");
  auto live = SealJournal::create(dir_.get(), JournalHeader{7, this_boot_id(), "0:1"});
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE((*live)->closed(a).ok());
  ASSERT_TRUE((*live)->closed(a).ok()) << "a setattr's refresh: the same file again";
  {
    auto gone = SealJournal::create(dir_.get(), JournalHeader{8, this_boot_id(), "0:1"});
    ASSERT_TRUE(gone.ok());
    ASSERT_TRUE((*gone)->closed(a).ok());
    ASSERT_TRUE((*gone)->closed(b).ok());
    (*gone)->done(a.stamp.dev, a.stamp.ino);
  }
  {
    auto other = SealJournal::create(dir_.get(), JournalHeader{9, "another-boot", "0:1"});
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->closed(b).ok());
  }
  write_file(B(".sealfs/journal/noheader.journal"), format_close(1, b));
  const auto before = journal_names();
  UniqueFd root(::open(B().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto survey = survey_journals(root.get(), this_boot_id());
  ASSERT_TRUE(survey.ok()) << survey.error().message;
  std::map<pid_t, JournalSurvey> by_pid;
  std::size_t headless = 0;
  for (const auto& j : *survey) {
    if (j.headed)
      by_pid[j.header.pid] = j;
    else
      ++headless;
  }
  ASSERT_EQ(by_pid.size(), 3u);
  EXPECT_EQ(headless, 1u);
  EXPECT_TRUE(by_pid[7].live);
  EXPECT_TRUE(by_pid[7].this_boot);
  EXPECT_EQ(by_pid[7].pending, 1u) << "a refreshed record supersedes the earlier one";
  EXPECT_FALSE(by_pid[8].live);
  EXPECT_EQ(by_pid[8].pending, 1u);
  EXPECT_FALSE(by_pid[9].this_boot);
  EXPECT_EQ(by_pid[9].pending, 1u);
  EXPECT_EQ(journal_names(), before) << "a survey wrote";
  EXPECT_FALSE(visible("b")) << "a survey sealed";
  // The survey let go of the locks it tried: the dead daemon's journal is
  // still replayable, and the live one still locked.
  const ReplayReport r = replay_journals(store(), dir_.get(), replay_options());
  EXPECT_EQ(r.sealed, 1u) << log_;
  EXPECT_EQ(r.live + r.timed_out, 1u) << log_;
}

}  // namespace
}  // namespace sealfs
