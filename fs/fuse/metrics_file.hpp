// -o metrics_file=PATH: the daemon's counters in Prometheus' text format
// (core/base/metrics_text.hpp), rewritten every metrics_interval seconds for
// node_exporter's textfile collector, and once more when the mount ends.
//
// Its own thread, so the FUSE loop never waits for it: a slow or full disk
// holds up only this thread. Each rewrite goes to PATH.tmp beside PATH and is
// renamed over PATH, so a reader sees the old file or the new one, never a
// part. There is no fsync: the file is a view of counters that start from
// zero with every daemon, rewritten a few seconds later anyway; after a
// power cut an empty or old file is as good as any, while an fsync every few
// seconds would cost a busy disk a journal commit each time. A failed
// rewrite is logged once (syslog) and tried again at the next interval; the
// first success after failures is logged too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/base/result.hpp"

namespace sealfs::fuse {

// PATH as the daemon will use it: absolute (the daemon leaves its working
// directory when it daemonizes), in an existing directory, not a directory
// itself, and outside both the mountpoint and the backing directory. Inside
// the mount, each rewrite would be a request to the daemon itself (counted,
// published as a file entry, and the last one made while the mount goes
// away); inside B it would be foreign content that the mount hides and
// fsck reports. EINVAL (or the errno found) with a message saying which.
Result<std::string> metrics_file_path(const std::string& path, const std::string& mountpoint,
                                      const std::string& backing);

// text written to path.tmp, then renamed over path (mode 0644).
Status write_file_replacing(const std::string& path, std::string_view text);

class MetricsFile {
 public:
  using Render = std::function<std::string()>;
  using Log = std::function<void(const std::string&)>;  // one line; syslog when empty

  // Starts the thread, which writes at once and then every interval.
  MetricsFile(std::string path, std::chrono::milliseconds interval, Render render, Log log = {});
  // Writes once more (the counters at the end) and joins the thread.
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

 private:
  void run();
  void write_once();

  std::string path_;
  std::chrono::milliseconds interval_;
  Render render_;
  Log log_;
  bool failing_ = false;  // the thread's own: a failure has been logged
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace sealfs::fuse
