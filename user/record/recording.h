/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The recording's file, as its writer (record.c) and reader
 * (recording_read.c) both know it: docs/recording.md is the contract.
 */
#ifndef TB_RECORDING_H
#define TB_RECORDING_H

#define REC_APP_ID 0x74627066	/* SQLite application_id: "tbpf" */
/*
 * user_version: a reader reads up to its own. 2 added what the reports
 * cannot recompute from the flushes (epoch_procs, nccl_comms, gpu_procs,
 * the epochs' steps); a version-1 file is read the old way. 3 added the
 * training phases (phase_times, phase_steps, phase_events); a version-2
 * file has none of them, or the first two only. 4 added the GPU's own
 * side (record_gpu.c: gpu_devices, gpu_windows, gpu_samples, meta
 * gpu_metrics); an older file has none, and its reports no GPU line.
 * 5 added the workers' start-up (phase_times.startup); 6 each finding's
 * cost (diagnosis.cost: an older file's from its value, or 0).
 * 7 added the communication phase (epochs.ph_communication, phase_times
 * and phase_steps rows named communication, phase_events.phase 13); an
 * older file has none: its reports show communication 0.
 * 8 added the trainer threads' setup and teardown (phase_times and
 * phase_steps rows named setup and teardown: their made-of, parts of the
 * other row, and their wall time); an older file has none: its reports
 * show setup and teardown 0, that time in other's made-of and in no
 * phase's wall time, as its version wrote them.
 * 9 added optimizer steps (phase_steps.osteps and the o_* columns, steps
 * rows of source optimizer, meta steps_loop_done_ns, steps_optim_done_ns,
 * steps_optim_multi); an older file's table counts micro-batches, and its
 * run leaves the loop's last step out as pending.
 * 10 added the stall (table stall). 11 the NCCL data calls per
 * communicator (nccl_comms.calls, bytes, color) and a stalled rank's lag
 * on one (stall.behind, behind_comm); an older file's are 0.
 * 12 added the Python stacks of --functions (py_funcs, py_stacks,
 * py_time, py_notes, py_roles; meta py_*); an older file, or one recorded
 * without --functions, has none: its reports have no functions section.
 * 13 added the record_function brackets of no phase (scopes), for the
 * trace; an older file's trace has no such tracks.
 */
#define REC_SCHEMA_VERSION 14

#endif
