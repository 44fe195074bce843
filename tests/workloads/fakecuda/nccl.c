// SPDX-License-Identifier: BSD-3-Clause
/*
 * nccl.c - stand-in for NCCL, libnccl.so.2 (see fakecuda.h). Collectives
 * and p2p calls block as fakenccl_set_block() says; inside a group
 * (ncclGroupStart/End, per thread, nesting) they are queued and the
 * outermost ncclGroupEnd blocks once. Communicator creation blocks too
 * (a bootstrap). Calls with no communicator fail with ncclInvalidArgument
 * at once. As in NCCL, pncclX is the function and ncclX a weak alias of it.
 */
#include <stdlib.h>
#include <string.h>
#include "fakecuda.h"
#include "block.h"

#define ncclSuccess 0
#define ncclInvalidArgument 4
#define NCCL_SPLIT_NOCOLOR -1

#define ALIAS(name) \
	extern __typeof(p##name) name __attribute__((weak, alias("p" #name)))

/* As in NCCL's .rodata, for whoever looks for the version in the file. */
#ifndef FAKE_NCCL_BANNER	/* other versions: tests/workloads/Makefile's libnccl variants */
#define FAKE_NCCL_BANNER "NCCL version 2.27.3+cuda13.0"
#endif
__attribute__((used)) static const char banner[] = FAKE_NCCL_BANNER;

struct ncclComm {
	int rank, nranks;
	ncclUniqueId id;
};

static struct fake_block g_block;
static __thread int group_depth, group_pending;

long long fakenccl_last_block_ns(void)
{
	return fake_last_start;
}

long long fakenccl_blocked_ns(void)
{
	return fake_blocked;
}

void fakenccl_set_block(int mode, long long ns)
{
	g_block.mode = mode;
	g_block.ns = ns;
}

/* One collective or p2p operation on comm. */
static ncclResult_t op(ncclComm_t comm)
{
	if (!comm)
		return ncclInvalidArgument;
	if (group_depth > 0)
		group_pending++;
	else
		fake_block_for(&g_block);
	return ncclSuccess;
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			    ncclDataType_t datatype, ncclRedOp_t o, ncclComm_t comm,
			    cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)o; (void)stream;
	return op(comm);
}
ALIAS(ncclAllReduce);

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			    ncclDataType_t datatype, int root, ncclComm_t comm,
			    cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)root; (void)stream;
	return op(comm);
}
ALIAS(ncclBroadcast);

/*
 * In place: NCCL's ncclBcast is a call to ncclBroadcast, and so is ours (a
 * real call: the stand-ins are built with -fno-optimize-sibling-calls).
 */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
			ncclComm_t comm, cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
ALIAS(ncclBcast);

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			 ncclDataType_t datatype, ncclRedOp_t o, int root, ncclComm_t comm,
			 cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)o; (void)root;
	(void)stream;
	return op(comm);
}
ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)sendcount; (void)datatype; (void)stream;
	return op(comm);
}
ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				ncclDataType_t datatype, ncclRedOp_t o, ncclComm_t comm,
				cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)recvcount; (void)datatype; (void)o; (void)stream;
	return op(comm);
}
ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)stream;
	return op(comm);
}
ALIAS(ncclAlltoAll);

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
		       int peer, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff; (void)count; (void)datatype; (void)peer; (void)stream;
	return op(comm);
}
ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	(void)recvbuff; (void)count; (void)datatype; (void)peer; (void)stream;
	return op(comm);
}
ALIAS(ncclRecv);

ncclResult_t pncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}
ALIAS(ncclGroupStart);

ncclResult_t pncclGroupEnd(void)
{
	if (group_depth <= 0)
		return ncclInvalidArgument;
	if (--group_depth == 0 && group_pending) {
		group_pending = 0;
		fake_block_for(&g_block);
	}
	return ncclSuccess;
}
ALIAS(ncclGroupEnd);

static ncclComm_t new_comm(int rank, int nranks, const ncclUniqueId *id)
{
	ncclComm_t c = calloc(1, sizeof(*c));

	if (c) {
		c->rank = rank;
		c->nranks = nranks;
		if (id)
			c->id = *id;
	}
	return c;
}

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	fake_block_for(&g_block);
	*comm = new_comm(rank, nranks, &commId);
	return *comm ? ncclSuccess : 1;	/* ncclUnhandledCudaError... any error */
}
ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
				     int rank, ncclConfig_t *config)
{
	(void)config;
	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	fake_block_for(&g_block);
	*comm = new_comm(rank, nranks, &commId);
	return *comm ? ncclSuccess : 1;
}
ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	(void)devlist;
	if (!comm || ndev < 1)
		return ncclInvalidArgument;
	fake_block_for(&g_block);
	for (int i = 0; i < ndev; i++)
		if (!(comm[i] = new_comm(i, ndev, NULL)))
			return 1;
	return ncclSuccess;
}
ALIAS(ncclCommInitAll);

/* Every rank is taken to pass the same color: the new one has the parent's size. */
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			    ncclConfig_t *config)
{
	(void)config;
	if (!comm || !newcomm || key < 0 || key >= comm->nranks)
		return ncclInvalidArgument;
	fake_block_for(&g_block);
	*newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : new_comm(key, comm->nranks, &comm->id);
	return ncclSuccess;
}
ALIAS(ncclCommSplit);

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclInvalidArgument;
	free(comm);
	return ncclSuccess;
}
ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclInvalidArgument;
	free(comm);
	return ncclSuccess;
}
ALIAS(ncclCommAbort);

ncclResult_t pncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = FAKE_NCCL_VERSION;
	return ncclSuccess;
}
ALIAS(ncclGetVersion);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}
ALIAS(ncclCommUserRank);

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}
ALIAS(ncclCommCount);
