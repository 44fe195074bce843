/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * What a traced job writes, read at the write(2): epoch and step markers
 * (trainbpf_mark.h: "TRAINBPF epoch 3" to any fd) and, when user space
 * wants epoch lines, the head of each write to stdout and stderr. The job's
 * output is never redirected, so reading it cannot slow the job down. Every
 * other writer on the machine pays one pointer test (task_slot). A syscall
 * tracepoint, since this kernel has no kprobes and no fentry.
 * Included by trainbpf.bpf.c, after state.bpf.h.
 */

/* Bit fd: send the head of writes to fd (1 stdout, 2 stderr). Set before load. */
const volatile __u32 tb_text_fds = 0;

static __always_inline int is_marker(const char *head)
{
	const char want[] = TB_MARK_PREFIX;

	for (int i = 0; i < sizeof(want) - 1; i++)
		if (head[i] != want[i])
			return 0;
	return 1;
}

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	unsigned int fd = ctx->args[0];
	const char *buf = (const char *)ctx->args[1];
	__u64 count = ctx->args[2];
	char head[sizeof(TB_MARK_PREFIX) - 1];
	struct tb_slot *s = task_slot(t, NULL);
	struct tb_text_event *e;
	__u32 type, n, wake;

	if (!s)
		return 0;
	ckpt_fd_op(s, t, fd, TB_CK_WRITE);	/* a file torch.save wrote (ckpt_files.bpf.h) */
	if (count >= sizeof(head) && !bpf_probe_read_user(head, sizeof(head), buf) &&
	    is_marker(head))
		type = TB_EV_MARK;
	else if (fd < 32 && (tb_text_fds & (1u << fd)))
		type = TB_EV_TEXT;
	else
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return 0;
	}
	n = count < TB_TEXT_LEN ? count : TB_TEXT_LEN - 1;
	e->type = type;
	e->pid = t->tgid;
	e->tid = t->pid;
	e->fd = fd;
	e->ts = bpf_ktime_get_ns();
	n &= TB_TEXT_LEN - 1;
	if (bpf_probe_read_user(e->text, n, buf))
		n = 0;
	e->len = n;
	/*
	 * An epoch marker ("TRAINBPF e...", the other kind is "step") wakes
	 * user space, so that the totals it splits are read at once, not a
	 * tick later. A wakeup costs the writer ~8 us (bench/write_cost.sh):
	 * lines and step markers wait for the tick.
	 */
	wake = type == TB_EV_MARK && n > sizeof(head) && e->text[sizeof(head)] == 'e';
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}
