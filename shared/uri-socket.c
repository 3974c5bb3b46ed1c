/* SPDX-License-Identifier: MIT */
/* The sockets an address names: a listener for the broker and the sinks that serve, a connection
 * for the clients. The address as text is uri.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lookup.h"
#include "macro.h"
#include "time-util.h"
#include "uri.h"

/* The kernel's own list of ports, each with its name, before udev has seen any of them. */
#define VIRTIO_PORTS_SYSFS "/sys/class/virtio-ports"
/* How often a guest looks again whether the host side of its port has connected: the port
 * reports that only as POLLHUP going away, which poll() cannot wait for. */
#define VIRTIO_HOST_POLL_MS 50

DEFINE_TRIVIAL_CLEANUP_FUNC(struct addrinfo *, freeaddrinfo);
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static int make_sockaddr_un(const struct eb_uri *uri, struct sockaddr_un *ret, socklen_t *ret_len)
{
	size_t len = strnlen(uri->path, sizeof(uri->path));

	if (uri->path[0] != '/' || len >= sizeof(ret->sun_path))
		return -EINVAL;
	*ret = (struct sockaddr_un){.sun_family = AF_UNIX};
	memcpy(ret->sun_path, uri->path, len + 1);
	*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	return 0;
}

static int resolve_error(int e)
{
	switch (e) {
	case EAI_SYSTEM:
		return negative_errno();
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_AGAIN:
		return -EAGAIN;
	default:
		return -EHOSTUNREACH;
	}
}

/* What getaddrinfo() said when this thread's last tcp_resolve() failed, 0 after one that did
 * not; and whether it failed for want of an answer in time. */
static _Thread_local int last_resolve_error;
static _Thread_local bool last_resolve_late;

/* Looks uri's host up; for a connection within bound (NULL: a listener's, as long as it takes),
 * since getaddrinfo() itself waits as long as resolv.conf says, whatever the caller's timeout. */
static int tcp_resolve(const struct eb_uri *uri, const struct eb_lookup_bound *bound,
                       struct addrinfo **ret)
{
	struct addrinfo hints = {
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICSERV | (bound ? 0 : AI_PASSIVE),
	};
	char port[8];
	int e, r;

	snprintf(port, sizeof(port), "%u", (unsigned)uri->port);
	last_resolve_late = false;
	if (!bound) {
		e = getaddrinfo(uri->host, port, &hints, ret);
		last_resolve_error = e;
		return e != 0 ? resolve_error(e) : 0;
	}
	/* An address needs no DNS, nor a thread to wait for it on. */
	hints.ai_flags |= AI_NUMERICHOST;
	e = getaddrinfo(uri->host, port, &hints, ret);
	hints.ai_flags &= ~AI_NUMERICHOST;
	if (e != EAI_NONAME) {
		last_resolve_error = e;
		return e != 0 ? resolve_error(e) : 0;
	}
	r = eb_lookup_addrinfo(uri->host, port, &hints, bound, ret, &e);
	last_resolve_error = e;
	/* -EAGAIN: earlier look-ups are still unanswered, which says the same. */
	last_resolve_late = r == -ETIMEDOUT || r == -EAGAIN;
	if (e != 0)
		return resolve_error(e);
	return r;
}

const char *eb_uri_resolve_error(void)
{
	if (last_resolve_late)
		return "no answer from the DNS in time (check the nameserver lines of /etc/resolv.conf)";
	return last_resolve_error != 0 && last_resolve_error != EAI_SYSTEM &&
	               last_resolve_error != EAI_MEMORY
	           ? gai_strerror(last_resolve_error)
	           : NULL;
}

static int listen_tcp(const struct eb_uri *uri, int *ret_fd)
{
	_cleanup_(freeaddrinfop) struct addrinfo *ai = NULL;
	_cleanup_close_ int fd = -EBADF;
	const int one = 1, zero = 0;
	int r;

	r = tcp_resolve(uri, NULL, &ai);
	if (r < 0)
		return r;

	/* The first address is the one meant; a name that resolves to several is ambiguous for a
	 * listener, and binding all of them is what several listen= lines are for. */
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return negative_errno();
	/* "[::]" means every address, IPv4 included, whatever net.ipv6.bindv6only says. */
	if (ai->ai_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr) &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		return negative_errno();
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		return negative_errno();
	if (listen(fd, SOMAXCONN) < 0)
		return negative_errno();

	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Removes a socket left behind by a broker that is gone. A socket someone still accepts on is
 * left alone (-EADDRINUSE), and so is anything that is not a socket. */
static int unlink_stale(const struct sockaddr_un *sa, socklen_t len)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (const struct sockaddr *)sa, len) == 0 || errno == EAGAIN)
		return -EADDRINUSE;
	if (errno != ECONNREFUSED)
		return negative_errno();
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}

