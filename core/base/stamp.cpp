#include "core/base/stamp.hpp"

namespace sealfs {

Stamp Stamp::of(const struct stat& st) {
  Stamp s;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime = st.st_mtim;
  s.ctime = st.st_ctim;
  return s;
}

bool Stamp::operator==(const Stamp& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
         ctime.tv_nsec == o.ctime.tv_nsec;
}

// A ctime this close to now could be followed, within the same timestamp
// tick, by a same-size rewrite that leaves the stamp unchanged (R8).
bool Stamp::too_recent() const {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const long long ns_now = static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
  const long long ns_c = static_cast<long long>(ctime.tv_sec) * 1000000000LL + ctime.tv_nsec;
  return ns_now - ns_c < 1000000000LL;
}

}  // namespace sealfs
