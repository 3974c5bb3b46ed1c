/* SPDX-License-Identifier: MIT */
/* eb-source-audio: donates the noise of a sound card's unused capture input: the low bits of its
 * samples (sources/pcm.c says which bits, and why the first two channels' difference).
 *
 * The PCM is driven through the kernel's ALSA interface (<sound/asound.h>) and not alsa-lib:
 * alsa-lib's "hw" device opens the card's control node besides the PCM, and a unit whose
 * DeviceAllow= must name that second node cannot be a template instantiated per PCM. Nor is a
 * plugin layer wanted between the converter and the samples: the values are read as the
 * hardware gives them, or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sound/asound.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "pcm.h"
#include "proto.h"
#include "source.h"
#include "time-util.h"

/* The claimed min-entropy per raw sample, in millibits. docs/sources.md ("eb-source-audio")
 * derives it: the low byte of the difference of two channels whose thermal noise is Gaussian
 * with 0.35 LSB rms each (a quiet 16-bit input; typical ones measure 0.6-2 LSB at high gain)
 * has a most likely value of probability 0.68, a min-entropy of 0.55 bits. */
#define AUDIO_H_MBITS_DEFAULT 500u
#define AUDIO_RATE_DEFAULT    48000u
#define AUDIO_RATE_MAX        768000u
/* Periods of at least 20 ms: the kernel picks the shortest a device allows, and 1 ms periods
 * would wake the source a thousand times a second for nothing. */
#define AUDIO_PERIOD_MIN_US 20000u
/* Overruns or stalls in a row after which the device is taken to be broken rather than busy. */
#define AUDIO_XRUN_MAX 100u

static const int kernel_formats[_EB_PCM_FORMAT_MAX] = {
    [EB_PCM_U8] = SNDRV_PCM_FORMAT_U8,           [EB_PCM_S16_LE] = SNDRV_PCM_FORMAT_S16_LE,
    [EB_PCM_S16_BE] = SNDRV_PCM_FORMAT_S16_BE,   [EB_PCM_S24_LE] = SNDRV_PCM_FORMAT_S24_LE,
    [EB_PCM_S24_3LE] = SNDRV_PCM_FORMAT_S24_3LE, [EB_PCM_S32_LE] = SNDRV_PCM_FORMAT_S32_LE,
};

struct args {
	struct eb_pcm_layout layout;
	unsigned rate;
};

struct capture {
	int fd;
	const char *path;
	struct eb_pcm_layout layout;
	size_t frame_bytes;
	uint8_t *frames; /* room for EB_GATE_BLOCK_DEFAULT frames */
	unsigned xruns;  /* overruns in a row */
};

static void help(void)
{
	printf(
	    "Usage: eb-source-audio [OPTIONS] DEVICE\n\n"
	    "Donates the noise of an unused sound card input: the low 8 bits of the difference\n"
	    "of its first two channels (of the only one in mono), one sample per frame,\n"
	    "health-tested (SP 800-90B RCT and APT). DEVICE is a capture PCM: /dev/snd/pcmC1D0c,\n"
	    "pcmC1D0c, or hw:CARD,DEVICE with the card's number or name.\n\n"
	    "      --rate HZ         frames per second, 1-%u (default %u)\n"
	    "      --channels N      channels to capture, 1-%u (default 2)\n"
	    "      --format FORMAT   u8, s16le, s16be, s24le, s24-3le or s32le (default s16le)\n"
	    "      --min-entropy H   claimed min-entropy per sample, 0.001-8 bits (default 0.5)\n"
	    "" EB_CLI_SOURCE_HELP EB_CLI_CLIENT_HELP "\nSee eb-source-audio(1).\n",
	    AUDIO_RATE_MAX, AUDIO_RATE_DEFAULT, EB_PCM_CHANNELS_MAX);
}

/* A card named by number, or by its id (/sys/class/sound/cardN/id, as "hw:Loopback" names it). */
static int card_number(const char *s, unsigned *ret)
{
	unsigned long long v;

	if (eb_cli_parse_u64(s, 0, 31, &v) == 0) {
		*ret = (unsigned)v;
		return 0;
	}
	for (unsigned n = 0; n < 32; n++) {
		char path[64], id[64];
		_cleanup_fclose_ FILE *f = NULL;

		snprintf(path, sizeof(path), "/sys/class/sound/card%u/id", n);
		f = fopen(path, "re");
		if (!f || !fgets(id, sizeof(id), f))
			continue;
		id[strcspn(id, "\n")] = '\0';
		if (strcmp(id, s) == 0) {
			*ret = n;
			return 0;
		}
	}
	return -ENOENT;
}

