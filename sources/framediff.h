/* SPDX-License-Identifier: MIT */
/* The raw samples eb-source-v4l takes from two consecutive video frames. Pure: no I/O, no
 * allocation. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* The uncompressed pixel formats whose luma can be read straight from the frame. */
enum eb_pixfmt {
	EB_PIXFMT_GREY,   /* 8-bit luma */
	EB_PIXFMT_YUYV,   /* packed 4:2:2, Y first */
	EB_PIXFMT_UYVY,   /* packed 4:2:2, U first */
	EB_PIXFMT_YUV420, /* planar 4:2:0, the Y plane first */
	_EB_PIXFMT_MAX,
	_EB_PIXFMT_INVALID = -EINVAL,
};

/* Frames larger than this are refused (the driver says what a frame is: a ceiling on it). */
#define EB_FRAME_WIDTH_MAX  16384u
#define EB_FRAME_HEIGHT_MAX 16384u
#define EB_FRAME_BYTES_MAX  (64u * 1024u * 1024u)

/* One pixel in STEP along a line, on one line in STEP. */
#define EB_FRAMEDIFF_STEP 4u

struct eb_frame_layout {
	enum eb_pixfmt format;
	unsigned width, height; /* pixels */
	unsigned bytesperline;  /* of the packed frame, or of the Y plane */
};

/* "yuyv" and so on, as --format takes them; NULL / _EB_PIXFMT_INVALID for others. */
const char *eb_pixfmt_to_string(enum eb_pixfmt f);
enum eb_pixfmt eb_pixfmt_from_string(const char *s);

/* The bytes a frame must have for its luma to be read (the Y plane of a planar format): -EINVAL
 * for a layout out of range (no pixels, larger than the ceilings, lines shorter than the
 * width). */
int eb_frame_luma_bytes(const struct eb_frame_layout *l, size_t *ret);

/* Samples one pair of frames gives. */
size_t eb_framediff_samples(const struct eb_frame_layout *l);

/* One raw 8-bit sample per sampled pixel: its luma in cur minus its luma in prev, modulo 256.
 * Both frames must hold eb_frame_luma_bytes(); writes eb_framediff_samples() samples to ret. */
void eb_framediff(const struct eb_frame_layout *l, const uint8_t *prev, const uint8_t *cur,
                  uint8_t *ret);
