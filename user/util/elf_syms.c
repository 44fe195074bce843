// SPDX-License-Identifier: BSD-3-Clause
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elf_syms.h"

struct name_idx {
	const char *name;
	int idx;
};

/* The names to find: exact ones sorted for bsearch, and the patterns. */
struct wanted {
	struct name_idx *sorted;
	int nsorted;
	struct name_idx *globs;
	int nglobs;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct name_idx *)a)->name,
		      ((const struct name_idx *)b)->name);
}

/* A symbol's address as an offset in the file: what uprobes attach to. */
static uint64_t vaddr_to_offset(Elf *elf, uint64_t vaddr)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

static bool glob_matches(const char *g, const char *name)
{
	/* The text before the first '*' must start the name: most fail there. */
	size_t fixed = strcspn(g, "*");

	return !strncmp(name, g, fixed) && !fnmatch(g, name, 0);
}

/*
 * How many wanted names not found yet this symbol is (an exact name and a
 * pattern can both want it); with off, they are found at off.
 */
static int take_symbol(const struct wanted *w, const char *name, uint64_t off,
		       uint64_t offs[])
{
	struct name_idx key = { name, 0 }, *hit;
	int found = 0;

	hit = bsearch(&key, w->sorted, w->nsorted, sizeof(*w->sorted), cmp_name);
	if (hit && !offs[hit->idx]) {
		offs[hit->idx] = off;
		found++;
	}
	for (int i = 0; name[0] == '_' && i < w->nglobs; i++)
		if (!offs[w->globs[i].idx] && glob_matches(w->globs[i].name, name)) {
			offs[w->globs[i].idx] = off;
			found++;
		}
	return found;
}

static int scan_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
		       const struct wanted *w, uint64_t offs[], bool *any)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	int found = 0;

	for (size_t i = 0; data && i < count; i++) {
		const char *name;
		GElf_Sym sym;
		uint64_t off;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
			continue;
		*any = true;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		/* Every name we probe starts with "cu", "nccl", "_Z" (C++), "Py" or "_Py". */
		if (!name || (name[0] != 'c' && name[0] != 'n' && name[0] != '_' && name[0] != 'P'))
			continue;
		/* Most symbols are not wanted: the address is looked up for those that are. */
		if (!take_symbol(w, name, 0, offs))
			continue;
		off = vaddr_to_offset(elf, sym.st_value);
		if (off)
			found += take_symbol(w, name, off, offs);
	}
	return found;
}

static void read_soname(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			struct elf_info *info)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Dyn dyn;

	for (size_t i = 0; data && i < count; i++) {
		const char *s;

		if (!gelf_getdyn(data, i, &dyn) || dyn.d_tag != DT_SONAME)
			continue;
		s = elf_strptr(elf, sh->sh_link, dyn.d_un.d_val);
		if (s)
			snprintf(info->soname, sizeof(info->soname), "%s", s);
	}
}

int elf_find_functions(int fd, const char *const names[], int n,
		       uint64_t offs[], struct elf_info *info)
{
	struct name_idx *all = calloc(n ? n : 1, sizeof(*all));
	struct wanted w = { .sorted = all };
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf *elf = NULL;
	int found = -1;

	memset(info, 0, sizeof(*info));
	memset(offs, 0, n * sizeof(*offs));
	if (!all || elf_version(EV_CURRENT) == EV_NONE)
		goto cleanup;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto cleanup;
	/* Exact names first in the array, sorted; the patterns after them. */
	for (int i = 0; i < n; i++)
		if (!strchr(names[i], '*'))
			all[w.nsorted++] = (struct name_idx){ names[i], i };
	w.globs = all + w.nsorted;
	for (int i = 0; i < n; i++)
		if (strchr(names[i], '*'))
			w.globs[w.nglobs++] = (struct name_idx){ names[i], i };
	qsort(all, w.nsorted, sizeof(*all), cmp_name);
	found = 0;
	/* .dynsym first: a stripped library still exports its API there. */
	for (int pass = 0; pass < 2; pass++) {
		while ((scn = elf_nextscn(elf, scn))) {
			if (!gelf_getshdr(scn, &sh))
				continue;
			if (pass == 0 && sh.sh_type == SHT_DYNAMIC)
				read_soname(elf, scn, &sh, info);
			if (sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				found += scan_symtab(elf, scn, &sh, &w, offs,
						     &info->has_symbols);
		}
	}
cleanup:
	if (elf)
		elf_end(elf);
	free(all);
	return found;
}

bool elf_find_string(int fd, const char *prefix, char *out, int len)
{
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;
	bool ok = false;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		goto cleanup;
	while (!ok && (scn = elf_nextscn(elf, scn))) {
		const char *name, *hit, *end, *v;
		Elf_Data *data;
		int i = 0;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".rodata"))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		end = (const char *)data->d_buf + data->d_size;
		/* The first hit may be a format string ("NCCL version %s"): want digits. */
		for (hit = data->d_buf; !ok && hit < end; hit++) {
			hit = memmem(hit, end - hit, prefix, strlen(prefix));
			if (!hit)
				break;
			v = hit + strlen(prefix);
			if (v >= end || *v < '0' || *v > '9')
				continue;
			for (i = 0; v < end && i < len - 1 && *v && *v != ' ' &&
			     *v != '+' && *v != '\n'; v++)
				out[i++] = *v;
			out[i] = '\0';
			ok = true;
		}
	}
