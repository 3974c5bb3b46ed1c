/* SPDX-License-Identifier: MIT */
/* Tests for sinks/egd-peers.c with real sockets and a server of the test's own (no loop, no
 * refill): loopback TCP clients are the uid that owns their socket, whatever 127.x.y.z they come
 * from, and the same peer as that uid over a unix socket (issue 31, item 3); a newcomer past a
 * limit takes the place of an idle client first, then of one owed a blocking read, never of one
 * with an answer on its way. egd_client_free() is the test's: it records the client dropped. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sinks/egd-server-internal.h"
#include "log.h"
#include "macro.h"

static struct client *dropped;

/* The server's own drops a client and, with its last client, its peer; here the test keeps the
 * clients (on its stack) and only notes which one went. */
void egd_client_free(struct client *c, const char *why)
{
	(void)why;
	dropped = c;
	eb_list_remove(&c->server->clients, &c->node);
	c->server->n_clients--;
	c->peer->n_clients--;
}

static void server_init(struct egd_server *s, unsigned max, unsigned per_peer)
{
	*s = (struct egd_server){
	    .opts = {.max_clients = max, .max_clients_per_peer = per_peer},
	};
	assert_true(sd_event_default(&s->event) >= 0);
}

static void server_done(struct egd_server *s)
{
	struct peer *p, *next;

	eb_list_foreach_safe(p, next, &s->peers, node) {
		eb_list_remove(&s->peers, &p->node);
		free(p);
	}
	sd_event_unref(s->event);
}

/* A TCP listener on 127.0.0.1, and its port. */
static int listener(uint16_t *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* A connection from source (127.x.y.z) to the listener: the server's end, accepted, in
 * *ret_server; the client's end returned. */
static int connect_from(int lfd, uint16_t port, const char *source, int *ret_server)
{
	struct sockaddr_in a = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(inet_pton(AF_INET, source, &a.sin_addr), 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	*ret_server = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*ret_server >= 0);
	return fd;
}

/* Two loopback addresses, one uid: one peer, named by that uid, and the same peer as the uid's
 * unix client. Before, each address was a peer of its own. */
static void test_loopback_is_a_uid(void **state)
{
	struct egd_server s;
	struct peer *p, *q, *u;
	uint16_t port;
	int lfd, c1, c2, s1, s2, pair[2];

	(void)state;
	/* The kernel's sock_diag is what names the uid; a sandbox without netlink cannot. */
	lfd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (lfd < 0) {
		print_message("# no NETLINK_SOCK_DIAG socket here: %s\n", strerror(errno));
		skip();
	}
	close(lfd);
	server_init(&s, 16, 16);
	lfd = listener(&port);
	c1 = connect_from(lfd, port, "127.0.0.2", &s1);
	c2 = connect_from(lfd, port, "127.0.0.3", &s2);

	p = egd_peer_admit(&s, s1);
	assert_non_null(p);
	p->n_clients++;
	assert_int_equal(p->key.family, AF_UNIX);
	assert_int_equal(p->key.uid, geteuid());
	q = egd_peer_admit(&s, s2);
	assert_ptr_equal(q, p);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
	u = egd_peer_admit(&s, pair[0]);
	assert_ptr_equal(u, p);

	close(pair[0]);
	close(pair[1]);
	close(c1);
	close(c2);
	close(s1);
	close(s2);
	close(lfd);
	server_done(&s);
}

static void add_client(struct egd_server *s, struct client *c, struct peer *p, uint64_t active,
                       unsigned owed, size_t out_len)
{
	*c = (struct client){
	    .server = s, .peer = p, .active = active, .owed = owed, .out_len = out_len};
	eb_list_append(&s->clients, &c->node);
	s->n_clients++;
	p->n_clients++;
}

/* At the per-peer limit (3), a newcomer of the same uid takes the place of its idle client
 * first, however recent; then of the one owed bytes longest inactive; never of one with an
 * answer on its way. Before, clients owed bytes never made way, and the newcomer was refused. */
static void test_owed_make_way(void **state)
{
	struct egd_server s;
	struct client a, b, c;
	struct peer *p;
	int pair[2];

	(void)state;
	server_init(&s, 16, 3);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
	p = egd_peer_admit(&s, pair[0]);
	assert_non_null(p);
	add_client(&s, &a, p, 1, 255, 0); /* owed, the oldest */
	add_client(&s, &b, p, 2, 255, 0); /* owed */
	add_client(&s, &c, p, 3, 0, 0);   /* idle, the newest */

	dropped = NULL;
	assert_ptr_equal(egd_peer_admit(&s, pair[0]), p);
	assert_ptr_equal(dropped, &c);
	add_client(&s, &c, p, 4, 0, 5); /* an answer on its way */
	dropped = NULL;
	assert_ptr_equal(egd_peer_admit(&s, pair[0]), p);
	assert_ptr_equal(dropped, &a);

	/* Only answers on their way: the newcomer is refused. */
	add_client(&s, &a, p, 5, 0, 5);
	b.out_len = 5;
	dropped = NULL;
	assert_null(egd_peer_admit(&s, pair[0]));
	assert_null(dropped);

	close(pair[0]);
	close(pair[1]);
	server_done(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_loopback_is_a_uid),
	    cmocka_unit_test(test_owed_make_way),
	};

	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
