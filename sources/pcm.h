/* SPDX-License-Identifier: MIT */
/* The raw samples eb-source-audio takes from PCM capture frames. Pure: no I/O, no allocation. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* The sample formats a capture can be read in; each maps to one of the kernel's
 * SNDRV_PCM_FORMAT_* in eb-source-audio.c. */
enum eb_pcm_format {
	EB_PCM_U8,
	EB_PCM_S16_LE,
	EB_PCM_S16_BE,
	EB_PCM_S24_LE,  /* 24 bits in the low three bytes of four, little-endian */
	EB_PCM_S24_3LE, /* 24 bits in three bytes, little-endian */
	EB_PCM_S32_LE,
	_EB_PCM_FORMAT_MAX,
	_EB_PCM_FORMAT_INVALID = -EINVAL,
};

/* A device with more channels than this is refused: the ceiling on a frame's size. */
#define EB_PCM_CHANNELS_MAX 32u

struct eb_pcm_layout {
	enum eb_pcm_format format;
	unsigned channels; /* 1..EB_PCM_CHANNELS_MAX, interleaved */
	unsigned msbits;   /* significant bits per value, as the driver reports them; 0: all */
};

/* "s16le" and so on, as --format takes them; NULL / _EB_PCM_FORMAT_INVALID for others. */
const char *eb_pcm_format_to_string(enum eb_pcm_format f);
enum eb_pcm_format eb_pcm_format_from_string(const char *s);

/* Bytes one value takes in memory (1, 2, 3 or 4) and bits it carries (8, 16, 24 or 32). */
unsigned eb_pcm_format_bytes(enum eb_pcm_format f);
unsigned eb_pcm_format_width(enum eb_pcm_format f);

/* Bytes per frame, or -EINVAL for a layout out of range (format, channels, msbits above the
 * width). */
int eb_pcm_frame_bytes(const struct eb_pcm_layout *l, size_t *ret);

/* One raw 8-bit sample per frame: the low 8 significant bits of the first channel minus the
 * second (of the first channel alone in mono); further channels are not used. l must have
 * passed eb_pcm_frame_bytes(). Writes n samples to ret from n frames. */
void eb_pcm_extract(const struct eb_pcm_layout *l, const uint8_t *frames, size_t n, uint8_t *ret);
