// SPDX-License-Identifier: BSD-3-Clause
/*
 * user/model/nccl_ras.c, nccl_ras_json.c: RAS replies shaped as NCCL prints
 * them (the excerpts of NCCL's docs/userguide troubleshooting/ras.rst,
 * whose lines come from src/ras/client_support.cc), and the addresses a
 * job may name.
 */
#include <check.h>
#include <string.h>
#include "nccl_ras.h"

/* ras.rst's "artificially creating a problem" excerpt, with the summary before it. */
static const char text_incomplete[] =
	"NCCL version 2.26.2 compiled with CUDA 12.8\n"
	"CUDA runtime version 12080, driver version 12080\n\n"
	"Job summary\n===========\n\n"
	"  Nodes  Processes         GPUs  Processes     GPUs\n"
	"(total)   per node  per process    (total)  (total)\n"
	"      4          8            1         32       32\n"
	"\nCommunicators... (2.050s)\n=============\n\n"
	"Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
	"    #  in group  per comm  per node  per comm  in group\n"
	"    0         1         4       7-8        32        32   RUNNING  INCOMPLETE\n"
	"\nErrors\n======\n\n"
	"INCOMPLETE\n  Missing communicator data from 1 job process\n"
	"  Process 3487984 on node 172.16.64.213 managing GPU 5\n\n"
	"#0-0 (cf264af53edbe986) INCOMPLETE\n  Missing communicator data from 1 rank\n"
	"  The missing rank: 21\n\n"
	"Warnings\n========\n\n"
	"TIMEOUT\n  Encountered 2 communication timeouts while gathering communicator data\n\n";

/* ras.rst's tear-down excerpt (2.24's UNKNOWN), with a DEAD error. */
static const char text_mixed[] =
	"NCCL version 2.24.3 compiled with CUDA 12.6\n\n"
	"Communicators... (0.000s)\n=============\n\n"
	"Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
	"    #  in group  per comm  per node  per comm  in group\n"
	"    0         1         4       1-2        32        32  FINALIZE  MISMATCH\n"
	"    1         7         4         1         4        28   RUNNING      OK\n"
	"    2         1         4         1         4         4      INIT      OK\n"
	"\nErrors\n======\n\n"
	"DEAD\n  1 job process is considered dead (unreachable via the RAS network)\n"
	"  Process 3487984 on node 172.16.64.213 managing GPU 5\n\n";

START_TEST(text_gives_the_job_wide_view)
{
	struct ras_view v;
	char why[256];

	ck_assert_int_eq(ras_parse_text(text_incomplete, strlen(text_incomplete), &v, why,
					 sizeof(why)), 0);
	ck_assert_str_eq(v.version, "2.26.2");
	ck_assert_int_eq(v.nodes, 4);
	ck_assert_int_eq(v.processes, 32);
	ck_assert_int_eq(v.gpus, 32);
	ck_assert_int_eq(v.comms, 1);
	ck_assert_int_eq(v.comms_status[RAS_ST_RUNNING], 1);
	ck_assert_int_eq(v.comms_flag[RAS_FL_INCOMPLETE], 1);
	ck_assert_int_eq(v.comms_flag[RAS_FL_MISMATCH], 0);
	ck_assert_int_eq(v.procs_missing, 1);
	ck_assert_int_eq(v.ranks_missing, 1);
	ck_assert_int_eq(v.timeouts, 2);
	ck_assert(v.collection_s > 2.04 && v.collection_s < 2.06);
}
END_TEST

START_TEST(text_groups_sum_by_state_and_flag)
{
	struct ras_view v;
	char why[256];

	ck_assert_int_eq(ras_parse_text(text_mixed, strlen(text_mixed), &v, why, sizeof(why)), 0);
	ck_assert_int_eq(v.nodes, -1);		/* no job summary: not said */
	ck_assert_int_eq(v.comms, 9);
	ck_assert_int_eq(v.comms_status[RAS_ST_FINALIZE], 1);
	ck_assert_int_eq(v.comms_status[RAS_ST_RUNNING], 7);
	ck_assert_int_eq(v.comms_status[RAS_ST_INIT], 1);
	ck_assert_int_eq(v.comms_flag[RAS_FL_MISMATCH], 1);
	ck_assert_int_eq(v.procs_dead, 1);
	ck_assert_int_eq(v.procs_missing, 0);
}
END_TEST

