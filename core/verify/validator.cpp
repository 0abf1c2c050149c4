#include "core/verify/validator.hpp"

#include <string>
#include <string_view>
#include <utility>

namespace sealfs {

void ValidatorRegistry::add(std::string name, ValidatorFn fn) {
  fns_.insert_or_assign(std::move(name), std::move(fn));
}

const ValidatorFn* ValidatorRegistry::find(std::string_view name) const {
  auto it = fns_.find(name);
  return it == fns_.end() ? nullptr : &it->second;
}

}  // namespace sealfs
