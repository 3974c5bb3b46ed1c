/* SPDX-License-Identifier: MIT */
/* eb-source-stream: donates a hardware RNG that is read as a stream of bytes: /dev/hwrng, a
 * USB serial TRNG (TrueRNG, OneRNG, ...) or a ChaosKey or Alea (/dev/chaoskeyN). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#if HAVE_LIBUDEV
#include <libudev.h>
#endif

#include "cli.h"
#include "log.h"
#include "proto.h"
#include "source.h"
#include "time-util.h"

/* The most one read() asks for. The kernel's hwrng read loops over the driver until it has
 * what was asked, holding the device; a small read returns promptly and lets a stop through. */
#define READ_MAX_HWRNG 512u
#define READ_MAX_TTY   4096u

/* What each kind of device is, what it claims, and how it is started. Every one of them hands
 * out conditioned output (a driver's, or the device firmware's whitening), so the raw noise
 * behind it cannot be assessed from the stream: each claim is half of what the output could
 * carry, and docs/sources.md says why per device. */
struct device_type {
	const char *name;
	const char *what;
	uint16_t vendor, product; /* USB IDs that select it; 0: not selected by ID */
	uint32_t h_mbits;         /* claimed min-entropy per byte */
	const char *const *init;  /* commands written after opening, each followed by "\n" */
};

static const char *const onerng_init[] = {
    /* Noise mode 0 (avalanche diode, firmware whitening on), output on, then flush what
     * the device buffered before it was set up. */
    "cmd0",
    "cmdO",
    "cmdw",
    NULL,
};

static const struct device_type types[] = {
    {"hwrng", "kernel hardware RNG", 0, 0, 4000, NULL},
    {"truerng", "ubld.it TrueRNG v3", 0x04d8, 0xf5fe, 4000, NULL},
    {"truerng", "ubld.it TrueRNGpro", 0x16d0, 0x0aa0, 4000, NULL},
    {"truerng", "ubld.it TrueRNGpro v2", 0x04d8, 0xebb5, 4000, NULL},
    {"onerng", "Moonbase Otago OneRNG", 0x1d50, 0x6086, 4000, onerng_init},
    /* The kernel's chaoskey driver serves both as /dev/chaoskeyN (a usbmisc device, found
     * from the USB IDs above it). */
    {"chaoskey", "Altus Metrum ChaosKey", 0x1d50, 0x60c6, 4000, NULL},
    {"alea", "Araneus Alea", 0x12d8, 0x0001, 4000, NULL},
    {"serial", "serial device of unknown kind", 0, 0, 1000, NULL},
    {"char", "FIFO, file or character device of unknown kind", 0, 0, 1000, NULL},
};

static const struct device_type *type_by_name(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		if (strcmp(types[i].name, name) == 0)
			return &types[i];
	return NULL;
}

static int read_hex_attr(const char *dir, const char *attr, uint16_t *ret)
{
	char path[PATH_MAX], buf[16], *end;
	_cleanup_fclose_ FILE *f = NULL;
	unsigned long v;

	if (snprintf(path, sizeof(path), "%s/%s", dir, attr) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f))
		return -EBADMSG;
	errno = 0;
	v = strtoul(buf, &end, 16);
	if (errno != 0 || end == buf || (*end != '\n' && *end != '\0') || v > 0xffff)
		return -EBADMSG;
	*ret = (uint16_t)v;
	return 0;
}

/* The kind udev's rules gave the device (ENV{EB_STREAM_TYPE}): how an admin's rule names a
 * serial TRNG whose USB ID alone says nothing. */
static const struct device_type *udev_type(dev_t devnum, const char *path)
{
#if HAVE_LIBUDEV
	struct udev *udev = udev_new();
	struct udev_device *d = udev ? udev_device_new_from_devnum(udev, 'c', devnum) : NULL;
	const struct device_type *t = NULL;
	const char *v = d ? udev_device_get_property_value(d, "EB_STREAM_TYPE") : NULL;

	if (v) {
		t = type_by_name(v);
		if (!t)
			log_warning("udev gives %s the unknown EB_STREAM_TYPE \"%s\", ignoring",
			            path, v);
	}
	udev_device_unref(d);
	udev_unref(udev);
	return t;
#else
	(void)devnum;
	(void)path;
	return NULL;
#endif
}

