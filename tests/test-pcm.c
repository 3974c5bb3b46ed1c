/* SPDX-License-Identifier: MIT */
/* Tests for sources/pcm.c: every format's byte order and sign, the difference of the first two
 * channels (and the first alone in mono), msbits moving the sampled byte above the padding, a
 * duplicated mono signal giving only zeros, and layouts out of range refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../sources/pcm.h"
#include "macro.h"
#include "splitmix64.h"

static void extract(enum eb_pcm_format f, unsigned channels, unsigned msbits, const uint8_t *in,
                    size_t n, const uint8_t *expect)
{
	struct eb_pcm_layout l = {.format = f, .channels = channels, .msbits = msbits};
	uint8_t out[16];
	size_t fb;

	assert_true(n <= sizeof(out));
	assert_int_equal(eb_pcm_frame_bytes(&l, &fb), 0);
	assert_int_equal(fb, eb_pcm_format_bytes(f) * channels);
	memset(out, 0xaa, sizeof(out));
	eb_pcm_extract(&l, in, n, out);
	assert_memory_equal(out, expect, n);
	/* Nothing past the n samples asked for. */
	for (size_t i = n; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xaa);
}

static void test_mono(void **state)
{
	(void)state;
	/* U8 is offset binary: 0x80 is 0, 0x7f is -1. */
	extract(EB_PCM_U8, 1, 0, (const uint8_t[]){0x80, 0x7f, 0x81, 0x00}, 4,
	        (const uint8_t[]){0x00, 0xff, 0x01, 0x80});
	/* S16: the low byte, whichever end it is stored at. */
	extract(EB_PCM_S16_LE, 1, 0, (const uint8_t[]){0x34, 0x12, 0xff, 0xff}, 2,
	        (const uint8_t[]){0x34, 0xff});
	extract(EB_PCM_S16_BE, 1, 0, (const uint8_t[]){0x12, 0x34, 0xff, 0xfe}, 2,
	        (const uint8_t[]){0x34, 0xfe});
	/* S24_LE's fourth byte is padding: ignored. */
	extract(EB_PCM_S24_LE, 1, 0, (const uint8_t[]){0x56, 0x34, 0x12, 0x99}, 1,
	        (const uint8_t[]){0x56});
	extract(EB_PCM_S24_3LE, 1, 0, (const uint8_t[]){0x56, 0x34, 0x12, 0x01, 0x00, 0x80}, 2,
	        (const uint8_t[]){0x56, 0x01});
	extract(EB_PCM_S32_LE, 1, 0, (const uint8_t[]){0x78, 0x56, 0x34, 0x12}, 1,
	        (const uint8_t[]){0x78});
}

static void test_stereo_difference(void **state)
{
	(void)state;
	/* 0x1234 - 0x1230 = 4; 0x0001 - 0x0003 = -2 = 0xfe; 100 - (-100) = 200 = 0xc8. */
	extract(
	    EB_PCM_S16_LE, 2, 0,
	    (const uint8_t[]){0x34, 0x12, 0x30, 0x12, 0x01, 0x00, 0x03, 0x00, 100, 0, 0x9c, 0xff},
	    3, (const uint8_t[]){0x04, 0xfe, 0xc8});
	/* A third and fourth channel play no part. */
	extract(EB_PCM_S16_BE, 4, 0, (const uint8_t[]){0, 9, 0, 2, 0x55, 0x55, 0x66, 0x66}, 1,
	        (const uint8_t[]){0x07});
	/* The difference is taken before the low byte: a borrow from above shows. */
	extract(EB_PCM_S32_LE, 2, 0,
	        (const uint8_t[]){0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00}, 1,
	        (const uint8_t[]){0xff});
}

