/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * A checkpoint is the whole act (docs/phases.md): torch.save, then what the
 * thread does to the files it wrote: the write of what its buffer held
 * (flush), fsync, fdatasync, sync_file_range, close, the rename of one
 * to its final name (torch.save to a temporary name, os.replace), and the
 * open that truncates one for the next checkpoint. A job's
 * fsync after torch.save(state, f) was io in other: 72% of its time on its
 * own clock, 21% in our checkpoint.
 *
 * By file, not by time: inside a PyTorchStreamWriter's life each write a
 * thread makes to a regular file (not stdout or stderr, not a log opened
 * for appending) remembers it in the thread's slot (fd, inode, its name and
 * its directory: ckf[]). After the writer, such a syscall on one of them,
 * outside any other phase's bracket, is checkpoint for its duration: a
 * TB_BC_SAVE_IO bracket opens at its entry and closes at its exit, through
 * the phase events user space already replays. A close keeps the file for
 * a rename or a truncating open (fd -1); the rename forgets it.
 *
 * A rename's source, or an open's path, is resolved by the kernel after
 * the entry we see, so it is matched by name: its last component against the file's
 * name and the component before it against its directory's name, or, with
 * no directory in the path (or "."), against the directory itself (the
 * cwd, or olddfd's). Two directories of the same name holding files of the
 * same name could be taken one for the other.
 *
 * Syscall tracepoints (this kernel has no kprobes and no fentry): every
 * other task on the node pays one pointer test (task_slot), a traced thread
 * that remembers no file one byte's test. `serve` loads none of them.
 * Included by trainbpf.bpf.c after torch.bpf.h.
 */

#define TB_CK_NAME	64	/* bytes of a name hashed: longer ones by their first 64 */
#define TB_CK_PATH	256	/* a rename's source path; longer: not matched */

/* Scratch for a name or a path (the BPF stack is 512 bytes). */
struct tb_ck_buf {
	char b[TB_CK_PATH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tb_ck_buf);
} ck_scratch SEC(".maps");

/*
 * FNV-1a over b[from, to) (at most TB_CK_NAME bytes, to a NUL), and the
 * last two '/' of a path: loops through bpf_loop, whose callback is
 * verified once (a plain loop over a path's bytes, tracking where its
 * slashes are, passed the verifier's million instructions).
 */
struct tb_ck_scan {
	const char *b;
	int from, to;
	int last, prev;	/* the last '/' and the one before; -1: none */
	__u64 h;
};

static long ckpt_hash_byte(__u32 i, void *arg)
{
	struct tb_ck_scan *c = arg;
	int k = c->from + (int)i;
	char ch;

	if (k >= c->to || k < 0)
		return 1;
	ch = c->b[k & (TB_CK_PATH - 1)];
	if (!ch)
		return 1;
	c->h = (c->h ^ (__u8)ch) * 1099511628211ull;
	return 0;
}

static __always_inline __u64 ckpt_hash(const char *b, int from, int to)
{
	struct tb_ck_scan c = { .b = b, .from = from, .to = to, .h = 14695981039346656037ull };

	bpf_loop(TB_CK_NAME, ckpt_hash_byte, &c, 0);
	return c.h;
}

static long ckpt_slash(__u32 i, void *arg)
{
	struct tb_ck_scan *c = arg;

	if ((int)i >= c->to)
		return 1;
	if (c->b[i & (TB_CK_PATH - 1)] == '/') {
		c->prev = c->last;
		c->last = i;
	}
	return 0;
}

/* The hash of a dentry's name. */
static __always_inline __u64 dentry_hash(struct dentry *d, struct tb_ck_buf *buf)
{
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);

	if (bpf_probe_read_kernel_str(buf->b, TB_CK_NAME, name) <= 0)
		return 0;
	return ckpt_hash(buf->b, 0, TB_CK_NAME);
}

/* The entry for fd (open), or -1. No kernel read unless an fd matches. */
static __always_inline int ckpt_find_fd(const struct tb_slot *s, int fd)
{
	for (int i = 0; i < TB_NCKFILE; i++)
		if (s->ckf[i].inode && s->ckf[i].fd == fd)
			return i;
	return -1;
}

static __always_inline void ckpt_forget(struct tb_slot *s, int i)
{
	if (i < 0 || i >= TB_NCKFILE || !s->ckf[i].inode)
		return;
	s->ckf[i].inode = 0;
	if (s->ck_n)
		s->ck_n--;
}

