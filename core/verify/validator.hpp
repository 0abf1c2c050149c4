// Content validators that a profile attaches to globs (R1): each one looks at
// a file about to be published and accepts or rejects it. A rejection makes
// the publish fail with EBADMSG.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace sealfs {

struct ValidationOutcome {
  bool accepted = true;
  std::string reason;  // why it was rejected (or a note when accepted)
  // Canonical JSON object recorded in the manifest under extra[<validator>][<rel>]
  // (e.g. the CUDA architectures found); empty when there is nothing to record.
  std::string record_json;
};

// fd: the file opened O_RDONLY; rel: its path inside the entry (for messages).
using ValidatorFn = std::function<ValidationOutcome(int fd, std::string_view rel)>;

class ValidatorRegistry {
 public:
  void add(std::string name, ValidatorFn fn);
  const ValidatorFn* find(std::string_view name) const;  // nullptr when unknown
  bool has(std::string_view name) const { return find(name) != nullptr; }

 private:
  std::map<std::string, ValidatorFn, std::less<>> fns_;
};

}  // namespace sealfs
