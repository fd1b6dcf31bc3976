// The entry points of a cubin, read from its ELF64 symbol table. The bytes
// come from a disk cache or a user, so every offset and size is checked
// before it is used. Declared in jit/kernel_cache.h.
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/kernel_cache.h"

namespace grove::jit {
namespace {

// st_other flag of a CUDA kernel (an entry point), as opposed to a device
// function that was not inlined.
constexpr unsigned char kStoCudaEntry = 0x10;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a valid cubin: ", what));
}

// True when [offset, offset + count * size) lies inside `total` bytes.
bool InBounds(uint64_t offset, uint64_t count, uint64_t size, uint64_t total) {
  if (offset > total) return false;
  if (size != 0 && count > (total - offset) / size) return false;
  return true;
}

template <typename T>
T Read(absl::string_view bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CubinEntryPoints(absl::string_view cubin) {
  const uint64_t total = cubin.size();
  if (total < sizeof(Elf64_Ehdr)) return Bad("shorter than an ELF64 header");
  const auto eh = Read<Elf64_Ehdr>(cubin, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Bad("no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Bad("not ELF64");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Bad("not little-endian");
  if (eh.e_shnum == 0) return Bad("no section headers");
  if (eh.e_shentsize < sizeof(Elf64_Shdr)) return Bad("section header entries too small");
  if (!InBounds(eh.e_shoff, eh.e_shnum, eh.e_shentsize, total)) {
    return Bad("section headers outside the file");
  }
  auto section = [&](uint64_t i) {
    return Read<Elf64_Shdr>(cubin, eh.e_shoff + i * eh.e_shentsize);
  };

  std::vector<std::string> names;
  bool found_symtab = false;
  for (uint64_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_SYMTAB) continue;
    found_symtab = true;
    if (symtab.sh_entsize < sizeof(Elf64_Sym)) return Bad("symbol entries too small");
    const uint64_t count = symtab.sh_size / symtab.sh_entsize;
    if (!InBounds(symtab.sh_offset, count, symtab.sh_entsize, total)) {
      return Bad("symbol table outside the file");
    }
    if (symtab.sh_link == 0 || symtab.sh_link >= eh.e_shnum) return Bad("symbol table without strings");
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (strtab.sh_type != SHT_STRTAB) return Bad("symbol names not in a string table");
    if (!InBounds(strtab.sh_offset, strtab.sh_size, 1, total)) return Bad("string table outside the file");
    const absl::string_view strings = cubin.substr(strtab.sh_offset, strtab.sh_size);
    for (uint64_t s = 0; s < count; ++s) {
      const auto sym = Read<Elf64_Sym>(cubin, symtab.sh_offset + s * symtab.sh_entsize);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || (sym.st_other & kStoCudaEntry) == 0) continue;
      if (sym.st_name >= strings.size()) return Bad("symbol name outside the string table");
      const absl::string_view rest = strings.substr(sym.st_name);
      const size_t end = rest.find('\0');
      if (end == absl::string_view::npos) return Bad("unterminated symbol name");
      if (end == 0) continue;
      names.emplace_back(rest.substr(0, end));
    }
  }
  if (!found_symtab) return Bad("no symbol table");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace grove::jit
