// R4: which backing files are open for writing through the mount, and how
// their last write handle ended. A file is "in progress" from the open of
// its first write handle until the seal (or abandon) after its last release
// has finished, so it never blinks out of sight in between: the kernel sends
// RELEASE after close() has returned, and the closer's next requests may
// arrive before it.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sealfs::fuse {

// How the task that closed a write handle was doing, read from /proc at
// FLUSH (closer_state_of).
enum class CloserState {
  normal,     // alive, or exiting with any status (exit(2) is the program's choice)
  abandoned,  // dying of a signal (SIGKILL, SIGSEGV, SIGABRT, the OOM killer…)
};

// Parse the text of /proc/<tid>/stat: abandoned when the flags field (9th)
// has PF_EXITING and the exit_code field (52nd) names a signal (its low 7
// bits: do_exit's code is the wait status, `status << 8` for an exit and
// the signal number, with 0x80 for a core dump, for a death). Anything that
// does not parse counts as normal; whether a writer can be seen at all is
// asked before it may write (writer_visible).
CloserState closer_state_from_stat(std::string_view stat_text);
// Whether the text of /proc/<tid>/status shows the task with its memory
// (the Vm lines). do_exit releases the memory before it closes the files, so
// a FLUSH from an exiting task comes from one without; a task with its
// memory is alive, or in the middle of an exec.
bool status_shows_memory(std::string_view status_text);
// Judge the task behind a FLUSH; unreadable → normal. /proc/<tid>/stat is
// read only for a task without its memory: reading it waits for a task in
// exec (the kernel takes the exec lock there), and an exec closes its
// O_CLOEXEC descriptors, so waits for this very FLUSH, while it holds that
// lock. Reading stat first hung such a writer and the daemon's thread for
// good; /proc/<tid>/status takes no such lock.
CloserState closer_state_of(pid_t tid);

// Whether R4 can see the task tid: the kernel could name it in the daemon's
// pid namespace (a task of another one comes as pid 0) and the daemon may
// read its /proc/<tid>/fdinfo (ptrace read access, which also guards the
// exit code in /proc/<tid>/stat: without it the kernel shows 0 there, and a
// killed writer would look like one that exited). A writer it cannot see
// cannot be told dying from closing (DESIGN.md R4: the unseen-writer policy,
// file_handles.hpp refuse_unseen_writer).
bool writer_visible(pid_t tid);
// Whether /proc is the proc of this process's own pid namespace (its
// /proc/self names getpid()). A daemon started in a new pid namespace
// without a /proc of its own (`unshare -p -f`) would read other processes
// under the pids the kernel sends it.
bool proc_is_own_namespace();

// The thread group (process) of a task, from the "Tgid:" line of
// /proc/<tid>/status; the tid itself when that cannot be read (a task in
// another pid namespace is 0, and all of them count as one).
pid_t thread_group_from_status(std::string_view status_text, pid_t tid);
pid_t thread_group_of(pid_t tid);
// The mount ID (the first field of a mountinfo line, fdinfo's mnt_id:) of
// the topmost FUSE mount at mountpoint in mountinfo_text; 0 when none.
std::uint64_t fuse_mount_id(std::string_view mountinfo_text, std::string_view mountpoint);
// The same from this process's /proc/self/mountinfo (asks nothing of the mount).
std::uint64_t fuse_mount_id_of(std::string_view mountpoint);
// Whether process tgid still has a descriptor open on the file with inode
// number ino on the mount with ID mount_id (0: any mount), from the mnt_id:
// and ino: of each /proc/<tgid>/fdinfo entry. Without RELEASE (no_open) this
// tells a close of one of several descriptors from a process's last close of
// the file. No readlink of /proc/<tgid>/fd: that waits for a process in exec,
// whose close of its O_CLOEXEC descriptors waits for the FLUSH asking this.
// Unreadable → false.
bool process_holds(pid_t tgid, ino_t ino, std::uint64_t mount_id);
// The same against any of mount_ids (empty: any mount).
bool process_holds(pid_t tgid, ino_t ino, const std::vector<std::uint64_t>& mount_ids);
// The device ("major:minor", mountinfo's third field) of the topmost FUSE
// mount at mountpoint in mountinfo_text; empty when none. Unlike the mount
// ID it is the same in every mount namespace that sees the mount.
std::string fuse_mount_device(std::string_view mountinfo_text, std::string_view mountpoint);
// The IDs of the FUSE mounts of device in mountinfo_text.
// The same from this process's /proc/self/mountinfo.
std::string fuse_mount_device_of(std::string_view mountpoint);
std::vector<std::uint64_t> fuse_mount_ids_of_device(std::string_view mountinfo_text, std::string_view device);
// The IDs under which process tgid sees the mount of device: its own mount
// namespace's (a sidecar's app sees the mount propagated into its
// namespace, under IDs of its own), from /proc/<tgid>/mountinfo, which
// waits for no exec. Empty when unreadable or device is empty.
std::vector<std::uint64_t> fuse_mount_ids_seen_by(pid_t tgid, std::string_view device);
// Whether process tgid has finished exiting (gone from /proc, or a zombie or
// dead task: its descriptors are all closed), from the State line of
// /proc/<tgid>/status (stat would wait for a process in exec, see above). A
// tgid of 0 (a task of another pid namespace) is never called gone.
bool process_gone(pid_t tgid);

