/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the stall model (stall.h) needs of each rank at a refresh, read
 * from the BPF slots as they are now: its trainer thread's state, wait,
 * phase and probed call, its other threads on the network, its DataLoader
 * workers' main threads, its progress (phases.h) and NCCL collectives.
 */
#ifndef TB_STALL_OBSERVE_H
#define TB_STALL_OBSERVE_H

#include "stall.h"
#include "tracer.h"

/*
 * The ranks alive in ses's job (the one tr fills), one observation each, into *out (grown;
 * free it); their count. A rank is a process, not a DataLoader worker,
 * whose loop thread has made progress (phases.h: a fetch, a step; else
 * steps of its CUDA/NCCL call period): roles can flip a spawn's ranks
 * and their parent while workers start. With labels, each names its training job (serve);
 * without, all are one job.
 */
struct session;
int stall_observe(const struct tracer *tr, const struct session *ses, bool labels,
		  struct stall_obs **out, int *cap);

#endif