/* DEVICE as a path: itself, the node's name under /dev/snd, or hw:CARD[,DEVICE]. */
static int device_path(const char *dev, char *ret, size_t size)
{
	unsigned card, device = 0;
	unsigned long long v;
	char cardname[64];
	const char *comma;

	if (dev[0] == '/')
		return snprintf(ret, size, "%s", dev) < (int)size ? 0 : -ENAMETOOLONG;
	if (strncmp(dev, "pcmC", 4) == 0 && !strchr(dev, '/'))
		return snprintf(ret, size, "/dev/snd/%s", dev) < (int)size ? 0 : -ENAMETOOLONG;
	if (strncmp(dev, "hw:", 3) != 0)
		return -EINVAL;
	dev += 3;
	comma = strchr(dev, ',');
	if ((comma ? (size_t)(comma - dev) : strlen(dev)) >= sizeof(cardname))
		return -EINVAL;
	snprintf(cardname, sizeof(cardname), "%.*s", comma ? (int)(comma - dev) : (int)strlen(dev),
	         dev);
	if (comma) {
		if (eb_cli_parse_u64(comma + 1, 0, 31, &v) < 0)
			return -EINVAL;
		device = (unsigned)v;
	}
	if (card_number(cardname, &card) < 0)
		return -ENOENT;
	snprintf(ret, size, "/dev/snd/pcmC%uD%uc", card, device);
	return 0;
}

static void hw_params_any(struct snd_pcm_hw_params *p)
{
	memset(p, 0, sizeof(*p));
	for (int k = SNDRV_PCM_HW_PARAM_FIRST_MASK; k <= SNDRV_PCM_HW_PARAM_LAST_MASK; k++)
		memset(&p->masks[k - SNDRV_PCM_HW_PARAM_FIRST_MASK], 0xff, sizeof(struct snd_mask));
	for (int k = SNDRV_PCM_HW_PARAM_FIRST_INTERVAL; k <= SNDRV_PCM_HW_PARAM_LAST_INTERVAL; k++)
		p->intervals[k - SNDRV_PCM_HW_PARAM_FIRST_INTERVAL].max = UINT_MAX;
	p->rmask = ~0u;
	p->info = ~0u;
}

static void hw_params_mask(struct snd_pcm_hw_params *p, int param, unsigned bit)
{
	struct snd_mask *m = &p->masks[param - SNDRV_PCM_HW_PARAM_FIRST_MASK];

	memset(m, 0, sizeof(*m));
	m->bits[bit / 32] = 1u << (bit % 32);
}

static struct snd_interval *hw_params_interval(struct snd_pcm_hw_params *p, int param)
{
	return &p->intervals[param - SNDRV_PCM_HW_PARAM_FIRST_INTERVAL];
}

static void hw_params_exact(struct snd_pcm_hw_params *p, int param, unsigned v)
{
	struct snd_interval *i = hw_params_interval(p, param);

	*i = (struct snd_interval){.min = v, .max = v, .integer = 1};
}

/* Read-write interleaved access in exactly the format, channels and rate asked for; the kernel
 * chooses the periods and buffer. No conversion: a device that cannot is refused. */
