/*
 * A function whose result shows a byte of its code changed: magic returns
 * 0x91919190, the immediate of its first instruction. Built twice, as the
 * same code at the same offsets: libclean.so, and libbait.so, which also
 * names the middle of that instruction cudaStreamSynchronize. A uprobe put
 * there (an int3 over the immediate's first byte) makes magic return
 * 0x919191cc: test_shared_node.py checks a process's own results, not only
 * what trainbpf says it probed.
 */
	.text
	.globl	magic
	.type	magic, @function
magic:
	movl	$0x91919190, %eax
	ret
	.size	magic, .-magic
#ifdef BAIT
	.globl	cudaStreamSynchronize
	.type	cudaStreamSynchronize, @function
	.set	cudaStreamSynchronize, magic + 1
	.size	cudaStreamSynchronize, 4
#endif
	.section .note.GNU-stack, "", @progbits