/* Inside torch.save: t writes to fd. A regular file, not appended to: remember it. */
static __always_inline void ckpt_remember(struct tb_slot *s, struct task_struct *t, int fd)
{
	struct tb_ck_buf *buf;
	struct dentry *d;
	struct file *f;
	struct inode *ino;
	__u32 zero = 0;
	int i, at = -1;

	if (fd <= 2 || ckpt_find_fd(s, fd) >= 0)
		return;
	f = fd_file(t, fd);
	ino = f ? BPF_CORE_READ(f, f_inode) : NULL;
	if (!ino || (BPF_CORE_READ(ino, i_mode) & TB_S_IFMT) != TB_S_IFREG ||
	    (BPF_CORE_READ(f, f_flags) & TB_O_APPEND))
		return;
	buf = bpf_map_lookup_elem(&ck_scratch, &zero);
	if (!buf)
		return;
	/* The file's own (closed, opened again), else an empty entry, else one closed. */
	for (i = 0; i < TB_NCKFILE && at < 0; i++)
		if (s->ckf[i].inode == (__u64)ino)
			at = i;
	for (i = 0; i < TB_NCKFILE && at < 0; i++)
		if (!s->ckf[i].inode)
			at = i;
	for (i = 0; i < TB_NCKFILE && at < 0; i++)
		if (s->ckf[i].fd < 0)
			at = i;
	if (at < 0)
		at = fd & (TB_NCKFILE - 1);
	at &= TB_NCKFILE - 1;
	if (!s->ckf[at].inode)
		s->ck_n++;
	d = BPF_CORE_READ(f, f_path.dentry);
	s->ckf[at].inode = (__u64)ino;
	s->ckf[at].fd = fd;
	s->ckf[at].dir = (__u64)BPF_CORE_READ(d, d_parent);
	s->ckf[at].name = dentry_hash(d, buf);
	s->ckf[at].dir_name = dentry_hash(BPF_CORE_READ(d, d_parent), buf);
}

/*
 * The entry of the file fd names now, or -1. One whose fd now names
 * another file (closed unseen, dup2'ed over) is forgotten.
 */
static __always_inline int ckpt_find(struct tb_slot *s, struct task_struct *t, int fd)
{
	int i = ckpt_find_fd(s, fd);
	struct file *f;

	if (i < 0 || i >= TB_NCKFILE)
		return -1;
	f = fd_file(t, fd);
	if (f && (__u64)BPF_CORE_READ(f, f_inode) == s->ckf[i].inode)
		return i;
	ckpt_forget(s, i);
	return -1;
}

/* Whether a syscall now may be checkpoint: in no bracket but the user's own. */
static __always_inline bool ckpt_outside(struct tb_slot *s)
{
	struct tb_bracket *b = top_any(s);

	return !b || b->cls == TB_BC_OTHER;
}

/* The syscall under way is checkpoint, until its exit (ckpt_io_end). */
static __always_inline void ckpt_io_begin(struct tb_slot *s, __u64 key)
{
	__u64 now = bpf_ktime_get_ns();

	if (s->nbr >= TB_NBRACKET)
		return;
	write_begin(s);
	close_running(s, now);
	open_bracket(s, key, TB_BC_SAVE_IO, now);
	s->ck_io = 1;
	write_end(s);
}

static __always_inline void ckpt_io_end(void)
{
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	struct tb_bracket *b;
	__u64 now;

	if (!s || !s->ck_io)
		return;
	now = bpf_ktime_get_ns();
	write_begin(s);
	close_running(s, now);
	s->ck_io = 0;
	b = top_any(s);
	if (b && b->cls == TB_BC_SAVE_IO)
		pop(s, b, now);
	write_end(s);
}

/* A syscall on fd by traced thread s (t): remember, or switch to checkpoint. */
static __always_inline void ckpt_fd_op(struct tb_slot *s, struct task_struct *t, int fd,
				       enum tb_ck_op op)
{
	struct tb_bracket *b = top_any(s);
	int i;

	if (b && b->cls == TB_BC_SAVE) {
		/* In torch.save: its writes name its files; a close keeps one for a rename. */
		if (op == TB_CK_WRITE)
			ckpt_remember(s, t, fd);
		else if (op == TB_CK_CLOSE && (i = ckpt_find_fd(s, fd)) >= 0 && i < TB_NCKFILE)
			s->ckf[i].fd = -1;
		return;
	}
	if (!s->ck_n || !ckpt_outside(s))
		return;
	i = ckpt_find(s, t, fd);
	if (i < 0 || i >= TB_NCKFILE)
		return;
	if (op == TB_CK_CLOSE)
		s->ckf[i].fd = -1;
	ckpt_io_begin(s, fd);
}

/* The syscall tracepoints' side: a traced thread's slot, or return at once. */
static __always_inline int ckpt_fd_prog(int fd, enum tb_ck_op op)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct tb_slot *s = task_slot(t, NULL);

	if (s)
		ckpt_fd_op(s, t, fd, op);
	return 0;
}

/*
 * A path from directory dfd (a rename's source, a truncating open): the
 * entry of a remembered file it names (see the top), or -1.
 */
