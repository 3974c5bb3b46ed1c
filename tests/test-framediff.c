/* SPDX-License-Identifier: MIT */
/* Tests for sources/framediff.c: which bytes of each format are luma, the grid of one pixel in
 * EB_FRAMEDIFF_STEP on one line in EB_FRAMEDIFF_STEP (edges included), differences modulo 256,
 * padding at the end of a line never read, a frame that does not change giving only zeros, and
 * layouts out of range refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../sources/framediff.h"
#include "macro.h"

/* A frame whose luma at (x, y) is lum(x, y) and whose chroma and padding are 0xee. */
static uint8_t lum(unsigned x, unsigned y, unsigned t)
{
	return (uint8_t)(x * 7 + y * 13 + t * t * 31);
}

static void fill(const struct eb_frame_layout *l, uint8_t *frame, size_t size, unsigned t)
{
	unsigned pitch = l->format == EB_PIXFMT_YUYV || l->format == EB_PIXFMT_UYVY ? 2 : 1;
	unsigned offset = l->format == EB_PIXFMT_UYVY ? 1 : 0;

	memset(frame, 0xee, size);
	for (unsigned y = 0; y < l->height; y++)
		for (unsigned x = 0; x < l->width; x++)
			frame[(size_t)y * l->bytesperline + (size_t)x * pitch + offset] =
			    lum(x, y, t);
}

static void check_format(enum eb_pixfmt f, unsigned width, unsigned height, unsigned bpl)
{
	struct eb_frame_layout l = {
	    .format = f, .width = width, .height = height, .bytesperline = bpl};
	size_t size, n, k = 0;
	uint8_t *a, *b, *out;

	assert_int_equal(eb_frame_luma_bytes(&l, &size), 0);
	assert_int_equal(size, (size_t)bpl * height);
	n = eb_framediff_samples(&l);
	assert_int_equal(n, ((width + 3) / 4) * ((height + 3) / 4));
	a = malloc(size);
	b = malloc(size);
	out = malloc(n + 1);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(out);
	fill(&l, a, size, 1);
	fill(&l, b, size, 2);
	out[n] = 0x5a;
	eb_framediff(&l, a, b, out);
	for (unsigned y = 0; y < height; y += EB_FRAMEDIFF_STEP)
		for (unsigned x = 0; x < width; x += EB_FRAMEDIFF_STEP)
			assert_int_equal(out[k++], (uint8_t)(lum(x, y, 2) - lum(x, y, 1)));
	assert_int_equal(k, n);
	assert_int_equal(out[n], 0x5a);
	/* The same frame twice: nothing but zeros, what the health tests refuse. */
	eb_framediff(&l, a, a, out);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(out[i], 0);
	free(a);
	free(b);
	free(out);
}

static void test_formats(void **state)
{
	(void)state;
	check_format(EB_PIXFMT_GREY, 16, 8, 16);
	check_format(EB_PIXFMT_YUYV, 16, 8, 32);
	check_format(EB_PIXFMT_UYVY, 16, 8, 32);
	check_format(EB_PIXFMT_YUV420, 16, 8, 16);
	/* Sizes that are not multiples of the step: the last partial block is sampled too. */
	check_format(EB_PIXFMT_YUYV, 13, 7, 26);
	check_format(EB_PIXFMT_GREY, 1, 1, 1);
	/* Padding at the end of each line, which fill() sets to 0xee in both frames. */
	check_format(EB_PIXFMT_UYVY, 10, 5, 64);
	check_format(EB_PIXFMT_GREY, 640, 360, 640);
}

/* Differences wrap modulo 256 and are not folded: a noise of -1 and +1 stays two values. */
static void test_wrap(void **state)
{
	struct eb_frame_layout l = {
	    .format = EB_PIXFMT_GREY, .width = 9, .height = 1, .bytesperline = 9};
	const uint8_t a[9] = {0, 1, 2, 3, 255, 5, 6, 7, 10};
	const uint8_t b[9] = {255, 1, 2, 3, 0, 5, 6, 7, 9};
	uint8_t out[3];

	(void)state;
	assert_int_equal(eb_framediff_samples(&l), 3);
	eb_framediff(&l, a, b, out);
	assert_memory_equal(out, ((const uint8_t[]){0xff, 0x01, 0xff}), 3);
}

static void test_layouts(void **state)
{
	size_t size = 99;

	(void)state;
	/* YUYV needs two bytes per pixel; a line of one byte per pixel is too short. */
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_YUYV, 16, 8, 16}, &size),
	    -EINVAL);
	/* UYVY's last luma is at 2w - 1. */
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_UYVY, 16, 8, 31}, &size),
	    -EINVAL);
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_UYVY, 16, 8, 32}, &size), 0);
	assert_int_equal(size, 256);
	size = 99;
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_GREY, 0, 8, 16}, &size),
	    -EINVAL);
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_GREY, 8, 0, 16}, &size),
	    -EINVAL);
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){EB_PIXFMT_GREY, EB_FRAME_WIDTH_MAX + 1, 1,
	                                                  EB_FRAME_WIDTH_MAX + 1},
	                        &size),
	    -EINVAL);
	/* Within the width and height ceilings, but over the frame ceiling. */
	assert_int_equal(eb_frame_luma_bytes(
			     &(struct eb_frame_layout){EB_PIXFMT_YUYV, 16384, 16384, 32768}, &size),
	                 -EINVAL);
	assert_int_equal(
	    eb_frame_luma_bytes(&(struct eb_frame_layout){_EB_PIXFMT_MAX, 8, 8, 8}, &size),
	    -EINVAL);
	assert_int_equal(size, 99); /* ret_* written only on success */

	for (int f = 0; f < _EB_PIXFMT_MAX; f++)
		assert_int_equal(eb_pixfmt_from_string(eb_pixfmt_to_string(f)), f);
	assert_int_equal(eb_pixfmt_from_string("mjpeg"), _EB_PIXFMT_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_formats),
	    cmocka_unit_test(test_wrap),
	    cmocka_unit_test(test_layouts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
