// R4's view of the tasks behind FUSE requests, read from /proc: whether the
// task that closed a write handle was dying of a signal, whether it can be
// seen at all, whether a process still holds the file open on this mount.
// These are the facts fs/ hands to core/writers (WriterTracking), which keys
// the files by inode and knows nothing of tasks or FUSE.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
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

}  // namespace sealfs::fuse
