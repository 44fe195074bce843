/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A process's place in a distributed job, as its launcher wrote it into its
 * environment (torchrun's RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID,
 * MASTER_ADDR:MASTER_PORT; Slurm's SLURM_PROCID, SLURM_LOCALID,
 * SLURM_NTASKS, SLURM_JOB_ID) or its cgroup (a Kubernetes pod), into
 * proc_rec.labels. `trainbpf serve` labels its metrics with them.
 */
#ifndef TB_LABELS_H
#define TB_LABELS_H

#include <stdbool.h>
#include "job.h"

/*
 * Reads the labels of the live processes that have none yet, and again,
 * a few times, of those whose environment had no rank: a child read
 * between its fork and its exec shows its parent's environment.
 */
/* trainers_only: a recording names its job by its trainers' labels alone. */
void labels_refresh(struct job *job, const char *proc_root, bool trainers_only);

/* One process's labels now, into l (l->reads counts the reads). */
void labels_read(const char *root, pid_t pid, struct proc_labels *l);

/* The job id in a Kubernetes cgroup path ("pod" and its uid), into out; 0 if found. */
int labels_pod_of(const char *cgroup, char *out, size_t len);

#endif
