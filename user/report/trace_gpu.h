/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPU's readings of a recording as counter tracks of the Chrome trace (trace_export.c). */
#ifndef TB_TRACE_GPU_H
#define TB_TRACE_GPU_H

#include <stdint.h>
#include "json_writer.h"
#include "recording_read.h"

/*
 * Writes the tracks into the open traceEvents array, times from t0; the
 * readings written, or -1 and a line in err. A recording before schema 4,
 * or without NVML, has none: 0.
 */
long trace_gpu_tracks(struct jw *j, struct recording *r, uint64_t t0, char *err, size_t errlen);

#endif