/* Finds the device's kind: from udev's rules, or from sysfs: the misc device hw_random, or the
 * USB IDs of the nearest USB device above it. */
static const struct device_type *detect(int fd, const char *path)
{
	const struct device_type *t;
	char link[64], dir[PATH_MAX];
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))
		return type_by_name("char");
	t = udev_type(st.st_rdev, path);
	if (t)
		return t;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, dir))
		return type_by_name(isatty(fd) ? "serial" : "char");
	/* /dev/hwrng is the misc device hw_random. */
	if (strcmp(strrchr(dir, '/'), "/hw_random") == 0)
		return type_by_name("hwrng");
	for (char *slash; (slash = strrchr(dir, '/')) && slash != dir; *slash = '\0') {
		uint16_t vendor, product;

		if (read_hex_attr(dir, "idVendor", &vendor) < 0 ||
		    read_hex_attr(dir, "idProduct", &product) < 0)
			continue;
		for (size_t i = 0; i < ELEMENTSOF(types); i++)
			if (types[i].vendor != 0 && types[i].vendor == vendor &&
			    types[i].product == product)
				return &types[i];
		log_debug("%s is USB device %04x:%04x, not a known RNG", path, vendor, product);
		break;
	}
	return type_by_name(isatty(fd) ? "serial" : "char");
}

