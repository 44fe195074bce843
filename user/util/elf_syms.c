// SPDX-License-Identifier: BSD-3-Clause
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elf_syms.h"

struct name_idx {
	const char *name;
	int idx;
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

static int scan_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
		       const struct name_idx *sorted, int n, uint64_t offs[],
		       bool *any)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	int found = 0;

	for (size_t i = 0; data && i < count; i++) {
		struct name_idx key, *hit;
		GElf_Sym sym;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
			continue;
		*any = true;
		key.name = elf_strptr(elf, sh->sh_link, sym.st_name);
		/* Every name we probe starts with "cu" or "nccl". */
		if (!key.name || (key.name[0] != 'c' && key.name[0] != 'n'))
			continue;
		hit = bsearch(&key, sorted, n, sizeof(*sorted), cmp_name);
		if (!hit || offs[hit->idx])
			continue;
		offs[hit->idx] = vaddr_to_offset(elf, sym.st_value);
		found += offs[hit->idx] != 0;
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
	struct name_idx *sorted = calloc(n, sizeof(*sorted));
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf *elf = NULL;
	int found = -1;

	memset(info, 0, sizeof(*info));
	memset(offs, 0, n * sizeof(*offs));
	if (!sorted || elf_version(EV_CURRENT) == EV_NONE)
		goto cleanup;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto cleanup;
	for (int i = 0; i < n; i++)
		sorted[i] = (struct name_idx){ names[i], i };
	qsort(sorted, n, sizeof(*sorted), cmp_name);
	found = 0;
	/* .dynsym first: a stripped library still exports its API there. */
	for (int pass = 0; pass < 2; pass++) {
		while ((scn = elf_nextscn(elf, scn))) {
			if (!gelf_getshdr(scn, &sh))
				continue;
			if (pass == 0 && sh.sh_type == SHT_DYNAMIC)
				read_soname(elf, scn, &sh, info);
			if (sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				found += scan_symtab(elf, scn, &sh, sorted, n, offs,
						     &info->has_symbols);
		}
	}
cleanup:
	if (elf)
		elf_end(elf);
	free(sorted);
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