static __always_inline int ckpt_path_match(struct tb_slot *s, struct task_struct *t,
					     int dfd, const char *old)
{
	struct tb_ck_buf *buf;
	struct dentry *dir = NULL;
	struct file *f;
	__u64 name, dname = 0;
	__u32 zero = 0;
	struct tb_ck_scan scan = {};
	int n, last, prev;

	buf = bpf_map_lookup_elem(&ck_scratch, &zero);
	if (!buf)
		return -1;
	n = bpf_probe_read_user_str(buf->b, TB_CK_PATH, old);
	if (n <= 1 || n >= TB_CK_PATH)
		return -1;
	scan.b = buf->b;
	scan.to = n;
	scan.last = scan.prev = -1;
	bpf_loop(TB_CK_PATH, ckpt_slash, &scan, 0);
	last = scan.last;
	prev = scan.prev;
	name = ckpt_hash(buf->b, last + 1, n);
	if (last < 0 || (last == 1 && buf->b[0] == '.')) {
		/* "x" or "./x": in dfd's directory */
		if (dfd == TB_AT_FDCWD) {
			dir = BPF_CORE_READ(t, fs, pwd.dentry);
		} else {
			f = fd_file(t, dfd);
			dir = f ? BPF_CORE_READ(f, f_path.dentry) : NULL;
		}
		if (!dir)
			return -1;
	} else {
		dname = ckpt_hash(buf->b, prev + 1, last);
	}
	for (int i = 0; i < TB_NCKFILE; i++) {
		if (!s->ckf[i].inode || s->ckf[i].name != name)
			continue;
		if (dir ? s->ckf[i].dir == (__u64)dir : s->ckf[i].dir_name == dname)
			return i;
	}
	return -1;
}

static __always_inline int ckpt_rename_prog(int dfd, const char *old)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct tb_slot *s = task_slot(t, NULL);
	int i;

	if (!s || !s->ck_n || !ckpt_outside(s))
		return 0;
	i = ckpt_path_match(s, t, dfd, old);
	if (i < 0)
		return 0;
	ckpt_forget(s, i);
	ckpt_io_begin(s, 0);
	return 0;
}

/*
 * open(path, O_TRUNC) of a file an earlier checkpoint of the thread wrote,
 * kept (closed) in ckf[]: the next one starts by truncating it (freeing
 * the blocks of 10 MB: 4-10 ms on ext4 here), inside the job's own timing
 * of its checkpoint. The entry stays: torch.save's writes find it again.
 */
static __always_inline int ckpt_open_prog(int dfd, const char *path, __u64 flags)
{
	struct task_struct *t;
	struct tb_slot *s;

	if (!(flags & TB_O_TRUNC))
		return 0;
	t = bpf_get_current_task_btf();
	s = task_slot(t, NULL);
	if (!s || !s->ck_n || !ckpt_outside(s) || ckpt_path_match(s, t, dfd, path) < 0)
		return 0;
	ckpt_io_begin(s, 0);
	return 0;
}

/*
 * One program for each kind of call, attached to every syscall of that
 * kind (user/acquire/tracer.c, ckpt_attach_more: the SEC's tracepoint is
 * the skeleton's attach, cookie 0; the others are the tracer's, each with
 * its cookie, TB_CKC_* in trainbpf.h). The verifier checks each program
 * whole, ~36k instructions with the bracket and interval code inlined
 * (~42 ms here): one program per syscall made 23 and 1.1 s of every start.
 */

/* write(2) is on_write's (output.bpf.h). writev, pwrite64, the syncs, close. */
SEC("tracepoint/syscalls/sys_enter_writev")
int on_fd_op(struct trace_event_raw_sys_enter *ctx)
{
	__u64 op = bpf_get_attach_cookie(ctx) & TB_CKC_OP;

	return ckpt_fd_prog(ctx->args[0], op == TB_CK_SYNC ? TB_CK_SYNC :
					  op == TB_CK_CLOSE ? TB_CK_CLOSE : TB_CK_WRITE);
}

/* renameat, renameat2 (the same first two arguments); rename (TB_CKC_CWD). */
SEC("tracepoint/syscalls/sys_enter_renameat")
int on_rename_op(struct trace_event_raw_sys_enter *ctx)
{
	if (bpf_get_attach_cookie(ctx) & TB_CKC_CWD)
		return ckpt_rename_prog(TB_AT_FDCWD, (const char *)ctx->args[0]);
	return ckpt_rename_prog(ctx->args[0], (const char *)ctx->args[1]);
}

/* openat; open (TB_CKC_CWD). */
SEC("tracepoint/syscalls/sys_enter_openat")
int on_open_op(struct trace_event_raw_sys_enter *ctx)
{
	if (bpf_get_attach_cookie(ctx) & TB_CKC_CWD)
		return ckpt_open_prog(TB_AT_FDCWD, (const char *)ctx->args[0], ctx->args[1]);
	return ckpt_open_prog(ctx->args[0], (const char *)ctx->args[1], ctx->args[2]);
}

/*
 * Their exits (write's too: a write to a file torch.save wrote): the
 * checkpoint syscall, if one, is over. All twelve, one program.
 */
SEC("tracepoint/syscalls/sys_exit_write")
int on_ckpt_done(struct trace_event_raw_sys_exit *ctx)
{
	ckpt_io_end();
	return 0;
}
