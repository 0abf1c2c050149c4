// The validator registry a store is built with. Assembled here, above
// core/verify (which defines what a validator is) and core/cuda (which
// provides one), so that neither of those includes the other.
#pragma once

#include <string_view>

#include "core/verify/validator.hpp"

namespace sealfs {

// Validators every build knows: "cuda" (core/cuda/cuda.hpp, at the given mode:
// "off", "structural" or "driver"). Test builds add the test validators.
ValidatorRegistry default_validators(std::string_view cuda_mode = "structural");

#ifdef SEALFS_TEST_VALIDATORS
// Test builds only (SEALFS_FAULT_INJECTION=ON): "test-reject", which refuses
// any file whose content starts with "SEALFS-TEST-REJECT", so tests can
// trigger EBADMSG through a profile without CUDA images. Defined in
// tests/support/test_validators.cpp.
void add_test_validators(ValidatorRegistry& registry);
#endif

}  // namespace sealfs
