#include "core/store/validators.hpp"

#include <string_view>

#include "core/cuda/cuda.hpp"
#include "core/verify/validator.hpp"

namespace sealfs {

ValidatorRegistry default_validators(std::string_view cuda_mode) {
  ValidatorRegistry registry;
  registry.add("cuda", cuda::make_validator(cuda_mode));
#ifdef SEALFS_TEST_VALIDATORS
  add_test_validators(registry);
#endif
  return registry;
}

}  // namespace sealfs
