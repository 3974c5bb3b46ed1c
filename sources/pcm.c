/* SPDX-License-Identifier: MIT */
/* PCM frames to raw samples for eb-source-audio.
 *
 * The noise of an unused input is the analogue front end's thermal noise, about one least
 * significant bit of a 16-bit converter at high gain: only the lowest bits carry it, the rest is
 * offset, hum and whatever leaks in. A sample is therefore the low 8 significant bits of a value.
 *
 * Of a stereo (or wider) input the sample is the difference of the first two channels. Two
 * channels that are one signal wired twice, as some codecs do with a mono microphone, give a
 * difference of 0 every time, which the health tests refuse at once; crediting each channel on
 * its own would count that one signal twice and no test would notice. Hum and interference
 * reach both channels alike and cancel, while the two channels' own thermal noise is
 * independent and adds up. */
#include "pcm.h"

#include <string.h>

#include "macro.h"

static const struct {
	const char *name;
	unsigned bytes, width;
} formats[_EB_PCM_FORMAT_MAX] = {
    [EB_PCM_U8] = {"u8", 1, 8},
    [EB_PCM_S16_LE] = {"s16le", 2, 16},
    [EB_PCM_S16_BE] = {"s16be", 2, 16},
    [EB_PCM_S24_LE] = {"s24le", 4, 24},
    [EB_PCM_S24_3LE] = {"s24-3le", 3, 24},
    [EB_PCM_S32_LE] = {"s32le", 4, 32},
};

static int format_ok(enum eb_pcm_format f)
{
	return f >= 0 && f < _EB_PCM_FORMAT_MAX;
}

const char *eb_pcm_format_to_string(enum eb_pcm_format f)
{
	return format_ok(f) ? formats[f].name : NULL;
}

enum eb_pcm_format eb_pcm_format_from_string(const char *s)
{
	for (int f = 0; f < _EB_PCM_FORMAT_MAX; f++)
		if (strcmp(formats[f].name, s) == 0)
			return (enum eb_pcm_format)f;
	return _EB_PCM_FORMAT_INVALID;
}

unsigned eb_pcm_format_bytes(enum eb_pcm_format f)
{
	return format_ok(f) ? formats[f].bytes : 0;
}

unsigned eb_pcm_format_width(enum eb_pcm_format f)
{
	return format_ok(f) ? formats[f].width : 0;
}

int eb_pcm_frame_bytes(const struct eb_pcm_layout *l, size_t *ret)
{
	if (!format_ok(l->format) || l->channels < 1 || l->channels > EB_PCM_CHANNELS_MAX ||
	    l->msbits > formats[l->format].width)
		return -EINVAL;
	*ret = (size_t)formats[l->format].bytes * l->channels;
	return 0;
}

/* One value, sign-extended; U8 is offset binary, so it is centred on 0 like the others. */
static int64_t value(enum eb_pcm_format f, const uint8_t *p)
{
	switch (f) {
	case EB_PCM_U8:
		return (int64_t)p[0] - 128;
	case EB_PCM_S16_LE:
		return (int16_t)(uint16_t)(p[0] | p[1] << 8);
	case EB_PCM_S16_BE:
		return (int16_t)(uint16_t)(p[0] << 8 | p[1]);
	case EB_PCM_S24_LE:
	case EB_PCM_S24_3LE:
		/* S24_LE's fourth byte is padding the driver may fill with anything. */
		return (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 |
		                 (uint32_t)p[2] << 24) >>
		       8;
	case EB_PCM_S32_LE:
		return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		                 (uint32_t)p[3] << 24);
	case _EB_PCM_FORMAT_MAX:
	case _EB_PCM_FORMAT_INVALID:
		break;
	}
	return 0;
}

void eb_pcm_extract(const struct eb_pcm_layout *l, const uint8_t *frames, size_t n, uint8_t *ret)
{
	unsigned bytes = formats[l->format].bytes, width = formats[l->format].width;
	/* A 24-bit converter behind a 32-bit format leaves the low 8 bits 0 (or noise of the
	 * driver's making): msbits says where its least significant bit is. */
	unsigned shift = l->msbits > 0 ? width - l->msbits : 0;
	size_t frame = (size_t)bytes * l->channels;

	for (size_t i = 0; i < n; i++) {
		const uint8_t *f = frames + i * frame;
		int64_t v = value(l->format, f);

		if (l->channels >= 2)
			v -= value(l->format, f + bytes);
		/* Bits shift..shift+7 of the difference in two's complement: its low
		 * significant bits, whatever its sign. */
		ret[i] = (uint8_t)((uint64_t)v >> shift);
	}
}
