/* SPDX-License-Identifier: MIT */
/* Broker addresses: tcp://HOST[:PORT], unix:/PATH, vsock://CID[:PORT], unix+tls:/PATH,
 * virtio:NAME, srv:NAME. */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

enum eb_uri_kind {
	EB_URI_TCP,
	EB_URI_UNIX,
	EB_URI_VSOCK,
	EB_URI_UNIX_TLS, /* a unix socket that carries TLS, for VMM-proxied vsock */
	EB_URI_VIRTIO,   /* a guest's virtio-serial port, /dev/virtio-ports/NAME, carrying TLS */
	EB_URI_SRV,      /* the DNS SRV records _entropy-broker._tcp.NAME: TCP brokers (srv.h) */
	_EB_URI_KIND_MAX,
	_EB_URI_KIND_INVALID = -EINVAL,
};

/* Where udev links a virtio-serial port by the name the host gave it (50-udev-default.rules):
 * virtio:NAME is this directory's NAME. */
#define EB_URI_VIRTIO_DIR "/dev/virtio-ports/"

struct eb_uri {
	enum eb_uri_kind kind;
	char host[256]; /* TCP: name or address, without brackets; srv: the NAME */
	uint16_t port;  /* TCP and vsock */
	uint32_t cid;   /* vsock */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix; virtio: the device */
};

/* Parses s; -EINVAL for anything malformed, a port of 0 or over 65535, a path too long. */
int eb_uri_parse(const char *s, struct eb_uri *ret);
/* Formats back to the canonical form; returns buf. */
const char *eb_uri_to_string(const struct eb_uri *uri, char *buf, size_t size);
/* True when the transport carries TLS (tcp, vsock, unix+tls, virtio, srv). */
int eb_uri_is_tls(const struct eb_uri *uri);

/* uri-socket.c: the sockets an address names. */

/* Creates a listening socket (SOCK_STREAM, non-blocking, close-on-exec); a unix path is unlinked
 * first when it is a stale socket. A virtio port is a guest's end only: -EOPNOTSUPP. */
int eb_uri_listen(const struct eb_uri *uri, int *ret_fd);
/* Connects a blocking socket within timeout_ms, trying every address a TCP host resolves to.
 * A virtio port is opened and waited for until its host side is connected: -ENOENT when the
 * guest has no such port, -EBUSY when another process holds it, -ENOTCONN when the host side
 * stayed unconnected for timeout_ms. A srv: address names no one socket: -EOPNOTSUPP (the client
 * connects to its targets as tcp: addresses). A TCP host that does not resolve: -EADDRNOTAVAIL,
 * with the resolver's own words from eb_uri_resolve_error(); a TCP host's look-up is bounded by
 * timeout_ms too (a DNS server that does not answer in time: -EADDRNOTAVAIL, and says so). */
int eb_uri_connect(const struct eb_uri *uri, int timeout_ms, int *ret_fd);
/* The same, with a stop: once cancel_fd (-EBADF: none) shows one of cancel_events or POLLHUP,
 * the look-up or the connect in progress ends with -ECANCELED. */
int eb_uri_connect_cancel(const struct eb_uri *uri, int timeout_ms, int cancel_fd,
                          short cancel_events, int *ret_fd);
/* What the resolver said (gai_strerror(), "Name or service not known") when this thread's last
 * look-up of a TCP host failed, or that it did not answer in time; NULL when it did not fail. */
const char *eb_uri_resolve_error(void);
