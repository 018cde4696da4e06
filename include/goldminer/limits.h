/*
 * limits.h - the bounds that the library enforces and the commands check, stated
 * once. A command's usage error and the library's -EINVAL quote the same number.
 *
 * Why these values: 256 workers is more than the cores of any host we target and
 * bounds the coordinator's tables; a batch of 65,536 samples is past any training
 * batch on one GPU and keeps slot offsets far from 32-bit overflow; image sides of
 * 8..4096 px bound one sample's bytes (4096^2 x 3 x 4 = 192 MiB float32).
 */
#ifndef GOLDMINER_LIMITS_H
#define GOLDMINER_LIMITS_H

#define GM_MAX_WORKERS	256   /* worker processes of one job, and --cpus */
#define GM_MAX_BATCH	65536 /* samples per batch */
#define GM_MIN_SIZE	8     /* output image side, px */
#define GM_MAX_SIZE	4096
#define GM_MIN_SLOTS	4 /* ring slots */
#define GM_MAX_SLOTS	1024
#define GM_MAX_EPOCHS	1000000 /* bench --epochs */
#define GM_MAX_CHAOS_MS 3600000 /* bench --chaos-kill-ms */
/* A worker not made this long after its fork is killed and another started
 * (pool.c, the start watch): a fork can inherit a lock another thread of the
 * parent held (GCC 12's ASan allocator has no fork handlers), and the child then
 * waits for ever; generous, since a worker pre-faults its view of the ring. */
#define GM_POOL_START_MS 30000

/* Lending to peers (node --lend-root, remote.h): at most 16 roots; a dataset a
 * peer names is indexed within GM_LEND_INDEX_MS (--lend-index-ms, at most
 * GM_LEND_MAX_INDEX_MS) reading at most GM_LEND_FILES directory entries and
 * shard members (--lend-max-files): ImageNet-21k's 14.2 M files fit, /usr-sized
 * walks stop. */
#define GM_LEND_MAX_ROOTS    16
#define GM_LEND_INDEX_MS     120000
#define GM_LEND_MAX_INDEX_MS 3600000
#define GM_LEND_FILES	     16777216

#endif
