/* SPDX-License-Identifier: BSD-3-Clause */
/* The one clock: CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns. */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <stdint.h>

uint64_t now_ns(void);

#endif
