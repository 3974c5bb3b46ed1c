/* SPDX-License-Identifier: MIT */
/* eb-source-usb: donates the timing jitter of USB control transfers, as Entropy Broker 2's
 * server_usb did.
 *
 * One measurement sends a standard GET_STATUS request (the least a device must answer, and one
 * that changes nothing) to one of the attached USB devices in turn and times the round trip with
 * CLOCK_MONOTONIC_RAW; the raw sample is the low 8 bits of the elapsed nanoseconds. The request
 * crosses the host controller, the bus's frame schedule and the device's firmware, and each adds
 * its own wobble. Devices that come and go are picked up by a fresh enumeration every few seconds.
 * The wobble is credited at the conservative H that docs/sources.md derives from captures of this
 * very sample. */
#include <errno.h>
#include <libusb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "log.h"
#include "source.h"
#include "time-util.h"

/* The claimed min-entropy per 8-bit sample, in millibits; docs/sources.md ("eb-source-usb") has
 * the captures and the estimates behind it. */
#define USB_H_MBITS_DEFAULT 1000u
/* At most this many devices are timed; a machine with more uses the first ones enumerated. */
#define DEVICES_MAX 32u
/* How often the bus is enumerated again for new devices, and how long one request may take. */
#define RESCAN_MS  5000u
#define REQUEST_MS 1000u
/* A device that fails this many requests in a row (a stall, a timeout) is dropped until the next
 * enumeration finds it again. */
#define FAILURES_MAX 8u

struct device {
	libusb_device_handle *h;
	uint8_t bus, address;
	uint16_t vendor, product;
	unsigned failures;
};

struct usb {
	libusb_context *ctx;
	struct device d[DEVICES_MAX];
	size_t n, next;
	uint64_t last_scan_ms;
	bool said_none; /* logged "no device" since one was last found */
};

static void help(void)
{
	printf("Usage: eb-source-usb [OPTIONS]\n\n"
	       "Donates USB timing jitter: the low 8 bits of the time, in nanoseconds, that a\n"
	       "GET_STATUS control request to each attached USB device takes in turn,\n"
	       "health-tested (SP 800-90B RCT and APT).\n\n"
	       "      --min-entropy H   claimed min-entropy per 8-bit sample, 0.001-8 bits\n"
	       "                        (default 1)\n" EB_CLI_SOURCE_HELP EB_CLI_CLIENT_HELP
	       "\nSee eb-source-usb(1).\n");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	/* Not slewed by NTP: a slewed clock's rate changes would add structure, not entropy. */
	(void)clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void device_close(struct device *d)
{
	if (d->h)
		libusb_close(d->h);
	d->h = NULL;
}

static void usb_drop(struct usb *u, size_t i, const char *why)
{
	log_info("No longer timing USB device %03u/%03u (%04x:%04x): %s", u->d[i].bus,
	         u->d[i].address, u->d[i].vendor, u->d[i].product, why);
	device_close(&u->d[i]);
	u->d[i] = u->d[--u->n];
	if (u->next >= u->n)
		u->next = 0;
}

static bool usb_has(const struct usb *u, uint8_t bus, uint8_t address)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->d[i].bus == bus && u->d[i].address == address)
			return true;
	return false;
}

/* Enumerates the buses: drops the devices that went, opens the new ones. Root hubs are left out:
 * the host controller's driver answers for them without a bus transaction, so their timing is
 * only the CPU's. */
