// What the store's options decide for every part of it: whether to fsync,
// whether a file is being written through the mount (R4), and where the test
// fault hook stops a transaction (crash points).
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/base/result.hpp"
#include "core/layout/paths.hpp"
#include "core/store/in_flight.hpp"
#include "core/store/space.hpp"
#include "core/store/store.hpp"

namespace sealfs {

class Policy {
 public:
  // options must outlive the policy (both live in Store::Impl).
  // pending: seals that wait for space (space.hpp), and in_flight: files a
  // rename moves into an entry (in_flight.hpp), both shown as in progress.
  Policy(const StoreOptions& options, const PendingSeals& pending, const FilesInFlight& in_flight)
      : options_(options), pending_(pending), in_flight_(in_flight) {}

  bool durable() const { return options_.durability == Durability::fsync; }
  // fsync when durability=fsync; a no-op otherwise.
  Status sync_file(int fd) const { return durable() ? sync_fd(fd) : Status{}; }
  Status sync_directory(int dir_fd) const { return durable() ? sync_dir(dir_fd) : Status{}; }

  // R4: written through the mount right now, closed and waiting for space to
  // be sealed (as visible as while it was open), or being renamed into an
  // entry (in_flight.hpp).
  bool in_progress(const struct stat& st) const {
    return S_ISREG(st.st_mode) && ((options_.in_progress && options_.in_progress(st.st_dev, st.st_ino)) ||
                                   pending_.holds(st) || in_flight_.holds(st));
  }

  // A crash point, right after the named step (publish.hpp names them): the
  // error to return, with no cleanup, when the fault hook stops there. Use as
  //   if (auto crash = policy.step(publish_steps::kRenamed)) return *crash;
  std::optional<Error> step(std::string_view at) const {
    if (!options_.fault_hook || !options_.fault_hook(at)) return std::nullopt;
    return make_error(ECANCELED, "fault hook: stopped after " + std::string(at));
  }

 private:
  const StoreOptions& options_;
  const PendingSeals& pending_;
  const FilesInFlight& in_flight_;
};

}  // namespace sealfs
