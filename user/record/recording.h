/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The recording's file, as its writer (record.c) and reader
 * (recording_read.c) both know it: docs/recording.md is the contract.
 */
#ifndef TB_RECORDING_H
#define TB_RECORDING_H

#define REC_APP_ID 0x74627066	/* SQLite application_id: "tbpf" */
#define REC_SCHEMA_VERSION 1	/* user_version: a reader reads up to its own */

#endif