static int setup(struct capture *c, unsigned rate)
{
	struct snd_pcm_hw_params p;
	int r = -EINVAL;

	/* First with periods of at least AUDIO_PERIOD_MIN_US, then with whatever the device has. */
	for (int pass = 0; pass < 2; pass++) {
		hw_params_any(&p);
		hw_params_mask(&p, SNDRV_PCM_HW_PARAM_ACCESS, SNDRV_PCM_ACCESS_RW_INTERLEAVED);
		hw_params_mask(&p, SNDRV_PCM_HW_PARAM_FORMAT,
		               (unsigned)kernel_formats[c->layout.format]);
		hw_params_mask(&p, SNDRV_PCM_HW_PARAM_SUBFORMAT, SNDRV_PCM_SUBFORMAT_STD);
		hw_params_exact(&p, SNDRV_PCM_HW_PARAM_CHANNELS, c->layout.channels);
		hw_params_exact(&p, SNDRV_PCM_HW_PARAM_RATE, rate);
		if (pass == 0)
			hw_params_interval(&p, SNDRV_PCM_HW_PARAM_PERIOD_TIME)->min =
			    AUDIO_PERIOD_MIN_US;
		if (ioctl(c->fd, SNDRV_PCM_IOCTL_HW_PARAMS, &p) == 0) {
			r = 0;
			break;
		}
		r = -errno;
	}
	if (r < 0)
		return log_error_errno(r,
		                       "%s cannot capture %s, %u channel(s) at %u Hz: %m; see "
		                       "--format, --channels and --rate",
		                       c->path, eb_pcm_format_to_string(c->layout.format),
		                       c->layout.channels, rate);
	/* The driver says how many of the value's bits the converter fills; a figure outside the
	 * format's width is one we cannot use, and then all bits count as significant. */
	if (p.msbits > 0 && p.msbits <= eb_pcm_format_width(c->layout.format))
		c->layout.msbits = p.msbits;
	log_info("%s: %s, %u channel(s) at %u Hz, %u significant bits, period %u frames", c->path,
	         eb_pcm_format_to_string(c->layout.format), c->layout.channels, rate,
	         c->layout.msbits ? c->layout.msbits : eb_pcm_format_width(c->layout.format),
	         hw_params_interval(&p, SNDRV_PCM_HW_PARAM_PERIOD_SIZE)->min);
	if (ioctl(c->fd, SNDRV_PCM_IOCTL_PREPARE) < 0)
		return log_error_errno(errno, "Failed to prepare %s: %m", c->path);
	return 0;
}

/* After an overrun or a suspend, the stream is prepared again; the next read restarts it. */
static int recover(struct capture *c, int err)
{
	if (err == -ESTRPIPE)
		while (ioctl(c->fd, SNDRV_PCM_IOCTL_RESUME) < 0 && errno == EAGAIN)
			(void)eb_sleep_ms(100);
	if (err == -EIO)
		log_notice("%s delivered nothing for 10 s; restarting the stream", c->path);
	if ((err == -EPIPE || err == -EIO) && ++c->xruns > AUDIO_XRUN_MAX)
		return log_error_errno(err, "%s overran or stalled %u times in a row", c->path,
		                       AUDIO_XRUN_MAX);
	log_debug_errno(err, "%s: %m; preparing it again", c->path);
	if (ioctl(c->fd, SNDRV_PCM_IOCTL_PREPARE) < 0)
		return log_error_errno(errno, "Failed to prepare %s again: %m", c->path);
	return 0;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct capture *c = userdata;
	struct snd_xferi x = {.buf = c->frames,
	                      .frames = (snd_pcm_uframes_t)MIN(n, EB_GATE_BLOCK_DEFAULT)};
	int r;

	for (;;) {
		if (ioctl(c->fd, SNDRV_PCM_IOCTL_READI_FRAMES, &x) == 0)
			break;
		r = -errno;
		switch (r) {
		case -EINTR:
			continue;
		case -ENODEV:
			/* The card went (unplugged, its driver unbound): the end of the input,
			 * not a failure; BindsTo= stops the unit as well. */
			log_notice("%s went away; stopping", c->path);
			return 0;
		case -EIO:
			/* No period completed within the kernel's 10 s wait: the card's
			 * interrupt or timer stalled (snd-dummy under a loaded VM does). A
			 * restart of the stream is what helps; one that keeps failing is
			 * given up in recover(), as repeated overruns are. */
		case -EPIPE:
		case -ESTRPIPE:
		case -EBADFD:
			r = recover(c, r);
			if (r < 0)
				return r;
			continue;
		default:
			return log_error_errno(r, "Failed to read %s: %m", c->path);
		}
	}
	c->xruns = 0;
	if (x.result <= 0 || (size_t)x.result > n)
		return log_error_errno(EBADMSG, "%s returned %ld frames for %zu asked", c->path,
		                       (long)x.result, n);
	eb_pcm_extract(&c->layout, c->frames, (size_t)x.result, buf);
	return (ssize_t)x.result;
}

enum { ARG_RATE = EB_CLI_ARG_FIRST_PRIVATE, ARG_CHANNELS, ARG_FORMAT };

