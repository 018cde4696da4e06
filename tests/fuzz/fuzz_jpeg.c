/*
 * fuzz_jpeg.c - fuzz target: arbitrary bytes through gm_aug_sample (header, bomb
 * check, crop-window decode, CMYK conversion, resize, layout), in train and eval
 * mode, uint8, float32 and float16. Checks: returns 0 or a documented -errno with a message.
 */
#include <errno.h>
#include <stdlib.h>

#include "fuzz.h"
#include "goldminer/aug.h"

static struct gm_aug *augs[4];

static void setup(void)
{
	for (int i = 0; i < 4; i++) {
		struct gm_aug_spec s;
		gm_aug_spec_default(&s);
		s.size = 48; /* small output: the decode path is what is fuzzed */
		s.resize = 56;
		s.max_pixels = 1u << 22; /* a larger picture must be refused, not decoded */
		s.mode = i == 2 ? GM_AUG_EVAL : GM_AUG_TRAIN;
		s.out = i == 1 ? GM_OUT_F32_CHW : i == 3 ? GM_OUT_F16_CHW : GM_OUT_U8_HWC;
		if (gm_aug_create(&augs[i], &s))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char out[48 * 48 * 3 * 4];
	if (!augs[0])
		setup();
	for (int i = 0; i < 4; i++) {
		int rc = gm_aug_sample(augs[i], data, size, 7, 1, (uint64_t)size * 31 + (uint64_t)i,
				       out, NULL);
		if (rc == 0)
			continue;
		if (rc != -EBADMSG && rc != -ENODATA && rc != -E2BIG)
			abort(); /* -ENOMEM etc. would mean the limits do not hold */
		gm_fuzz_check_msg(gm_aug_errmsg(augs[i]), 512);
	}
	return 0;
}