START_TEST(text_not_nccls_is_refused)
{
	static const char bad[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
	static const char row[] = "Communicators... (0.1s)\n"
		"    #  in group  per comm  per node  per comm  in group\n"
		"    0         1         4         1         4         4   SLEEPING  OK\n";
	struct ras_view v;
	char why[256];

	ck_assert_int_eq(ras_parse_text(bad, strlen(bad), &v, why, sizeof(why)), -1);
	ck_assert_int_eq(ras_parse_text(row, strlen(row), &v, why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "SLEEPING"));
}
END_TEST

/* ras.rst's JSON sample (NCCL 2.29.1) */
static const char json_sample[] =
	"{\n  \"nccl_version\": \"2.29.1\",\n  \"cuda_runtime_version\": 13000,\n"
	"  \"cuda_driver_version\": 13000,\n  \"timestamp\": \"2025-12-19 13:06:53\",\n"
	"  \"communicators_count\": 1,\n  \"communicators\": [\n    {\n"
	"      \"hash\": \"0xae94423cfbb2ef4a\",\n"
	"      \"secondary_hash\": \"0xb7e7187447156001:0xb8242ed28a71381e\",\n"
	"      \"size\": 2,\n      \"ranks_count\": 1,\n      \"missing_ranks_count\": 1,\n"
	"      \"ranks\": [\n        {\n          \"rank\": 0,\n"
	"          \"host\": \"172.16.64.245\",\n          \"pid\": 1524344,\n"
	"          \"cuda_dev\": 0,\n          \"nvml_dev\": 0,\n          \"status\": {\n"
	"            \"init_state\": 0,\n            \"async_error\": 0,\n"
	"            \"finalize_called\": false,\n            \"destroy_flag\": false,\n"
	"            \"abort_flag\": false\n          },\n"
	"          \"collective_counts\": {\n            \"Broadcast\": 0,\n"
	"            \"Reduce\": 0,\n            \"AllGather\": 0,\n"
	"            \"ReduceScatter\": 0,\n            \"AllReduce\": 0\n          }\n"
	"        }\n      ],\n      \"missing_ranks\": [\n        {\n"
	"          \"rank\": 1,\n          \"host\": \"172.16.64.245\",\n"
	"          \"pid\": 1524345,\n          \"cuda_dev\": 1,\n          \"nvml_dev\": 1,\n"
	"          \"status\": {\n            \"unresponsive\": true,\n"
	"            \"considered_dead\": false\n          }\n        }\n      ]\n    }\n  ],\n"
	"  \"ras\": {\n    \"collection_time_sec\": 0.000,\n    \"timeouts_count\": 0\n  }\n}\n";

START_TEST(json_gives_the_same_view)
{
	struct ras_view v;
	char why[256];

	ck_assert_int_eq(ras_parse_json(json_sample, strlen(json_sample), &v, why, sizeof(why)), 0);
	ck_assert_str_eq(v.version, "2.29.1");
	ck_assert_int_eq(v.comms, 1);
	ck_assert_int_eq(v.comms_status[RAS_ST_RUNNING], 1);
	ck_assert_int_eq(v.comms_flag[RAS_FL_INCOMPLETE], 1);
	ck_assert_int_eq(v.comms_flag[RAS_FL_MISMATCH], 0);
	ck_assert_int_eq(v.ranks_missing, 1);
	ck_assert_int_eq(v.procs_missing, 1);
	ck_assert_int_eq(v.procs_dead, 0);
	ck_assert_int_eq(v.nodes, 1);
	ck_assert_int_eq(v.processes, 1);
	ck_assert_int_eq(v.gpus, 1);
}
END_TEST

START_TEST(json_cut_or_miscounted_is_refused)
{
	struct ras_view v;
	char why[256], buf[sizeof(json_sample)];

	ck_assert_int_eq(ras_parse_json(json_sample, strlen(json_sample) / 2, &v, why,
					sizeof(why)), -1);
	memcpy(buf, json_sample, sizeof(buf));
	*strstr(buf, "\"communicators_count\": 1") = ' ';	/* a key no longer a string */
	ck_assert_int_eq(ras_parse_json(buf, strlen(buf), &v, why, sizeof(why)), -1);
	memcpy(buf, json_sample, sizeof(buf));
	strstr(buf, "\"communicators_count\": 1")[23] = '3';
	ck_assert_int_eq(ras_parse_json(buf, strlen(buf), &v, why, sizeof(why)), -1);
}
END_TEST

START_TEST(only_loopback_addresses)
{
	static const char *const ok[] = { "localhost:28028", "127.0.0.1:1", "127.1.2.3:65535",
					  "[::1]:28028" };
	static const char *const bad[] = { "10.0.0.1:28028", "0.0.0.0:28028", "example.com:28028",
					   "[::]:28028", "localhost", "localhost:0",
					   "localhost:65536", "127.0.0.1:28028x", "[::1]28028" };
	struct ras_addr a;
	char why[256];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_msg(!ras_addr_parse(ok[i], &a, why, sizeof(why)), "%s", ok[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(ras_addr_parse(bad[i], &a, why, sizeof(why)), "%s", bad[i]);
	ck_assert(!ras_addr_parse(NULL, &a, why, sizeof(why)));
	ck_assert_int_eq(a.port, 28028);
	ck_assert_int_eq(a.family, 0);
}
END_TEST

START_TEST(versions_compare)
{
	ck_assert(ras_version_at_least("2.24.3", 2, 24, 0));
	ck_assert(ras_version_at_least("2.27.3+cuda13.0", 2, 24, 0));
	ck_assert(!ras_version_at_least("2.23.4+cuda12.6", 2, 24, 0));
	ck_assert(!ras_version_at_least("2.28.3", 2, 28, 7));
	ck_assert(ras_version_at_least("2.28.7", 2, 28, 7));
	ck_assert(ras_version_at_least("3.0.0", 2, 28, 7));
	ck_assert(!ras_version_at_least("", 2, 24, 0));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nccl_ras");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, text_gives_the_job_wide_view);
	tcase_add_test(tc, text_groups_sum_by_state_and_flag);
	tcase_add_test(tc, text_not_nccls_is_refused);
	tcase_add_test(tc, json_gives_the_same_view);
	tcase_add_test(tc, json_cut_or_miscounted_is_refused);
	tcase_add_test(tc, only_loopback_addresses);
	tcase_add_test(tc, versions_compare);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