static int usb_scan(struct usb *u)
{
	libusb_device **list = NULL;
	ssize_t n;

	u->last_scan_ms = now_ns() / 1000000u;
	n = libusb_get_device_list(u->ctx, &list);
	if (n < 0)
		return log_error_errno(EIO, "Failed to list USB devices: %s",
		                       libusb_strerror((int)n));

	for (size_t i = 0; i < u->n;) {
		bool there = false;

		for (ssize_t k = 0; k < n && !there; k++)
			there = libusb_get_bus_number(list[k]) == u->d[i].bus &&
			        libusb_get_device_address(list[k]) == u->d[i].address;
		if (there)
			i++;
		else
			usb_drop(u, i, "unplugged");
	}

	for (ssize_t k = 0; k < n && u->n < DEVICES_MAX; k++) {
		struct libusb_device_descriptor desc;
		struct device *d = &u->d[u->n];
		uint8_t bus = libusb_get_bus_number(list[k]);
		uint8_t address = libusb_get_device_address(list[k]);
		int r;

		if (libusb_get_port_number(list[k]) == 0 || usb_has(u, bus, address))
			continue;
		if (libusb_get_device_descriptor(list[k], &desc) < 0)
			continue;
		r = libusb_open(list[k], &d->h);
		if (r < 0) {
			log_debug("Cannot open USB device %03u/%03u (%04x:%04x): %s", bus, address,
			          desc.idVendor, desc.idProduct, libusb_strerror(r));
			d->h = NULL;
			continue;
		}
		d->bus = bus;
		d->address = address;
		d->vendor = desc.idVendor;
		d->product = desc.idProduct;
		d->failures = 0;
		u->n++;
		u->said_none = false;
		log_info("Timing USB device %03u/%03u (%04x:%04x)", bus, address, desc.idVendor,
		         desc.idProduct);
	}
	libusb_free_device_list(list, 1);
	return 0;
}

/* One measurement on device i: 0 with the sample in ret, or -EAGAIN when the request failed
 * (the device is dropped when it has failed too often, or is gone). */
static int measure(struct usb *u, size_t i, uint8_t *ret)
{
	struct device *d = &u->d[i];
	unsigned char status[2];
	uint64_t t0, t1;
	int r;

	t0 = now_ns();
	r = libusb_control_transfer(
	    d->h, LIBUSB_ENDPOINT_IN | LIBUSB_REQUEST_TYPE_STANDARD | LIBUSB_RECIPIENT_DEVICE,
	    LIBUSB_REQUEST_GET_STATUS, 0, 0, status, sizeof(status), REQUEST_MS);
	t1 = now_ns();
	if (r == LIBUSB_ERROR_NO_DEVICE) {
		usb_drop(u, i, "unplugged");
		return -EAGAIN;
	}
	if (r < 0) {
		if (++d->failures >= FAILURES_MAX)
			usb_drop(u, i, libusb_strerror(r));
		return -EAGAIN;
	}
	d->failures = 0;
	/* Only the time is sampled; the two status bytes say nothing new. */
	*ret = (uint8_t)(t1 - t0);
	return 0;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct usb *u = userdata;
	size_t got = 0;

	while (got < n) {
		int r;

		if (u->n == 0 || now_ns() / 1000000u - u->last_scan_ms >= RESCAN_MS) {
			r = usb_scan(u);
			if (r < 0)
				return r;
		}
		if (u->n == 0) {
			if (got > 0)
				break;
			if (!u->said_none)
				log_notice("No USB device answers here; waiting for one");
			u->said_none = true;
			(void)eb_sleep_ms(1000);
			continue;
		}
		if (u->next >= u->n)
			u->next = 0;
		r = measure(u, u->next, &buf[got]);
		u->next++;
		if (r == 0)
			got++;
	}
	return (ssize_t)got;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-usb", .help = help, .options = options, .no_arguments = true};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "usb"};
	/* 8-bit samples, one per byte sent: H per sample is H per byte, and no cap beyond it. */
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .name = "usb",
	    .gate = {.bits = 8, .h_mbits = USB_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    /* A few thousand requests a second at most: 1024-sample blocks reach the broker
	     * within a second or so. */
	    .block = 1024,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct usb u = {};
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	r = libusb_init(&u.ctx);
	if (r < 0) {
		log_error("Failed to initialise libusb: %s", libusb_strerror(r));
		return 1;
	}
	r = eb_source_run(client, &p, sample, &u, &st);
	while (u.n > 0)
		device_close(&u.d[--u.n]);
	libusb_exit(u.ctx);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