static int parse_option(int c, const char *arg, void *userdata)
{
	struct args *a = userdata;

	switch (c) {
	case ARG_RATE:
		return eb_cli_option_uint("rate", arg, AUDIO_RATE_MAX, "Hz", &a->rate);
	case ARG_CHANNELS:
		return eb_cli_option_uint("channels", arg, EB_PCM_CHANNELS_MAX, NULL,
		                          &a->layout.channels);
	case ARG_FORMAT:
		a->layout.format = eb_pcm_format_from_string(arg);
		if (a->layout.format < 0) {
			log_error("Invalid --format \"%s\": expected u8, s16le, s16be, s24le, "
			          "s24-3le or s32le",
			          arg);
			return -2;
		}
		return 0;
	default:
		return -2;
	}
}

/* Opens path read-only and checks that it is an ALSA capture device: the fd, or a negative errno,
 * logged. */
static int open_capture(const char *path)
{
	_cleanup_close_ int fd = -EBADF;
	struct snd_pcm_info info = {0};

	/* Read-only: capture needs nothing else, and the unit allows nothing else. */
	fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(errno, "Failed to open %s: %m", path);
	if (ioctl(fd, SNDRV_PCM_IOCTL_INFO, &info) < 0)
		return log_error_errno(errno, "%s is not an ALSA PCM device: %m", path);
	if (info.stream != SNDRV_PCM_STREAM_CAPTURE) {
		log_error("%s is a playback device; give a capture device (pcmC%dD%uc)", path,
		          info.card, info.device);
		return -ENODEV;
	}
	info.id[sizeof(info.id) - 1] = '\0';
	info.name[sizeof(info.name) - 1] = '\0';
	log_info("%s is card %d device %u, \"%s\" (%s)", path, info.card, info.device,
	         (const char *)info.name, (const char *)info.id);
	return TAKE_FD(fd);
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {"rate", required_argument, NULL, ARG_RATE},
	    {"channels", required_argument, NULL, ARG_CHANNELS},
	    {"format", required_argument, NULL, ARG_FORMAT},
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-audio", .help = help, .options = options, .option = parse_option};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	/* 8-bit samples, one per byte sent: H per sample is H per byte. */
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .h_mbits = AUDIO_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_free_ uint8_t *frames = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct args args = {.layout = {.format = EB_PCM_S16_LE, .channels = 2},
	                    .rate = AUDIO_RATE_DEFAULT};
	char path[PATH_MAX], kind[EB_KIND_MAX + 1], name[PATH_MAX + 16];
	struct eb_source_stats st;
	struct capture c;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, &args);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind + 1 != argc) {
		log_error("Expected one DEVICE, such as /dev/snd/pcmC1D0c or hw:1,0; see --help");
		return 2;
	}
	r = device_path(argv[optind], path, sizeof(path));
	if (r == -ENOENT) {
		log_error("No sound card \"%s\"", argv[optind]);
		return 1;
	}
	if (r < 0) {
		log_error("Invalid DEVICE \"%s\": expected a path, pcmCnDmc or hw:CARD,DEVICE",
		          argv[optind]);
		return 2;
	}
	c = (struct capture){.fd = -EBADF, .path = path, .layout = args.layout};
	if (eb_pcm_frame_bytes(&c.layout, &c.frame_bytes) < 0)
		return log_error("Invalid --format and --channels"), 2;

	snprintf(name, sizeof(name), "audio %s", path);
	p.name = name;
	o.kind = kind;
	/* The kind is at most EB_KIND_MAX bytes: a long path is cut, the log keeps it whole. */
	snprintf(kind, sizeof(kind), "audio %.*s", EB_KIND_MAX - 6, path);
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	fd = open_capture(path);
	if (fd < 0)
		return 1;
	c.fd = fd;
	r = setup(&c, args.rate);
	if (r < 0)
		return 1;
	frames = calloc(EB_GATE_BLOCK_DEFAULT, c.frame_bytes);
	if (!frames)
		return log_oom(), 1;
	c.frames = frames;
	if (p.block == 0 || p.block > EB_GATE_BLOCK_DEFAULT)
		p.block = EB_GATE_BLOCK_DEFAULT;

	r = eb_source_run(client, &p, sample, &c, &st);
	(void)ioctl(fd, SNDRV_PCM_IOCTL_DROP);
	explicit_bzero(frames, (size_t)EB_GATE_BLOCK_DEFAULT * c.frame_bytes);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
