#include "core/verify/validator.hpp"

#include <utility>

#include "core/cuda/cuda.hpp"

namespace sealfs {

void ValidatorRegistry::add(std::string name, ValidatorFn fn) {
  fns_.insert_or_assign(std::move(name), std::move(fn));
}

const ValidatorFn* ValidatorRegistry::find(std::string_view name) const {
  auto it = fns_.find(name);
  return it == fns_.end() ? nullptr : &it->second;
}

ValidatorRegistry default_validators(std::string_view cuda_mode) {
  ValidatorRegistry registry;
  registry.add("cuda", cuda::make_validator(cuda_mode));
#ifdef SEALFS_TEST_VALIDATORS
  add_test_validators(registry);
#endif
  return registry;
}

}  // namespace sealfs
