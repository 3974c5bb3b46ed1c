/* SPDX-License-Identifier: MIT */
/* eb-source-v4l: donates the sensor noise of a camera that looks at nothing that changes (a
 * covered lens, a tuner on static): the frame-to-frame differences of a sparse grid of pixels'
 * luma (sources/framediff.c says which pixels, and why).
 *
 * libv4l2 reads the frames, by read() where the driver has it and by streaming otherwise, with
 * its conversions off: gamma, white balance and decompression would all reshape the noise, so
 * only formats the device delivers uncompressed are taken. */
#include <errno.h>
#include <fcntl.h>
#include <libv4l2.h>
#include <limits.h>
#include <linux/videodev2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "framediff.h"
#include "log.h"
#include "proto.h"
#include "source.h"

/* The claimed min-entropy per raw sample, in millibits. docs/sources.md ("eb-source-v4l")
 * derives it: the luma difference of two exposures with Gaussian noise of 0.35 DN rms each has
 * a most likely value of probability 0.68, a min-entropy of 0.55 bits; dark webcam sensors
 * measure 1-3 DN at the gain they choose in the dark. */
#define V4L_H_MBITS_DEFAULT 500u
/* Short or empty frames in a row after which the device is taken to be broken. */
#define V4L_BAD_FRAMES_MAX 100u

static const uint32_t fourccs[_EB_PIXFMT_MAX] = {
    [EB_PIXFMT_GREY] = V4L2_PIX_FMT_GREY,
    [EB_PIXFMT_YUYV] = V4L2_PIX_FMT_YUYV,
    [EB_PIXFMT_UYVY] = V4L2_PIX_FMT_UYVY,
    [EB_PIXFMT_YUV420] = V4L2_PIX_FMT_YUV420,
};

struct args {
	enum eb_pixfmt format;  /* _EB_PIXFMT_INVALID: the device's own, if uncompressed */
	unsigned width, height; /* 0: the device's own */
};

struct camera {
	int fd;
	const char *path;
	struct eb_frame_layout layout;
	size_t frame_size;   /* what one read asks for: the driver's sizeimage */
	size_t luma_bytes;   /* what a frame must hold to be used */
	uint8_t *prev, *cur; /* frame_size each */
	bool have_prev;
	uint8_t *diff; /* eb_framediff_samples() */
	size_t diff_len, diff_pos;
};

static void help(void)
{
	printf(
	    "Usage: eb-source-v4l [OPTIONS] DEVICE\n\n"
	    "Donates the sensor noise of a camera looking at nothing that changes (a covered\n"
	    "lens, a tuner on static): the luma difference between consecutive frames of one\n"
	    "pixel in %u on one line in %u, 8-bit samples, health-tested (SP 800-90B RCT and\n"
	    "APT). DEVICE is a V4L2 capture device such as /dev/video0.\n\n"
	    "      --size WxH        frame size to ask for (default: the device's)\n"
	    "      --format FORMAT   grey, yuyv, uyvy or yuv420 (default: the device's, if it\n"
	    "                        is one of them); compressed formats are refused\n"
	    "      --min-entropy H   claimed min-entropy per sample, 0.001-8 bits (default 0.5)\n"
	    "" EB_CLI_SOURCE_HELP EB_CLI_CLIENT_HELP "\nSee eb-source-v4l(1).\n",
	    EB_FRAMEDIFF_STEP, EB_FRAMEDIFF_STEP);
}

static enum eb_pixfmt pixfmt_of(uint32_t fourcc)
{
	for (int f = 0; f < _EB_PIXFMT_MAX; f++)
		if (fourccs[f] == fourcc)
			return (enum eb_pixfmt)f;
	return _EB_PIXFMT_INVALID;
}

static int xioctl(int fd, unsigned long req, void *arg)
{
	int r;

	do
		r = v4l2_ioctl(fd, req, arg);
	while (r < 0 && errno == EINTR);
	return r < 0 ? negative_errno() : 0;
}

/* The first format of ours the driver itself lists; conversions are off, so the list is the
 * driver's. */