static int listen_unix(const struct eb_uri *uri, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_un sa;
	socklen_t len;
	int r;

	r = make_sockaddr_un(uri, &sa, &len);
	if (r < 0)
		return r;
	r = unlink_stale(&sa, len);
	if (r < 0)
		return r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (bind(fd, (const struct sockaddr *)&sa, len) < 0)
		return negative_errno();
	if (listen(fd, SOMAXCONN) < 0)
		return negative_errno();

	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int listen_vsock(const struct eb_uri *uri, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK,
	    .svm_cid = uri->cid,
	    .svm_port = uri->port,
	};

	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (bind(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();
	if (listen(fd, SOMAXCONN) < 0)
		return negative_errno();

	*ret_fd = TAKE_FD(fd);
	return 0;
}

int eb_uri_listen(const struct eb_uri *uri, int *ret_fd)
{
	if (!uri || !ret_fd)
		return -EINVAL;

	switch (uri->kind) {
	case EB_URI_TCP:
		return listen_tcp(uri, ret_fd);
	case EB_URI_UNIX:
	case EB_URI_UNIX_TLS:
		return listen_unix(uri, ret_fd);
	case EB_URI_VSOCK:
		return listen_vsock(uri, ret_fd);
	case EB_URI_VIRTIO:
	case EB_URI_SRV:
		return -EOPNOTSUPP;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		break;
	}
	return -EINVAL;
}

/* Connects fd within timeout_ms (negative: no limit), or until stop's cancel_fd shows a stop, and
 * leaves it blocking. The socket is created non-blocking so that an unreachable host costs the
 * timeout, not the kernel's minutes of SYN retries. */
static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms,
                      const struct eb_lookup_bound *stop)
{
	int64_t deadline = timeout_ms >= 0 ? (int64_t)eb_now_ms() + timeout_ms : -1;
	socklen_t elen = sizeof(int);
	int flags, err = 0;

	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS)
			return negative_errno();

		for (;;) {
			struct pollfd p[2] = {
			    {.fd = fd, .events = POLLOUT},
			    {.fd = stop->cancel_fd, .events = stop->cancel_events},
			};
			int wait = -1, k;

			if (deadline >= 0) {
				int64_t left = deadline - (int64_t)eb_now_ms();
				wait = (int)MAX(left, 0);
			}
			k = poll(p, stop->cancel_fd >= 0 ? 2 : 1, wait);
			if (k < 0) {
				if (errno == EINTR)
					continue;
				return negative_errno();
			}
			if (k == 0)
				return -ETIMEDOUT;
			if (p[0].revents == 0 && stop->cancel_fd >= 0 &&
			    (p[1].revents & (stop->cancel_events | POLLHUP | POLLERR | POLLNVAL)))
				return -ECANCELED;
			break;
		}

		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			return negative_errno();
		if (err != 0)
			return -err;
	}

	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
		return negative_errno();
	return 0;
}

static int connect_tcp(const struct eb_uri *uri, int timeout_ms, const struct eb_lookup_bound *stop,
                       int *ret_fd)
{
	_cleanup_(freeaddrinfop) struct addrinfo *ai = NULL;
	int64_t deadline = timeout_ms >= 0 ? (int64_t)eb_now_ms() + timeout_ms : -1;
	struct eb_lookup_bound bound = *stop;
	unsigned n = 0;
	int r;

	/* The name's look-up and the connects share the timeout: a silent DNS must not hold a
	 * client past it. */
	bound.deadline_ms = deadline >= 0 ? (uint64_t)MAX(deadline, 1) : 0;
	r = tcp_resolve(uri, &bound, &ai);
	if (r == -ECANCELED)
		return r;
	/* Not -EHOSTUNREACH: a name that does not resolve is a typo or a DNS failure, and "No
	 * route to host" would send its reader to the network instead. */
	if (r < 0 && eb_uri_resolve_error())
		return -EADDRNOTAVAIL;
	if (r < 0)
		return r;
	for (struct addrinfo *a = ai; a; a = a->ai_next)
		n++;

	r = -EHOSTUNREACH;
	for (struct addrinfo *a = ai; a; a = a->ai_next, n--) {
		_cleanup_close_ int fd = -EBADF;
		int t = -1;

		/* Share what is left of the time among the addresses still to try, so that one
		 * black-holed address does not use up the others' chance. */
		if (deadline >= 0) {
			int64_t left = deadline - (int64_t)eb_now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			t = (int)(left / n);
		}

		fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			r = negative_errno();
			continue;
		}
		r = connect_fd(fd, a->ai_addr, a->ai_addrlen, t, stop);
		if (r >= 0) {
			*ret_fd = TAKE_FD(fd);
			return 0;
		}
		if (r == -ECANCELED)
			return r;
	}
	return r;
}

