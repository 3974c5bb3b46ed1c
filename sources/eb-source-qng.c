/* SPDX-License-Identifier: MIT */
/* eb-source-qng: donates a ComScire QNG quantum RNG (R2000KU, R32MU), as Entropy Broker 2.1's
 * server_ComScire_R2000KU did.
 *
 * A QNG is an FTDI USB chip with the generator behind it: FTDI's vendor ID 0403 with product
 * 6001 and a serial number starting QWR2 (R2000KU), or 6014 and QWR3 (R32MU). 0403:6001 is also
 * every ordinary FT232 serial adapter, so only the serial number tells them apart, and only a QNG
 * is taken from the kernel's ftdi_sio driver. The device is driven through libftdi (sources/qng.c
 * has the protocol); its own bad-statistics bit is a health alarm beside ours. */
#include <errno.h>
#include <ftdi.h>
#include <inttypes.h>
#include <libusb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "qng.h"
#include "source.h"
#include "time-util.h"

/* The claimed min-entropy per byte, in millibits: the device conditions its output itself, so the
 * noise behind it cannot be assessed from the stream; half of what a byte could carry, as for the
 * other conditioned devices (docs/sources.md, "eb-source-qng"). */
#define QNG_H_MBITS_DEFAULT 4000u

#define FTDI_VENDOR 0x0403u
/* The serial numbers are 8 characters; a longer one is not a QNG's. */
#define SERIAL_MAX 16u

struct model {
	const char *name;
	uint16_t product;
	const char *prefix;  /* of the USB serial number */
	unsigned read_chunk; /* libftdi's read chunk, as the vendor's library sets it */
};

static const struct model models[] = {
    {"R2000KU", 0x6001, "QWR2", 16384},
    {"R32MU", 0x6014, "QWR3", 262144},
};

struct device {
	struct ftdi_context *ftdi;
	const struct model *model;
	char serial[SERIAL_MAX + 1];
	char node[32]; /* /dev/bus/usb/BBB/DDD */
	struct qng q;
	bool open;
};

static void help(void)
{
	printf(
	    "Usage: eb-source-qng [OPTIONS] [DEVICE]\n\n"
	    "Donates a ComScire QNG quantum RNG (R2000KU, R32MU), driven through libftdi: its\n"
	    "bytes, health-tested (SP 800-90B RCT and APT), with the device's own\n"
	    "bad-statistics flag as one more alarm. DEVICE is its USB node,\n"
	    "/dev/bus/usb/BBB/DDD; without it, the first QNG found.\n\n"
	    "      --min-entropy H   min-entropy to claim per byte, 0-8 (default 4)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-qng(1).\n");
}

static const struct model *model_of(uint16_t product, const char *serial)
{
	for (size_t i = 0; i < ELEMENTSOF(models); i++)
		if (models[i].product == product &&
		    strncmp(serial, models[i].prefix, strlen(models[i].prefix)) == 0)
			return &models[i];
	return NULL;
}

/* "/dev/bus/usb/BBB/DDD", as udev names a USB device's node, into its bus number and address. */
static int parse_node(const char *path, unsigned *ret_bus, unsigned *ret_address)
{
	unsigned bus, address;
	int end = 0;

	if (strlen(path) != strlen("/dev/bus/usb/BBB/DDD") ||
	    sscanf(path, "/dev/bus/usb/%3u/%3u%n", &bus, &address, &end) != 2 ||
	    path[end] != '\0' || bus == 0 || bus > 255 || address == 0 || address > 127)
		return -EINVAL;
	*ret_bus = bus;
	*ret_address = address;
	return 0;
}

/* Looks through the FTDI chips with a QNG's product IDs for the one at bus:address (0: any QNG)
 * and opens it, which detaches ftdi_sio from it. A chip whose serial number is not a QNG's is
 * refused: it is someone's serial adapter. */
static int device_find_open(struct device *d, unsigned bus, unsigned address)
{
	bool refused = false;
	int r = -ENODEV;

	for (size_t m = 0; m < ELEMENTSOF(models) && !d->open; m++) {
		struct ftdi_device_list *list = NULL;
		int n = ftdi_usb_find_all(d->ftdi, &list, FTDI_VENDOR, models[m].product);

		if (n < 0) {
			log_error("Failed to list FTDI devices: %s",
			          ftdi_get_error_string(d->ftdi));
			return -EIO;
		}
		for (struct ftdi_device_list *l = list; l && !d->open; l = l->next) {
			unsigned b = libusb_get_bus_number(l->dev),
				 a = libusb_get_device_address(l->dev);
			char serial[SERIAL_MAX + 1] = "";

			if (bus != 0 && (b != bus || a != address))
				continue;
			if (ftdi_usb_get_strings2(d->ftdi, l->dev, NULL, 0, NULL, 0, serial,
			                          sizeof(serial)) < 0) {
				log_debug("Cannot read the serial number of %03u/%03u: %s", b, a,
				          ftdi_get_error_string(d->ftdi));
				continue;
			}
			d->model = model_of(models[m].product, serial);
			if (!d->model) {
				log_error(
				    "USB device %03u/%03u (%04x:%04x) has serial number \"%s\": an "
				    "FTDI chip, not a ComScire QNG (whose serial numbers start "
				    "QWR2 or QWR3); leaving it to its driver",
				    b, a, FTDI_VENDOR, models[m].product, serial);
				refused = true;
				continue;
			}
			r = ftdi_usb_open_dev(d->ftdi, l->dev);
			if (r < 0) {
				log_error("Failed to open QNG %s at %03u/%03u: %s", serial, b, a,
				          ftdi_get_error_string(d->ftdi));
				r = -EIO;
				continue;
			}
			snprintf(d->serial, sizeof(d->serial), "%s", serial);
			snprintf(d->node, sizeof(d->node), "/dev/bus/usb/%03u/%03u", b, a);
			d->open = true;
			r = 0;
		}
		ftdi_list_free(&list);
	}
	if (!d->open && r == -ENODEV && !refused) {
		if (bus != 0)
			log_error("No FTDI chip with a QNG's product ID at /dev/bus/usb/%03u/%03u",
			          bus, address);
		else
			log_error("No ComScire QNG found (FTDI 0403:6001 with a serial number "
			          "starting QWR2, or 0403:6014 with QWR3)");
	}
	return d->open ? 0 : refused ? -EPERM : r;
}