static enum eb_pixfmt native_format(int fd)
{
	for (unsigned i = 0; i < 256; i++) {
		struct v4l2_fmtdesc d = {.index = i, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
		enum eb_pixfmt f;

		if (xioctl(fd, VIDIOC_ENUM_FMT, &d) < 0)
			break;
		f = pixfmt_of(d.pixelformat);
		if (f >= 0 && !(d.flags & V4L2_FMT_FLAG_COMPRESSED))
			return f;
	}
	return _EB_PIXFMT_INVALID;
}

static int setup(struct camera *c, const struct args *a)
{
	struct v4l2_capability cap = {0};
	struct v4l2_format fmt = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
	enum eb_pixfmt want = a->format;
	uint32_t caps;
	int r;

	r = xioctl(c->fd, VIDIOC_QUERYCAP, &cap);
	if (r < 0)
		return log_error_errno(r, "%s is not a V4L2 device: %m", c->path);
	caps = cap.capabilities & V4L2_CAP_DEVICE_CAPS ? cap.device_caps : cap.capabilities;
	if (!(caps & V4L2_CAP_VIDEO_CAPTURE))
		return log_error_errno(ENODEV, "%s (%.32s) does not capture video", c->path,
		                       (const char *)cap.card);
	if (!(caps & (V4L2_CAP_READWRITE | V4L2_CAP_STREAMING)))
		return log_error_errno(ENODEV, "%s (%.32s) can neither be read nor streamed",
		                       c->path, (const char *)cap.card);
	r = xioctl(c->fd, VIDIOC_G_FMT, &fmt);
	if (r < 0)
		return log_error_errno(r, "Failed to get the format of %s: %m", c->path);
	if (want < 0)
		want = pixfmt_of(fmt.fmt.pix.pixelformat);
	if (want < 0)
		want = native_format(c->fd);
	if (want < 0)
		return log_error_errno(EMEDIUMTYPE,
		                       "%s (%.32s) delivers no uncompressed grey, yuyv, uyvy or "
		                       "yuv420 frames: compression removes the noise",
		                       c->path, (const char *)cap.card);
	fmt.fmt.pix.pixelformat = fourccs[want];
	if (a->width > 0) {
		fmt.fmt.pix.width = a->width;
		fmt.fmt.pix.height = a->height;
	}
	fmt.fmt.pix.field = V4L2_FIELD_ANY;
	fmt.fmt.pix.bytesperline = 0;
	fmt.fmt.pix.sizeimage = 0;
	r = xioctl(c->fd, VIDIOC_S_FMT, &fmt);
	if (r < 0)
		return log_error_errno(r, "Failed to set %s to %s: %m", c->path,
		                       eb_pixfmt_to_string(want));
	/* The driver may adjust what was asked: only the format itself must stay. */
	if (fmt.fmt.pix.pixelformat != fourccs[want])
		return log_error_errno(EMEDIUMTYPE, "%s cannot deliver %s frames", c->path,
		                       eb_pixfmt_to_string(want));
	if (a->width > 0 && (fmt.fmt.pix.width != a->width || fmt.fmt.pix.height != a->height))
		log_notice("%s gives %ux%u frames, not the %ux%u asked for", c->path,
		           fmt.fmt.pix.width, fmt.fmt.pix.height, a->width, a->height);
	c->layout = (struct eb_frame_layout){.format = want,
	                                     .width = fmt.fmt.pix.width,
	                                     .height = fmt.fmt.pix.height,
	                                     .bytesperline = fmt.fmt.pix.bytesperline};
	/* Drivers may leave bytesperline 0 for a packed format: the lines are then back to back. */
	if (c->layout.bytesperline == 0)
		c->layout.bytesperline =
		    c->layout.width * (want == EB_PIXFMT_YUYV || want == EB_PIXFMT_UYVY ? 2u : 1u);
	r = eb_frame_luma_bytes(&c->layout, &c->luma_bytes);
	if (r < 0 || fmt.fmt.pix.sizeimage > EB_FRAME_BYTES_MAX)
		return log_error_errno(
		    EBADMSG,
		    "%s describes a frame we cannot use: %ux%u, %u bytes per line, "
		    "%u bytes",
		    c->path, fmt.fmt.pix.width, fmt.fmt.pix.height, fmt.fmt.pix.bytesperline,
		    fmt.fmt.pix.sizeimage);
	c->frame_size =
	    fmt.fmt.pix.sizeimage > c->luma_bytes ? fmt.fmt.pix.sizeimage : c->luma_bytes;
	log_info("%s is \"%.32s\" (%.16s): %ux%u %s, %zu samples a frame", c->path,
	         (const char *)cap.card, (const char *)cap.driver, c->layout.width,
	         c->layout.height, eb_pixfmt_to_string(want), eb_framediff_samples(&c->layout));
	return 0;
}

/* The next frame into c->cur: 1, or 0 when the device went, or a negative errno (logged). */
static int read_frame(struct camera *c)
{
	for (unsigned bad = 0;;) {
		ssize_t k = v4l2_read(c->fd, c->cur, c->frame_size);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == ENODEV || errno == ENXIO)) {
			/* Unplugged, or its driver unbound: the end of the input, not a failure;
			 * BindsTo= stops the unit as well. */
			log_notice("%s went away; stopping", c->path);
			return 0;
		}
		if (k < 0)
			return log_error_errno(errno, "Failed to read a frame from %s: %m",
			                       c->path);
		if ((size_t)k >= c->luma_bytes)
			return 1;
		/* A frame cut short (a dropped USB packet) has no known layout. */
		log_debug("%s gave a frame of %zd bytes, %zu expected; skipping it", c->path, k,
		          c->luma_bytes);
		if (++bad >= V4L_BAD_FRAMES_MAX)
			return log_error_errno(EBADMSG, "%s gave %u short frames in a row", c->path,
			                       bad);
	}
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct camera *c = userdata;
	size_t k;

	while (c->diff_pos == c->diff_len) {
		uint8_t *t;
		int r = read_frame(c);

		if (r <= 0)
			return r;
		if (c->have_prev) {
			eb_framediff(&c->layout, c->prev, c->cur, c->diff);
			c->diff_pos = 0;
		}
		t = c->prev;
		c->prev = c->cur;
		c->cur = t;
		c->have_prev = true;
	}
	k = MIN(n, c->diff_len - c->diff_pos);
	memcpy(buf, c->diff + c->diff_pos, k);
	c->diff_pos += k;
	return (ssize_t)k;
}

