// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Empty programs on the kernel hooks `trainbpf serve` attaches for every
 * task of the node (bpf/trainbpf.bpf.c): what any design that hooks these
 * tracepoints pays before its first instruction. bench/sched_pipe.sh,
 * scenario E.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define EMPTY(hook) \
	SEC("tp_btf/" #hook) int floor_##hook(void *ctx) { return 0; }

EMPTY(sched_switch)
EMPTY(sched_waking)
EMPTY(sched_process_fork)
EMPTY(sched_process_exec)
EMPTY(sched_process_exit)
EMPTY(hrtimer_expire_entry)
EMPTY(hrtimer_expire_exit)
EMPTY(timer_expire_entry)
EMPTY(timer_expire_exit)
EMPTY(softirq_entry)
EMPTY(softirq_exit)