static void device_close(struct device *d)
{
	if (d->open) {
		qng_stop(&d->q);
		(void)ftdi_usb_close(d->ftdi);
		log_info("Closed QNG %s: %" PRIu64 " invalid first byte(s) dropped, %" PRIu64
		         " byte(s) skipped to resynchronise, bad statistics %" PRIu64 " time(s)",
		         d->serial, d->q.discarded, d->q.stragglers, d->q.bad_stats);
	}
	d->open = false;
	if (d->ftdi)
		ftdi_free(d->ftdi);
	d->ftdi = NULL;
}

/* An error from the device is its unplugging when its node is gone: libftdi reports a failed
 * write as -1 whatever the cause. */
static bool unplugged(const struct device *d, int r)
{
	return r == -ENODEV || (access(d->node, F_OK) < 0 && errno == ENOENT);
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct device *d = userdata;
	bool bad;
	ssize_t k;

	k = qng_read(&d->q, buf, n, eb_now_ms(), &bad);
	if (k > 0)
		return k;
	if (k == 0 && bad)
		/* The runtime logs the alarm, once an episode. */
		return EB_SOURCE_DEVICE_ALARM;
	if (unplugged(d, (int)k)) {
		log_notice("QNG %s was unplugged; stopping", d->serial);
		return 0;
	}
	if (k == -ETIMEDOUT)
		return log_error_errno(k,
		                       "QNG %s sends nothing although its status (0x%08x) says "
		                       "all is well",
		                       d->serial, d->q.status);
	if (k == -EPROTO)
		return log_error_errno(k,
		                       "QNG %s does not answer in step: no delimiter after %u "
		                       "attempts",
		                       d->serial, QNG_SYNC_ATTEMPTS);
	return log_error_errno(k, "Failed to read QNG %s: %s", d->serial,
	                       ftdi_get_error_string(d->ftdi));
}

/* Opens the QNG at bus:address (0: the first found) and sets it up. */
static int device_start(struct device *d, unsigned bus, unsigned address)
{
	int r;

	d->ftdi = ftdi_new();
	if (!d->ftdi)
		return log_oom();
	r = device_find_open(d, bus, address);
	if (r < 0)
		return r;
	r = qng_setup(&d->q, d->ftdi, d->model->read_chunk);
	if (r < 0)
		return log_error_errno(r, "Failed to set up QNG %s at %s: %s%m", d->serial, d->node,
		                       r == -EPROTO ? "no steady delimiter, " : "");
	log_info("%s is a ComScire QNG %s, serial number %s", d->node, d->model->name, d->serial);
	return 0;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    {"min-entropy", required_argument, NULL, EB_CLI_ARG_CREDIT},
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-qng", .help = help, .options = options};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .h_mbits = QNG_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    /* 250 KB/s (R2000KU) to 4 MB/s (R32MU): full blocks at once. */
	    .block = 4096,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_(device_close) struct device d = {};
	char kind[EB_KIND_MAX + 1], name[64];
	unsigned bus = 0, address = 0;
	const char *path;
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind + 1 < argc) {
		log_error("Expected at most one DEVICE, such as /dev/bus/usb/001/004; see --help");
		return 2;
	}
	path = optind < argc ? argv[optind] : NULL;
	if (path && parse_node(path, &bus, &address) < 0) {
		log_error("Invalid DEVICE \"%s\": expected a USB device node, /dev/bus/usb/BBB/DDD",
		          path);
		return 2;
	}

	/* The broker and the key are checked before the device is taken from its driver. */
	snprintf(kind, sizeof(kind), "qng %s", path ? path : "first");
	snprintf(name, sizeof(name), "QNG at %s", path ? path : "the first found");
	o.kind = kind;
	p.name = name;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	if (device_start(&d, bus, address) < 0)
		return 1;
	snprintf(name, sizeof(name), "QNG %s", d.serial);
	r = eb_source_run(client, &p, sample, &d, &st);
	return eb_cli_source_report(r, &st, "of", p.name);
}
