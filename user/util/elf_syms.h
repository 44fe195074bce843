/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Finding functions in an ELF file by name, for uprobes: in the dynamic
 * symbol table (shared libraries) and the full one (static executables and
 * libraries that keep it), as file offsets.
 */
#ifndef TB_ELF_SYMS_H
#define TB_ELF_SYMS_H

#include <stdbool.h>
#include <stdint.h>

struct elf_info {
	char soname[64];	/* DT_SONAME, "" if none */
	bool has_symbols;	/* any symbol table with defined functions */
};

/*
 * Looks up names[0..n) in the ELF file open as fd; offs[i] gets the file
 * offset of names[i], or 0 when it is not defined there. A name with a '*'
 * is a pattern (fnmatch(3)): the first symbol it matches. C++ names are
 * mangled differently by different builds (c10::optional or
 * std::optional, std::string by value or by reference): a pattern names
 * the function whatever its parameters. Returns how many were found, or
 * -1 if fd is not a readable ELF file.
 */
int elf_find_functions(int fd, const char *const names[], int n,
		       uint64_t offs[], struct elf_info *info);

/*
 * Copies into out the version that follows prefix in the file's read-only
 * data: the first occurrence followed by a digit, up to a space or '+'
 * ("NCCL version 2.28.9+cuda13.0" gives "2.28.9"). False if there is none.
 */
bool elf_find_string(int fd, const char *prefix, char *out, int len);

/*
 * Where the function caller (exported; a name or a pattern, as above)
 * calls callee directly or through
 * the PLT (x86-64 `call rel32`): the file offsets of the instructions
 * after those calls, its return sites, up to max into out. A uprobe there
 * fires as the call returns, with no uretprobe on the stack (a C++
 * exception unwinding through one terminates the process). Returns how
 * many, 0 if none or not readable.
 */
int elf_call_returns(int fd, const char *caller, const char *callee, uint64_t out[], int max);

/*
 * A data object the file exports (.dynsym; an interpreter's _PyRuntime):
 * its address and size as the file gives them, and the page of its
 * executable segment, whose mapping tells where the file was loaded
 * (the mapping's start minus text_vaddr, for a PIE or a library; 0 for a
 * fixed executable). False if the file does not export it.
 */
bool elf_exported_object(int fd, const char *name, uint64_t *vaddr, uint64_t *size,
			 uint64_t *text_vaddr);

#endif