cleanup:
	if (elf)
		elf_end(elf);
	return ok;
}

/* An exported symbol's (name, or a pattern) address, size and .dynsym index. */
static bool dynsym(Elf *elf, const char *name, GElf_Sym *out, size_t *index)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			const char *s;

			if (!gelf_getsym(d, (int)i, out) ||
			    !(s = elf_strptr(elf, sh.sh_link, out->st_name)) ||
			    (strchr(name, '*') ? !glob_matches(name, s) : strcmp(s, name)))
				continue;
			*index = i;
			return true;
		}
	}
	return false;
}

static Elf_Scn *section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *s;

		if (gelf_getshdr(scn, sh) && (s = elf_strptr(elf, shstrndx, sh->sh_name)) &&
		    !strcmp(s, name))
			return scn;
	}
	return NULL;
}

/*
 * The PLT entry that jumps to the symbol of .dynsym index sym: the n-th
 * JUMP_SLOT relocation's entry, 16 bytes each, in .plt.sec (IBT builds)
 * or after .plt's first; 0 if none.
 */
static uint64_t plt_entry(Elf *elf, size_t sym)
{
	GElf_Shdr rel, plt;
	Elf_Scn *scn = section(elf, ".rela.plt", &rel);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	bool sec;

	if (!d || !rel.sh_entsize)
		return 0;
	sec = section(elf, ".plt.sec", &plt) != NULL;
	if (!sec && !section(elf, ".plt", &plt))
		return 0;
	for (size_t i = 0; i < rel.sh_size / rel.sh_entsize; i++) {
		GElf_Rela r;

		if (gelf_getrela(d, (int)i, &r) && GELF_R_SYM(r.r_info) == sym)
			return plt.sh_addr + 16 * (sec ? i : i + 1);
	}
	return 0;
}

int elf_call_returns(int fd, const char *caller, const char *callee, uint64_t out[], int max)
{
	GElf_Sym from, to;
	size_t from_i, to_i;
	uint64_t via_plt, off;
	unsigned char *code = NULL;
	Elf *elf = NULL;
	int n = 0;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return 0;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !dynsym(elf, caller, &from, &from_i) ||
	    !from.st_size || from.st_shndx == SHN_UNDEF || !dynsym(elf, callee, &to, &to_i))
		goto cleanup;
	via_plt = plt_entry(elf, to_i);
	off = vaddr_to_offset(elf, from.st_value);
	code = malloc(from.st_size);
	if (!off || !code || pread(fd, code, from.st_size, (off_t)off) != (ssize_t)from.st_size)
		goto cleanup;
	for (uint64_t k = 0; k + 5 <= from.st_size && n < max; k++) {
		int32_t rel;
		uint64_t next = from.st_value + k + 5, target;

		if (code[k] != 0xe8)	/* call rel32 */
			continue;
		memcpy(&rel, code + k + 1, sizeof(rel));
		target = next + (int64_t)rel;
		if ((via_plt && target == via_plt) ||
		    (to.st_shndx != SHN_UNDEF && target == to.st_value))
			out[n++] = vaddr_to_offset(elf, next);
	}
cleanup:
	free(code);
	if (elf)
		elf_end(elf);
	return n;
}

bool elf_exported_object(int fd, const char *name, uint64_t *vaddr, uint64_t *size,
			 uint64_t *text_vaddr)
{
	GElf_Sym sym;
	GElf_Phdr ph;
	size_t idx, n;
	Elf *elf = NULL;
	bool ok = false;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !dynsym(elf, name, &sym, &idx) ||
	    sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
	    elf_getphdrnum(elf, &n))
		goto cleanup;
	for (size_t i = 0; i < n && !ok; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		*text_vaddr = ph.p_vaddr & ~(uint64_t)0xfff;
		ok = true;
	}
	*vaddr = sym.st_value;
	*size = sym.st_size;
cleanup:
	if (elf)
		elf_end(elf);
	return ok;
}