static int connect_unix(const struct eb_uri *uri, int timeout_ms,
                        const struct eb_lookup_bound *stop, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_un sa;
	socklen_t len;
	int r;

	r = make_sockaddr_un(uri, &sa, &len);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	r = connect_fd(fd, (const struct sockaddr *)&sa, len, timeout_ms, stop);
	if (r < 0)
		return r;

	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int connect_vsock(const struct eb_uri *uri, int timeout_ms,
                         const struct eb_lookup_bound *stop, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK,
	    .svm_cid = uri->cid,
	    .svm_port = uri->port,
	};
	int r;

	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	r = connect_fd(fd, (const struct sockaddr *)&sa, sizeof(sa), timeout_ms, stop);
	if (r < 0)
		return r;

	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Opens the port, by udev's link, or, when there is none yet, by looking its name up in sysfs
 * and opening the node devtmpfs made: in early boot udev links a port only at coldplug, seconds
 * after the driver made it, and a seeder that waited for that would come after the kernel's CRNG
 * was initialised without it. */
static int open_port(const char *path)
{
	const char *name = path + strlen(EB_URI_VIRTIO_DIR);
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *e;
	int fd;

	fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd >= 0 ? fd : negative_errno();
	d = opendir(VIRTIO_PORTS_SYSFS);
	if (!d)
		return -ENOENT;
	while ((e = readdir(d))) {
		char p[sizeof(VIRTIO_PORTS_SYSFS) + 2 * NAME_MAX], buf[256];
		_cleanup_close_ int nfd = -EBADF;
		ssize_t n;

		if (strncmp(e->d_name, "vport", 5) != 0 || strchr(e->d_name, '/'))
			continue;
		snprintf(p, sizeof(p), VIRTIO_PORTS_SYSFS "/%s/name", e->d_name);
		nfd = open(p, O_RDONLY | O_CLOEXEC);
		if (nfd < 0)
			continue;
		n = read(nfd, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (strcmp(buf, name) != 0)
			continue;
		snprintf(p, sizeof(p), "/dev/%s", e->d_name);
		fd = open(p, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		return fd >= 0 ? fd : negative_errno();
	}
	return -ENOENT;
}

/* A virtio-serial port is a character device with no connect(): it opens at once, and whether
 * the host's end (QEMU's chardev, connected to a broker) is there shows in poll() as POLLHUP,
 * while writes would block. So open it, then wait until the host side is connected. A stream
 * over it has no beginning of its own: the TLS handshake and close_notify delimit a session,
 * and the guest's kernel drops what arrives while the port is closed. */
static int connect_virtio(const struct eb_uri *uri, int timeout_ms, int *ret_fd)
{
	int64_t deadline = timeout_ms >= 0 ? (int64_t)eb_now_ms() + timeout_ms : -1;
	_cleanup_close_ int fd = -EBADF;
	int flags;

	fd = open_port(uri->path);
	if (fd < 0)
		return fd;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t left =
		    deadline >= 0 ? deadline - (int64_t)eb_now_ms() : VIRTIO_HOST_POLL_MS;

		if (poll(&p, 1, 0) < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (!(p.revents & POLLHUP))
			break;
		if (left <= 0)
			return -ENOTCONN;
		left = MIN(left, (int64_t)VIRTIO_HOST_POLL_MS);
		(void)eb_sleep_ms((uint64_t)left);
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
		return negative_errno();
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int eb_uri_connect_cancel(const struct eb_uri *uri, int timeout_ms, int cancel_fd,
                          short cancel_events, int *ret_fd)
{
	const struct eb_lookup_bound stop = {.cancel_fd = cancel_fd,
	                                     .cancel_events = cancel_events};

	if (!uri || !ret_fd)
		return -EINVAL;

	switch (uri->kind) {
	case EB_URI_TCP:
		return connect_tcp(uri, timeout_ms, &stop, ret_fd);
	case EB_URI_UNIX:
	case EB_URI_UNIX_TLS:
		return connect_unix(uri, timeout_ms, &stop, ret_fd);
	case EB_URI_VSOCK:
		return connect_vsock(uri, timeout_ms, &stop, ret_fd);
	case EB_URI_VIRTIO:
		return connect_virtio(uri, timeout_ms, ret_fd);
	case EB_URI_SRV:
		return -EOPNOTSUPP;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		break;
	}
	return -EINVAL;
}

int eb_uri_connect(const struct eb_uri *uri, int timeout_ms, int *ret_fd)
{
	return eb_uri_connect_cancel(uri, timeout_ms, -EBADF, 0, ret_fd);
}
