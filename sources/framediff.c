/* SPDX-License-Identifier: MIT */
/* Frame-to-frame pixel differences for eb-source-v4l.
 *
 * A camera looking at nothing that changes (a covered lens, a tuner on static) gives frames that
 * differ only by the sensor's noise: shot noise, dark current, read noise and the converter's.
 * The difference of one pixel's luma in two consecutive frames removes what is fixed (the scene,
 * fixed-pattern noise, the black level) and keeps the noise of both exposures. Only luma is read:
 * chroma is subsampled and interpolated from the same photosites.
 *
 * Neighbouring pixels are not independent: demosaicing interpolates each output pixel from its
 * neighbours, and a camera's own noise reduction and sharpening spread one pixel's value over a
 * few more. So only one pixel in EB_FRAMEDIFF_STEP along a line, on one line in
 * EB_FRAMEDIFF_STEP, is taken, far enough apart that those 3x3 and 5x5 kernels do not share an
 * input. */
#include "framediff.h"

#include <string.h>

#include "macro.h"

static const struct {
	const char *name;
	unsigned pitch;  /* bytes from one pixel's luma to the next's */
	unsigned offset; /* of the first pixel's luma in a line */
} formats[_EB_PIXFMT_MAX] = {
    [EB_PIXFMT_GREY] = {"grey", 1, 0},
    [EB_PIXFMT_YUYV] = {"yuyv", 2, 0},
    [EB_PIXFMT_UYVY] = {"uyvy", 2, 1},
    [EB_PIXFMT_YUV420] = {"yuv420", 1, 0},
};

static int format_ok(enum eb_pixfmt f)
{
	return f >= 0 && f < _EB_PIXFMT_MAX;
}

const char *eb_pixfmt_to_string(enum eb_pixfmt f)
{
	return format_ok(f) ? formats[f].name : NULL;
}

enum eb_pixfmt eb_pixfmt_from_string(const char *s)
{
	for (int f = 0; f < _EB_PIXFMT_MAX; f++)
		if (strcmp(formats[f].name, s) == 0)
			return (enum eb_pixfmt)f;
	return _EB_PIXFMT_INVALID;
}

int eb_frame_luma_bytes(const struct eb_frame_layout *l, size_t *ret)
{
	size_t line;

	if (!format_ok(l->format) || l->width < 1 || l->height < 1 ||
	    l->width > EB_FRAME_WIDTH_MAX || l->height > EB_FRAME_HEIGHT_MAX)
		return -EINVAL;
	/* The last pixel's luma must lie inside its line. */
	line = (size_t)(l->width - 1) * formats[l->format].pitch + formats[l->format].offset + 1;
	if (l->bytesperline < line || (size_t)l->bytesperline * l->height > EB_FRAME_BYTES_MAX)
		return -EINVAL;
	*ret = (size_t)l->bytesperline * l->height;
	return 0;
}

size_t eb_framediff_samples(const struct eb_frame_layout *l)
{
	size_t per_line = (l->width + EB_FRAMEDIFF_STEP - 1) / EB_FRAMEDIFF_STEP;
	size_t lines = (l->height + EB_FRAMEDIFF_STEP - 1) / EB_FRAMEDIFF_STEP;

	return per_line * lines;
}

void eb_framediff(const struct eb_frame_layout *l, const uint8_t *prev, const uint8_t *cur,
                  uint8_t *ret)
{
	unsigned pitch = formats[l->format].pitch, offset = formats[l->format].offset;
	size_t k = 0;

	for (unsigned y = 0; y < l->height; y += EB_FRAMEDIFF_STEP) {
		size_t line = (size_t)y * l->bytesperline + offset;

		for (unsigned x = 0; x < l->width; x += EB_FRAMEDIFF_STEP) {
			size_t at = line + (size_t)x * pitch;

			ret[k++] = (uint8_t)(cur[at] - prev[at]);
		}
	}
}