// What the last release of a file's write handles asks for.
enum class LastClose {
  untouched,  // no handle made or changed the file: it stays as it was (sealed or not)
  seal,       // made or changed, and every changing handle closed normally
  abandon,    // a handle that changed it was abandoned (R4)
};

// How one write handle ended.
struct HandleEnd {
  bool changed = false;          // it wrote, truncated or allocated the file
  bool abandoned = false;        // a closer was dying abnormally, or no FLUSH came
  bool made = false;             // it created the file (sealed even when empty)
  bool closed_normally = false;  // at least one of its closes came from a task closing normally
};

class WriterTracking {
 public:
  using Key = std::pair<dev_t, ino_t>;

  void opened(dev_t dev, ino_t ino);
  // One write handle is gone. When it was the last, says what the file needs;
  // the file stays in progress until finished() is called.
  std::optional<LastClose> released(dev_t dev, ino_t ino, HandleEnd end);
  void finished(dev_t dev, ino_t ino);
  // A seal that waited (DeferredSeals) was taken over by a new writer
  // (already counted by opened()): finished() without it, and the file still
  // counts as changed, so that the new writer's last close seals it even if
  // that writer changes nothing.
  void resumed(dev_t dev, ino_t ino);
  // An opened() whose open then failed: forget it without sealing anything.
  void cancelled(dev_t dev, ino_t ino);

  // At a FLUSH of a write handle (handle_changes: it made or changed the
  // file): whether it is the file's only write handle and the file will
  // need a seal when it goes (nothing abandoned so far). R4's seal journal
  // records such a close before FLUSH returns.
  bool last_writer_seals(dev_t dev, ino_t ino, bool handle_changes) const;
  bool in_progress(dev_t dev, ino_t ino) const;
  // How many files are in progress now (the status gauge).
  std::size_t in_progress_count() const;

  // R4's seal gate. The seal after a last release runs while the kernel may
  // already send the closer's next requests (close() returned at FLUSH). A
  // seal, and every request that would race with one or needs its result
  // (setattr, rename, link, unlink, a write open), holds its files for its
  // duration: one holder per file at a time, so a seal never hashes a file
  // whose times or mode are being changed, and a rename never moves a file
  // half sealed.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

   private:
    friend class WriterTracking;
    void release();
    WriterTracking* owner_ = nullptr;
    std::vector<Key> keys_;
  };
  // Waits until no one else holds any of keys (taken in one order, so two
  // holders of the same pair cannot deadlock). Keys of {0, 0} are skipped.
  [[nodiscard]] Hold hold(std::vector<Key> keys);
  [[nodiscard]] Hold hold(dev_t dev, ino_t ino) { return hold(std::vector<Key>{{dev, ino}}); }

 private:
  struct State {
    unsigned writers = 0;
    unsigned sealing = 0;    // seals/abandons under way after a last release
    bool changed = false;    // made or changed by a handle: needs a seal
    bool abandoned = false;  // a changing handle was abandoned
  };
  mutable std::mutex mu_;
  std::map<Key, State> files_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  std::set<Key> held_;
};

}  // namespace sealfs::fuse