static speed_t baud_to_speed(unsigned long long baud)
{
	static const struct {
		unsigned baud;
		speed_t speed;
	} table[] = {
	    {9600, B9600},       {19200, B19200},     {38400, B38400},     {57600, B57600},
	    {115200, B115200},   {230400, B230400},   {460800, B460800},   {500000, B500000},
	    {921600, B921600},   {1000000, B1000000}, {2000000, B2000000}, {3000000, B3000000},
	    {4000000, B4000000},
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (table[i].baud == baud)
			return table[i].speed;
	return B0;
}

/* Raw mode: no echo, no line editing, no flow control, no translation of any byte; a read
 * returns as soon as a byte is there. */
static int setup_tty(int fd, speed_t speed)
{
	struct termios t;

	if (tcgetattr(fd, &t) < 0)
		return negative_errno();
	cfmakeraw(&t);
	t.c_cflag |= CLOCAL | CREAD;
	t.c_iflag &= ~(tcflag_t)(IXON | IXOFF | IXANY);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (speed != B0 && (cfsetispeed(&t, speed) < 0 || cfsetospeed(&t, speed) < 0))
		return negative_errno();
	if (tcsetattr(fd, TCSANOW, &t) < 0)
		return negative_errno();
	/* Nobody else (ModemManager, a getty) gets to open it while we sample. */
	(void)ioctl(fd, TIOCEXCL);
	return 0;
}

static int send_commands(int fd, const char *const *cmds)
{
	for (; cmds && *cmds; cmds++) {
		char line[32];
		int n = snprintf(line, sizeof(line), "%s\n", *cmds);

		if (write(fd, line, (size_t)n) != n)
			return errno > 0 ? -errno : -EIO;
		log_debug("Sent \"%s\"", *cmds);
	}
	return 0;
}

/* The kernel names the driver behind /dev/hwrng and the quality it credits it with (per 1024
 * bits); worth a line in the log, since that driver is what is being trusted. */
static void log_hwrng_driver(void)
{
	char cur[64] = "", quality[16] = "";
	_cleanup_fclose_ FILE *f = NULL, *g = NULL;

	f = fopen("/sys/class/misc/hw_random/rng_current", "re");
	if (!f || !fgets(cur, sizeof(cur), f))
		return;
	cur[strcspn(cur, "\n")] = '\0';
	g = fopen("/sys/class/misc/hw_random/rng_quality", "re");
	if (g && fgets(quality, sizeof(quality), g))
		quality[strcspn(quality, "\n")] = '\0';
	log_info("The kernel's hardware RNG driver is %s%s%s%s", cur,
	         quality[0] ? " (quality " : "", quality, quality[0] ? " per 1024 bits)" : "");
}

/* A serial RNG that hangs up while its node is still there (its carrier dropped for a moment, a
 * USB reset) is opened again, at most this many times in a row without a byte between. */
#define HANGUPS_MAX     3
#define HANGUP_PAUSE_MS 200

struct device {
	int fd;
	const char *path;
	size_t read_max;
	const struct device_type *type; /* NULL until found from sysfs */
	speed_t speed;
	bool tty;
	unsigned hangups; /* in a row, with no byte read between */
};

/* Opens d->path and sets it up: raw mode and start-up commands for a serial device. Logs what
 * fails. again: a reopen after a hang-up, where a node that is gone is the device unplugged,
 * not an error. */
static int device_open(struct device *d, bool again)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat sst;
	int nonblock = 0, r;

	/* A character device is opened non-blocking, so that a serial line without carrier does
	 * not hold the open, then read blocking. A FIFO is opened blocking: until its writer
	 * comes, a non-blocking open would read as its end. Write access only for a device that
	 * takes start-up commands. */
	if (stat(d->path, &sst) == 0 && S_ISCHR(sst.st_mode))
		nonblock = O_NONBLOCK;
	fd = open(d->path, O_RDONLY | O_NOCTTY | O_CLOEXEC | nonblock);
	if (fd >= 0 && !d->type)
		d->type = detect(fd, d->path);
	if (fd >= 0 && d->type->init) {
		safe_close(fd);
		fd = open(d->path, O_RDWR | O_NOCTTY | O_CLOEXEC | nonblock);
	}
	if (fd < 0) {
		if (again && (errno == ENOENT || errno == ENODEV || errno == ENXIO)) {
			log_notice("%s is gone; stopping", d->path);
			return -errno;
		}
		return log_error_errno(errno, "Failed to open %s%s: %m", d->path,
		                       d->type && d->type->init ? " for writing" : "");
	}
	if (fcntl(fd, F_SETFL, 0) < 0)
		return log_error_errno(errno, "Failed to make %s blocking: %m", d->path);
	d->tty = isatty(fd);
	if (d->tty) {
		r = setup_tty(fd, d->speed);
		if (r < 0)
			return log_error_errno(r, "Failed to set %s to raw mode: %m", d->path);
		r = send_commands(fd, d->type->init);
		if (r < 0)
			return log_error_errno(r, "Failed to send start-up commands to %s: %m",
			                       d->path);
		/* Bytes that arrived before raw mode or the commands are not the device's
		 * noise as configured. */
		(void)tcflush(fd, TCIFLUSH);
	}
	d->fd = TAKE_FD(fd);
	return 0;
}

static void device_close(struct device *d)
{
	d->fd = safe_close(d->fd);
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct device *d = userdata;
	ssize_t k;

	for (;;) {
		do
			k = read(d->fd, buf, MIN(n, d->read_max));
		while (k < 0 && errno == EINTR);
		if (k > 0) {
			d->hangups = 0;
			return k;
		}
		if (k < 0 && errno == ENODEV) {
			/* /dev/hwrng with no driver behind it: the RNG was unplugged (device_del of
			 * a virtio-rng). That ends the input; a failure would only be restarted in
			 * vain. */
			log_notice("%s has no RNG behind it any more; stopping", d->path);
			return 0;
		}
		/* A serial line whose other end went away reads as a hang-up (0) or, a moment
		 * later, as EIO (the tty layer's "other side closed"): both are a hang-up. */
		if (k < 0 && !(errno == EIO && d->tty))
			return log_error_errno(errno, "Failed to read %s: %m", d->path);
		/* A hang-up. Unplugged, the node goes with the device and the reopen says so; a
		 * device still there (its carrier dropped a moment) goes on donating. */
		if (!d->tty || d->hangups >= HANGUPS_MAX) {
			log_notice("%s hung up%s", d->path,
			           d->tty ? " again at once; stopping" : "");
			return 0;
		}
		d->hangups++;
		log_notice("%s hung up; opening it again", d->path);
		device_close(d);
		(void)eb_sleep_ms(HANGUP_PAUSE_MS);
		if (device_open(d, true) < 0)
			return 0;
	}
}