enum { ARG_SIZE = EB_CLI_ARG_FIRST_PRIVATE, ARG_FORMAT };

static int parse_option(int c, const char *arg, void *userdata)
{
	struct args *a = userdata;
	unsigned long long w, h;
	char *x, buf[32];

	switch (c) {
	case ARG_SIZE:
		if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf))
			goto bad_size;
		x = strchr(buf, 'x');
		if (!x)
			goto bad_size;
		*x = '\0';
		if (eb_cli_parse_u64(buf, 1, EB_FRAME_WIDTH_MAX, &w) < 0 ||
		    eb_cli_parse_u64(x + 1, 1, EB_FRAME_HEIGHT_MAX, &h) < 0)
			goto bad_size;
		a->width = (unsigned)w;
		a->height = (unsigned)h;
		return 0;
	bad_size:
		log_error("Invalid --size \"%s\": expected WIDTHxHEIGHT, each 1-%u", arg,
		          EB_FRAME_WIDTH_MAX);
		return -2;
	case ARG_FORMAT:
		a->format = eb_pixfmt_from_string(arg);
		if (a->format < 0) {
			log_error("Invalid --format \"%s\": expected grey, yuyv, uyvy or yuv420",
			          arg);
			return -2;
		}
		return 0;
	default:
		return -2;
	}
}

static void v4l2_closep(int *fd)
{
	if (*fd >= 0)
		v4l2_close(*fd);
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {"size", required_argument, NULL, ARG_SIZE},
	    {"format", required_argument, NULL, ARG_FORMAT},
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-v4l", .help = help, .options = options, .option = parse_option};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	/* 8-bit samples, one per byte sent: H per sample is H per byte. */
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .h_mbits = V4L_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_free_ uint8_t *a_frame = NULL, *b_frame = NULL, *diff = NULL;
	_cleanup_(v4l2_closep) int vfd = -EBADF;
	struct args args = {.format = _EB_PIXFMT_INVALID};
	char kind[EB_KIND_MAX + 1], name[PATH_MAX + 16];
	struct eb_source_stats st;
	struct camera c;
	int fd, r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, &args);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind + 1 != argc) {
		log_error("Expected one DEVICE, such as /dev/video0; see --help");
		return 2;
	}
	c = (struct camera){.fd = -EBADF, .path = argv[optind]};
	snprintf(name, sizeof(name), "v4l %s", c.path);
	/* The kind is at most EB_KIND_MAX bytes: a long path is cut, the log keeps it whole. */
	snprintf(kind, sizeof(kind), "v4l %.*s", EB_KIND_MAX - 4, c.path);
	p.name = name;
	o.kind = kind;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	fd = open(c.path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		log_error_errno(errno, "Failed to open %s: %m", c.path);
		return 1;
	}
	/* Asked before libv4l2 is, which would print its own complaint about any other file. */
	if (ioctl(fd, VIDIOC_QUERYCAP, &(struct v4l2_capability){0}) < 0) {
		log_error_errno(errno, "%s is not a V4L2 device: %m", c.path);
		safe_close(fd);
		return 1;
	}
	vfd = v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION);
	if (vfd < 0) {
		log_error_errno(errno, "%s is not a V4L2 device libv4l2 can use: %m", c.path);
		safe_close(fd);
		return 1;
	}
	c.fd = vfd;
	if (setup(&c, &args) < 0)
		return 1;
	c.diff_len = c.diff_pos = eb_framediff_samples(&c.layout);
	a_frame = malloc(c.frame_size);
	b_frame = malloc(c.frame_size);
	diff = malloc(c.diff_len);
	if (!a_frame || !b_frame || !diff)
		return log_oom(), 1;
	c.prev = a_frame;
	c.cur = b_frame;
	c.diff = diff;

	r = eb_source_run(client, &p, sample, &c, &st);
	explicit_bzero(diff, c.diff_len);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
