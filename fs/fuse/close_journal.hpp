// R4: a normal close outlives the daemon. The adapter hands core's seal
// journal (core/writers/seal_journal.hpp) the facts only FUSE knows: which
// FLUSH is a normal last close, when the seal after it has run, whether the
// daemon that holds an older journal still serves its mount.
#pragma once

#include <sys/types.h>

#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/inode_table.hpp"

namespace sealfs::fuse {

// Before the mount serves anything: the seals other daemons journalled and
// did not run are finished (journal_replay.hpp), so that each such file
// shows at its first lookup. A read-only mount replays nothing.
void replay_seal_journals(Filesystem& fs);
// After the mount (its device is in the journal's header) and the fork:
// this daemon's own journal. Without one (B/.sealfs not writable) closes are
// not journalled: logged.
void start_seal_journal(Filesystem& fs);
// At the exit, once every seal has run: the journal goes, or stays with
// what is still pending for the next daemon.
void stop_seal_journal(Filesystem& fs);

// A FLUSH of handle, after its closer and flush are noted in handle.life:
// when the closer closes normally, handle is the file's only write handle and
// the file needs a seal, the close is journalled before the FLUSH is
// answered (R4). One fstat, the file's path and one write, through the
// handle's own descriptor; a parked handle is not journalled.
void journal_close(Filesystem& fs, FileHandle& handle);
// A seal about to wait (DeferredSeals) for a file whose close is not
// journalled yet (without OPEN, the FLUSH that ends it is this request).
void journal_deferred(Filesystem& fs, const Inode& inode);
// A setattr through the mount of mode, owner or times (not size) has run on
// inode: when its close is journalled and its seal has not run, the record
// takes the file's new stamp (its ctime, and mtime for times, moved). Mode,
// owner and times are not sealed (R10), so the file is still what was
// closed; with the old stamp a next daemon would leave it hidden. Not when
// its size, or (without times_set) its mtime, moved since: a writer opened
// it again and wrote (SealJournal::attributes_set). Called under the file's
// gate, which its seal (and so done) also takes.
void journal_attributes_set(Filesystem& fs, const Inode& inode, bool times_set);
// The seal or abandon of (dev, ino) after its last close has run.
void journal_done(Filesystem& fs, dev_t dev, ino_t ino);

}  // namespace sealfs::fuse
