/* SPDX-License-Identifier: BSD-3-Clause */
/* elf-undefine OBJECT SYMBOL: turns SYMBOL, a global thread-local variable
 * defined in the relocatable ELF64 OBJECT, into an undefined reference
 * (section UND, value and size 0, default visibility), in place.  The
 * object's code keeps using the variable through its relocations, which now
 * name a symbol another object defines.
 *
 * Built and run at build time by cmake/jemalloc-private.cmake: jemalloc's
 * thread data (tsd_tls, initial-exec TLS) is defined by the interposer, so
 * that libhugepool_small_heap.so, which the interposer loads with dlopen,
 * has no TLS block of its own (glibc's static TLS reserve for dlopen is
 * smaller than jemalloc's 2.6 KB: "cannot allocate memory in static TLS
 * block").  objcopy cannot do this: it refuses to strip or move a symbol
 * that relocations name.
 *
 * Checks what it relies on and exits 1 with a message otherwise: ELF64 of
 * this machine's byte order, one symbol table, the symbol found once,
 * global, STT_TLS, defined. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *object, const char *what) {
  (void)fprintf(stderr, "elf-undefine: %s: %s\n", object, what);
  return 1;
}

static int in_file(size_t off, size_t len, size_t size) { return off <= size && len <= size - off; }

int main(int argc, char **argv) {
  if (argc != 3) {
    (void)fprintf(stderr, "usage: elf-undefine OBJECT SYMBOL\n");
    return 2;
  }
  const char *object = argv[1], *name = argv[2];
  int fd = open(object, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return fail(object, "cannot open it for writing");
  size_t size = (size_t)st.st_size;
  if (size < sizeof(Elf64_Ehdr)) return fail(object, "too short for an ELF header");
  unsigned char *file = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (file == MAP_FAILED) return fail(object, "cannot map it");
  Elf64_Ehdr eh;
  memcpy(&eh, file, sizeof(eh));
  const union {
    unsigned short word;
    unsigned char byte;
  } order = {.word = 1};
  unsigned char host = order.byte == 1 ? ELFDATA2LSB : ELFDATA2MSB;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != host || eh.e_type != ET_REL)
    return fail(object, "not a relocatable ELF64 object of this machine's byte order");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_file(eh.e_shoff, (size_t)eh.e_shnum * sizeof(Elf64_Shdr), size))
    return fail(object, "bad section header table");
  Elf64_Shdr *sh = (Elf64_Shdr *)(file + eh.e_shoff);
  int done = 0;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    if (sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
        !in_file(sh[i].sh_offset, sh[i].sh_size, size))
      return fail(object, "bad symbol table");
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    if (!in_file(strtab->sh_offset, strtab->sh_size, size)) return fail(object, "bad string table");
    const char *strings = (const char *)file + strtab->sh_offset;
    Elf64_Sym *sym = (Elf64_Sym *)(file + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < n; k++) {
      if (sym[k].st_name >= strtab->sh_size) return fail(object, "a symbol name outside the string table");
      const char *s = strings + sym[k].st_name;
      if (strnlen(s, strtab->sh_size - sym[k].st_name) == strtab->sh_size - sym[k].st_name) continue;
      if (strcmp(s, name) != 0) continue;
      if (done) return fail(object, "the symbol is named twice");
      if (ELF64_ST_BIND(sym[k].st_info) != STB_GLOBAL || ELF64_ST_TYPE(sym[k].st_info) != STT_TLS)
        return fail(object, "the symbol is not a global thread-local variable");
      if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_shndx >= SHN_LORESERVE)
        return fail(object, "the symbol is not defined in a section");
      sym[k].st_shndx = SHN_UNDEF;
      sym[k].st_value = 0;
      sym[k].st_size = 0;
      sym[k].st_other = STV_DEFAULT;
      done = 1;
    }
  }
  if (!done) return fail(object, "no such symbol");
  if (msync(file, size, MS_SYNC) != 0 || munmap(file, size) != 0 || close(fd) != 0)
    return fail(object, "cannot write it back");
  return 0;
}