static void test_msbits(void **state)
{
	(void)state;
	/* 24 significant bits in S32_LE: the low byte is padding, the sample is the next one. */
	extract(EB_PCM_S32_LE, 1, 24, (const uint8_t[]){0x00, 0x42, 0x00, 0x00}, 1,
	        (const uint8_t[]){0x42});
	/* Stereo: 0x000300 - 0x000500 = -0x200: the sampled byte is 0xfe. */
	extract(EB_PCM_S32_LE, 2, 24,
	        (const uint8_t[]){0x00, 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00}, 1,
	        (const uint8_t[]){0xfe});
	/* 20 significant bits in S24_3LE: 4 bits of padding. */
	extract(EB_PCM_S24_3LE, 1, 20, (const uint8_t[]){0x30, 0x12, 0x00}, 1,
	        (const uint8_t[]){0x23});
	/* msbits equal to the width changes nothing. */
	extract(EB_PCM_S16_LE, 1, 16, (const uint8_t[]){0x34, 0x12}, 1, (const uint8_t[]){0x34});
}

/* A mono signal wired to both channels is one signal: the difference is 0 for every frame, which
 * the health tests refuse, rather than two channels' worth of credit for one noise. */
static void test_duplicated_channels(void **state)
{
	uint8_t frames[1024 * 4], out[1024];
	uint64_t s = 7;
	struct eb_pcm_layout l = {.format = EB_PCM_S16_LE, .channels = 2};

	(void)state;
	for (size_t i = 0; i < 1024; i++) {
		uint16_t v = (uint16_t)splitmix64(&s);

		frames[4 * i] = frames[4 * i + 2] = (uint8_t)v;
		frames[4 * i + 1] = frames[4 * i + 3] = (uint8_t)(v >> 8);
	}
	eb_pcm_extract(&l, frames, 1024, out);
	for (size_t i = 0; i < 1024; i++)
		assert_int_equal(out[i], 0);
	/* Independent channels: every byte value turns up. */
	for (size_t i = 0; i < sizeof(frames); i++)
		frames[i] = (uint8_t)splitmix64(&s);
	eb_pcm_extract(&l, frames, 1024, out);
	{
		unsigned seen[256] = {0}, distinct = 0;

		for (size_t i = 0; i < 1024; i++)
			distinct += seen[out[i]]++ == 0;
		assert_true(distinct > 240);
	}
}

static void test_layouts(void **state)
{
	size_t fb = 99;

	(void)state;
	assert_int_equal(eb_pcm_frame_bytes(
			     &(struct eb_pcm_layout){.format = EB_PCM_S24_3LE, .channels = 2}, &fb),
	                 0);
	assert_int_equal(fb, 6);
	fb = 99;
	assert_int_equal(eb_pcm_frame_bytes(
			     &(struct eb_pcm_layout){.format = EB_PCM_S16_LE, .channels = 0}, &fb),
	                 -EINVAL);
	assert_int_equal(
	    eb_pcm_frame_bytes(&(struct eb_pcm_layout){.format = EB_PCM_S16_LE,
	                                               .channels = EB_PCM_CHANNELS_MAX + 1},
	                       &fb),
	    -EINVAL);
	assert_int_equal(
	    eb_pcm_frame_bytes(
		&(struct eb_pcm_layout){.format = EB_PCM_S16_LE, .channels = 1, .msbits = 17}, &fb),
	    -EINVAL);
	assert_int_equal(
	    eb_pcm_frame_bytes(&(struct eb_pcm_layout){.format = _EB_PCM_FORMAT_MAX, .channels = 1},
	                       &fb),
	    -EINVAL);
	assert_int_equal(fb, 99); /* ret_* written only on success */

	for (int f = 0; f < _EB_PCM_FORMAT_MAX; f++)
		assert_int_equal(eb_pcm_format_from_string(eb_pcm_format_to_string(f)), f);
	assert_int_equal(eb_pcm_format_from_string("S16_LE"), _EB_PCM_FORMAT_INVALID);
	assert_null(eb_pcm_format_to_string(_EB_PCM_FORMAT_MAX));
	assert_int_equal(eb_pcm_format_width(EB_PCM_S24_LE), 24);
	assert_int_equal(eb_pcm_format_bytes(EB_PCM_S24_LE), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mono),    cmocka_unit_test(test_stereo_difference),
	    cmocka_unit_test(test_msbits),  cmocka_unit_test(test_duplicated_channels),
	    cmocka_unit_test(test_layouts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
