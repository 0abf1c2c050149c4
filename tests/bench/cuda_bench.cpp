// Benchmark: structural CUDA validation of a ~100 MB host library must take
// well under 50 ms (it reads headers and scans data sections, never the code).
//
// Builds a synthetic ELF64 shared-object layout: 40 MB of .text, 30 MB of
// .rodata (scanned by magic), and a 30 MB .nv_fatbin made of the committed
// multi-arch fatbin fixture repeated, then times cuda::check_file over it.
// Usage: cuda_bench [FIXTURE_DIR] [BUDGET_MS]; exit 1 when the median run is
// over budget (default 50 ms of CPU time) or the file is not judged sound.
#include <elf.h>
#include <fcntl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/cuda/cuda.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

constexpr std::size_t kMiB = 1 << 20;

struct Section {
  const char* name;
  std::uint32_t type;
  std::uint64_t flags;
  std::vector<char> data;
};

std::vector<char> random_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<char> out(n);
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i + 4 <= n; i += 4) {
    const std::uint32_t v = rng();
    std::memcpy(out.data() + i, &v, 4);
  }
  return out;
}

// Lay out Ehdr | sections | shstrtab | section headers.
std::vector<char> build_elf(std::vector<Section> sections) {
  std::string names(1, '\0');
  std::vector<std::uint32_t> name_at;
  for (const auto& s : sections) {
    name_at.push_back(static_cast<std::uint32_t>(names.size()));
    names += s.name;
    names += '\0';
  }
  const auto shstrtab_name = static_cast<std::uint32_t>(names.size());
  names += ".shstrtab";
  names += '\0';

  std::vector<char> file(sizeof(Elf64_Ehdr));
  std::vector<Elf64_Shdr> headers(1);  // SHT_NULL
  for (std::size_t i = 0; i < sections.size(); ++i) {
    file.resize((file.size() + 63) & ~std::size_t{63});
    Elf64_Shdr sh{};
    sh.sh_name = name_at[i];
    sh.sh_type = sections[i].type;
    sh.sh_flags = sections[i].flags;
    sh.sh_offset = file.size();
    sh.sh_size = sections[i].data.size();
    sh.sh_addralign = 64;
    file.insert(file.end(), sections[i].data.begin(), sections[i].data.end());
    headers.push_back(sh);
  }
  Elf64_Shdr strtab{};
  strtab.sh_name = shstrtab_name;
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = file.size();
  strtab.sh_size = names.size();
  file.insert(file.end(), names.begin(), names.end());
  headers.push_back(strtab);
  file.resize((file.size() + 7) & ~std::size_t{7});

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shoff = file.size();
  eh.e_shnum = static_cast<std::uint16_t>(headers.size());
  eh.e_shstrndx = static_cast<std::uint16_t>(headers.size() - 1);
  const auto* raw = reinterpret_cast<const char*>(headers.data());
  file.insert(file.end(), raw, raw + headers.size() * sizeof(Elf64_Shdr));
  std::memcpy(file.data(), &eh, sizeof eh);
  return file;
}

// A 100 MiB host library: 40 MiB of code, 30 MiB of data and a 30 MiB
// .nv_fatbin of kernel_multi.fatbin copies; empty (said on stderr) when the
// fixture cannot be read.
std::vector<char> synthetic_library(const std::string& fixtures) {
  std::ifstream in(fixtures + "/kernel_multi.fatbin", std::ios::binary);
  const std::vector<char> fatbin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (fatbin.empty()) {
    std::cerr << "cannot read " << fixtures << "/kernel_multi.fatbin\n";
    return {};
  }
  std::vector<char> nv_fatbin;
  while (nv_fatbin.size() < 30 * kMiB) nv_fatbin.insert(nv_fatbin.end(), fatbin.begin(), fatbin.end());
  return build_elf({
      {".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, random_bytes(40 * kMiB, 1)},
      {".rodata", SHT_PROGBITS, SHF_ALLOC, random_bytes(30 * kMiB, 2)},
      {".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, std::move(nv_fatbin)},
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Default: the fixtures beside this source file (tests/fixtures/cuda).
  const std::string fixtures = argc > 1 ? argv[1] : (sealfs::test::fixtures_dir() / "cuda").string();
  const double budget_ms = argc > 2 ? std::atof(argv[2]) : 50.0;

  const std::vector<char> image = synthetic_library(fixtures);
  if (image.empty()) return 2;

  sealfs::test::TempDir dir("sealfs-cuda-bench");
  const std::string path = dir / "kernel_lib.so";
  sealfs::test::write_file(path, std::string_view(image.data(), image.size()));
  sealfs::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    std::perror("open");
    return 2;
  }

  // Wall time suffers when other jobs share the CPUs (CI, parallel builds);
  // the thread's CPU time is what the check itself costs, and is judged.
  auto cpu_now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  };
  std::vector<double> runs;
  std::vector<double> cpu_runs;
  std::size_t images = 0;
  for (int i = 0; i < 7; ++i) {
    const double cpu_start = cpu_now();
    const auto start = std::chrono::steady_clock::now();
    auto check = sealfs::cuda::check_file(fd.get(), sealfs::cuda::Mode::structural, "kernel_lib.so");
    const auto stop = std::chrono::steady_clock::now();
    cpu_runs.push_back(cpu_now() - cpu_start);
    if (!check || !check->sound) {
      std::cerr << "FAIL: synthetic library judged broken: "
                << (check ? check->reason : check.error().message) << '\n';
      return 1;
    }
    images = check->images.size();
    runs.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(runs.begin(), runs.end());
  std::sort(cpu_runs.begin(), cpu_runs.end());
  const double median = cpu_runs[cpu_runs.size() / 2];
  std::printf(
      "cuda structural check: %.1f MiB, %zu images; CPU median %.2f ms (min %.2f, max %.2f); "
      "wall median %.2f ms (min %.2f); budget %.0f ms CPU\n",
      static_cast<double>(image.size()) / kMiB, images, median, cpu_runs.front(), cpu_runs.back(),
      runs[runs.size() / 2], runs.front(), budget_ms);
  if (median > budget_ms) {
    std::printf("FAIL: over budget\n");
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