static void help(void)
{
	printf(
	    "Usage: eb-source-stream [OPTIONS] DEVICE\n\n"
	    "Donates a hardware RNG read as a byte stream (/dev/hwrng, a USB serial TRNG) to a\n"
	    "broker. Each byte is one 8-bit sample; SP 800-90B health tests run on them.\n\n"
	    "      --type TYPE       hwrng, truerng, onerng, chaoskey, alea, serial or char\n"
	    "                        (default: found from sysfs)\n"
	    "      --min-entropy H   min-entropy to claim per byte, 0-8 (default: the type's)\n"
	    "      --baud RATE       line speed of a serial device (default: leave it)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-stream(1).\n");
}

enum { ARG_TYPE = EB_CLI_ARG_FIRST_PRIVATE, ARG_BAUD };

/* No --min-entropy: the type's H. No real claim is this: it is at most 8000 millibits. */
#define H_FROM_TYPE UINT32_MAX

struct args {
	const struct device_type *type; /* NULL: found from sysfs */
	speed_t speed;                  /* B0: leave it */
};

static int parse_option(int c, const char *arg, void *userdata)
{
	struct args *a = userdata;
	unsigned long long v;

	switch (c) {
	case ARG_TYPE:
		a->type = type_by_name(arg);
		if (!a->type) {
			log_error("Unknown --type \"%s\"; see --help", arg);
			return -2;
		}
		return 0;
	case ARG_BAUD:
		if (eb_cli_parse_u64(arg, 1, UINT32_MAX, &v) < 0 ||
		    (a->speed = baud_to_speed(v)) == B0) {
			log_error(
			    "Invalid --baud \"%s\": expected a standard rate from 9600 to 4000000",
			    arg);
			return -2;
		}
		return 0;
	default:
		return -2;
	}
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    {"type", required_argument, NULL, ARG_TYPE},
	    {"min-entropy", required_argument, NULL, EB_CLI_ARG_CREDIT},
	    {"baud", required_argument, NULL, ARG_BAUD},
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-stream", .help = help, .options = options, .option = parse_option};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .h_mbits = H_FROM_TYPE, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct args args = {.speed = B0};
	const struct device_type *type;
	char kind[EB_KIND_MAX + 1], name[256];
	speed_t speed;
	struct eb_source_stats st;
	_cleanup_(device_close) struct device d = {.fd = -EBADF};
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, &args);
	if (r != EB_CLI_CONTINUE)
		return r;
	type = args.type;
	speed = args.speed;
	if (optind + 1 != argc) {
		log_error("Expected one DEVICE, such as /dev/hwrng; see --help");
		return 2;
	}
	d.path = argv[optind];

	d.type = type;
	d.speed = speed;
	if (device_open(&d, false) < 0)
		return 1;
	if (!d.tty && speed != B0) {
		log_error("--baud applies to serial devices; %s is not one", d.path);
		return 2;
	}
	type = d.type;
	d.read_max = strcmp(type->name, "hwrng") == 0 ? READ_MAX_HWRNG : READ_MAX_TTY;
	if (p.gate.h_mbits == H_FROM_TYPE)
		p.gate.h_mbits = type->h_mbits;

	log_info("%s is a %s (--type %s)", d.path, type->what, type->name);
	if (strcmp(type->name, "hwrng") == 0)
		log_hwrng_driver();
	snprintf(kind, sizeof(kind), "stream %s %s", type->name, d.path);
	snprintf(name, sizeof(name), "stream %s", d.path);
	o.kind = kind;
	p.name = name;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	r = eb_source_run(client, &p, sample, &d, &st);
	return eb_cli_source_report(r, &st, "of", d.path);
}
