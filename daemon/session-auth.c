/* SPDX-License-Identifier: MIT */
/* Who a session's peer is and what it may hold: its name and address (which the registry's limits
 * at accept count), a unix peer's credentials, the TLS handshake and what a failed one counts as,
 * the user the peer maps to and that user's max-sessions, and what a reload leaves it. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "broker.h"
#include "conn.h"
#include "log.h"
#include "proxy.h"
#include "session-internal.h"
#include "session.h"

/* The uid, gid and pid of a unix peer, as the kernel recorded them at connect(). */
static int session_peer_cred(int fd, struct ucred *ret)
{
	socklen_t l = sizeof(*ret);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, ret, &l) < 0 ? negative_errno() : 0;
}

/* A unix peer's supplementary groups, as recorded at connect(): how many fit in groups[] (a
 * peer in more is matched by those that fit), 0 when they cannot be read. */
#define PEER_GROUPS_MAX 256
static size_t session_peer_groups(int fd, gid_t groups[static PEER_GROUPS_MAX])
{
	socklen_t l = PEER_GROUPS_MAX * sizeof(gid_t);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &l) < 0)
		return 0;
	return l / sizeof(gid_t);
}

/* The user a unix peer maps to in conf, by its uid, gid and groups; its credentials in *ret. */
static const struct eb_user *unix_peer_user(int fd, const struct eb_conf *conf, struct ucred *ret)
{
	gid_t groups[PEER_GROUPS_MAX];
	size_t n;

	if (session_peer_cred(fd, ret) < 0)
		return NULL;
	n = session_peer_groups(fd, groups);
	return eb_conf_find_unix_peer(conf, ret->uid, ret->gid, groups, n);
}

/* "1000 (alice)", or "1000" for an id without a name; into buf. */
static const char *account_text(bool user, uint32_t id, char *buf, size_t size)
{
	char tmp[1024];
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;
	const char *name = NULL;

	if (user && getpwuid_r(id, &pw, tmp, sizeof(tmp), &pwp) == 0 && pwp)
		name = pwp->pw_name;
	else if (!user && getgrgid_r(id, &gr, tmp, sizeof(tmp), &grp) == 0 && grp)
		name = grp->gr_name;
	if (name)
		snprintf(buf, size, "%u (%.32s)", (unsigned)id, name);
	else
		snprintf(buf, size, "%u", (unsigned)id);
	return buf;
}

/* An IP peer's address, as text ("192.0.2.1:40000", "[2001:db8::1]:40000") into buf, and as
 * what its per-address limits count (an IPv4 address, an IPv6 /64) into *ret. */
static void describe_ip(const struct sockaddr_storage *ss, char *buf, size_t size,
                        struct peer_addr *ret)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
	char addr[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		snprintf(buf, size, "%s:%u", addr, ntohs(in->sin_port));
		ret->family = AF_INET;
		memcpy(ret->bytes, &in->sin_addr, 4);
		return;
	}
	inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
	snprintf(buf, size, "[%s]:%u", addr, ntohs(in6->sin6_port));
	/* An IPv4 peer on a dual-stack socket is one address, not a share of a /64. */
	if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
		ret->family = AF_INET;
		memcpy(ret->bytes, in6->sin6_addr.s6_addr + 12, 4);
	} else {
		ret->family = AF_INET6;
		memcpy(ret->bytes, in6->sin6_addr.s6_addr, 8);
	}
}

void session_describe_proxied(struct session *s, const struct sockaddr_storage *client,
                              const struct sockaddr_storage *balancer, const char *listener,
                              struct peer_addr *ret_addr)
{
	char c[INET6_ADDRSTRLEN + 10], v[INET6_ADDRSTRLEN + 10];
	struct peer_addr ignored;

	if (!client) {
		/* The balancer's own connection: it is the peer, and its limits are its own. */
		describe_ip(balancer, v, sizeof(v), ret_addr);
		snprintf(s->peer, sizeof(s->peer), "%s %s (PROXY LOCAL)", listener, v);
		return;
	}
	/* The client counts for every limit, and leads every line that names the session; the
	 * balancer follows, without its port, for an administrator who looks for it. */
	describe_ip(client, c, sizeof(c), ret_addr);
	describe_ip(balancer, v, sizeof(v), &ignored);
	*strrchr(v, ':') = '\0';
	snprintf(s->peer, sizeof(s->peer), "%s %s via %s", listener, c, v);
}

void session_describe_peer(struct session *s, int fd, const struct sockaddr *peer,
                           socklen_t peer_len, const char *listener, struct peer_addr *ret_addr)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN + 16];

	/* accept4() gave the address: a system call fewer a connection. A connection reset before
	 * it was accepted has one there too (getpeername() would fail on it), and so meets the
	 * per-address limits like any other. */
	if (peer && peer_len >= sizeof(sa_family_t) && peer_len <= sizeof(ss))
		memcpy(&ss, peer, peer_len);
	else if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
		return;
	}
	switch (ss.ss_family) {
	case AF_INET:
	case AF_INET6:
		describe_ip(&ss, addr, sizeof(addr), ret_addr);
		snprintf(s->peer, sizeof(s->peer), "%s %s", listener, addr);
		break;
	case AF_VSOCK: {
		struct sockaddr_vm *vm = (struct sockaddr_vm *)&ss;

		snprintf(s->peer, sizeof(s->peer), "%s cid=%u port=%u", listener, vm->svm_cid,
		         vm->svm_port);
		ret_addr->family = AF_VSOCK;
		memcpy(ret_addr->bytes, &vm->svm_cid, sizeof(vm->svm_cid));
		break;
	}
	case AF_UNIX: {
		struct ucred uc;

		if (session_peer_cred(fd, &uc) == 0) {
			snprintf(s->peer, sizeof(s->peer), "%s pid=%d uid=%u gid=%u", listener,
			         (int)uc.pid, (unsigned)uc.uid, (unsigned)uc.gid);
			/* Over unix+tls a hypervisor speaks for its guest: one process, one guest.
			 */
			ret_addr->family = AF_UNIX;
			memcpy(ret_addr->bytes, &uc.pid, sizeof(uc.pid));
		} else
			snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
		break;
	}
	default:
		snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
	}
}

/* Binds s to user u, or refuses it with a BUSY error when u has all the sessions it may: its
 * sessions past the handshake, this one not yet counted, against its max-sessions. */
static int bind_user(struct session *s, const struct eb_user *u)
{
	unsigned idx = (unsigned)(u - s->broker->conf->users);
	int r;

	r = registry_bind_user(&s->broker->registry, &s->reg, idx, u->max_sessions);
	if (r < 0) {
		broker_count(s->broker, EB_COUNTER_LIMIT_USER_MAX_SESSIONS);
		log_peer_refused(s->broker, PEER_LOG_LIMIT, LOG_WARNING,
		                 "Refusing %s: user %s has %u sessions, its limit (max-sessions)",
		                 s->peer, u->name, u->max_sessions);
	}
	return r;
}

int session_identify_unix(struct session *s)
{
	struct ucred uc;
	const struct eb_user *u;
	int r;

	r = session_peer_cred(eb_conn_fd(s->conn), &uc);
	if (r < 0) {
		broker_count(s->broker, EB_COUNTER_AUTH_OTHER);
		log_peer_refused(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		                 "Refusing %s: cannot read its credentials: %s", s->peer,
		                 strerror(-r));
		return r;
	}
	u = unix_peer_user(eb_conn_fd(s->conn), s->broker->conf, &uc);
	if (!u) {
		char uid[64], gid[64], text[512]; /* session_refuse() cuts it to EB_TEXT_MAX */

		/* Both the log and the peer are told who it is and what would let it in: the one
		 * who runs the client is often the one who can add the section. */
		broker_count(s->broker, EB_COUNTER_AUTH_UNMAPPED_PEER);
		account_text(true, uc.uid, uid, sizeof(uid));
		account_text(false, uc.gid, gid, sizeof(gid));
		log_peer_refused(
		    s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		    "Refusing %s: no [user] section maps uid %s, gid %s or its groups; to let "
		    "it in, add a [user NAME] section with unix-uid = %u (or unix-gid = GROUP) "
		    "and a role to eb-brokerd.conf, and reload",
		    s->peer, uid, gid, (unsigned)uc.uid);
		snprintf(text, sizeof(text),
		         "no [user] section maps uid %s, gid %s or its groups: add a [user NAME] "
		         "section with unix-uid = %u (or unix-gid = GROUP) and a role to the "
		         "broker's eb-brokerd.conf",
		         uid, gid, (unsigned)uc.uid);
		session_refuse(s, EB_ERR_AUTH, text);
		return -EACCES;
	}
	return bind_user(s, u);
}

static int identify_tls(struct session *s)
{
	const char *id = eb_conn_identity(s->conn);
	const struct eb_user *u = NULL;
	const struct eb_user_key *k = id ? eb_conf_find_key(s->broker->conf, id, &u) : NULL;

	/* The key was looked up when the ClientHello came; a reload since may have removed or
	 * replaced it, and such a key must open nothing more. */
	if (!k || k->serial != eb_conn_key_tag(s->conn)) {
		broker_count(s->broker, EB_COUNTER_AUTH_OTHER);
		log_peer_refused(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		                 "Refusing %s (%s): its key was removed or replaced by a reload "
		                 "during the TLS handshake",
		                 s->peer, id ? id : "no identity");
		return -EACCES;
	}
	return bind_user(s, u);
}

void session_refuse_identity(struct session *s, int r)
{
	if (s->reg.state == SESSION_CLOSING)
		return; /* refused already, with its own words */
	if (r == -EBUSY)
		session_refuse(s, EB_ERR_BUSY, "too many sessions for this user");
	else
		session_refuse(s, EB_ERR_AUTH, "no user maps to this peer");
}

/* Whether a unix peer's uid or gid still maps to user u in conf. */
static bool unix_peer_maps_to(struct session *s, const struct eb_conf *conf,
                              const struct eb_user *u)
{
	struct ucred uc;

	return unix_peer_user(eb_conn_fd(s->conn), conf, &uc) == u;
}

uint64_t session_key_serial(const struct session *s)
{
	/* A handshake on a worker owns its connection until it comes back, and a session still in
	 * HANDSHAKE logged in with no key yet: identify_tls() checks its key against the new file
	 * once the handshake is done. */
	if (s->in_worker || s->reg.state == SESSION_HANDSHAKE)
		return 0;
	return eb_conn_key_tag(s->conn);
}

int session_rebind(struct session *s, const struct eb_conf *old, const struct eb_conf *new)
{
	SESSION_ENTRY();
	const struct eb_user *was, *u;
	const char *why = NULL;

	/* A handshake carries on: its key, if looked up already, is checked against the new
	 * file once the handshake is done (identify_tls()), and a reload in a boot storm does not
	 * cost every VM in mid-handshake its connection. */
	if (s->reg.state == SESSION_HANDSHAKE || s->reg.user < 0)
		return -1;
	was = &old->users[s->reg.user];
	u = eb_conf_find_user(new, was->name);
	if (!u)
		why = "its user is gone";
	else if (eb_conn_is_tls(s->conn) && !eb_user_key_by_serial(u, eb_conn_key_tag(s->conn)))
		/* A key is removed because it may be known: what it opened closes, and only that;
		 * the user's other keys' sessions carry on. */
		why = "the key it logged in with was removed or replaced";
	else if (!eb_conn_is_tls(s->conn) && !unix_peer_maps_to(s, new, u))
		why = "its uid and gid no longer map to its user";
	else if (s->reg.roles & ~u->roles)
		why = "a role it uses was revoked";
	if (!why || s->reg.state == SESSION_CLOSING) {
		int user = u ? (int)(u - new->users) : -1;

		s->get.request.user = user; /* a waiting GET is paid from the same user's quota */
		return user;
	}
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
	         "Closing %s (user %s): %s in the reloaded configuration", s->peer, was->name, why);
	session_refuse(s, EB_ERR_AUTH, "access revoked by a configuration reload");
	session_settle(s);
	return -1;
}

int session_handshake(struct session *s)
{
	return session_handshake_result(s, eb_conn_handshake(s->conn));
}

/* Whether a peer that did not speak TLS began with a PROXY protocol header: a load balancer the
 * configuration does not name. */
static bool sent_proxy_header(struct session *s)
{
	uint8_t first[EB_CONN_FIRST_HEADER_SIZE];
	struct eb_proxy_header h;

	if (!eb_conn_first_header(s->conn, first))
		return false;
	return eb_proxy_parse(first, sizeof(first), &h) == -EAGAIN;
}

/* What a failed handshake counts as (a peer that closed during it is not counted: a port probe
 * is not a refusal). */
static enum eb_counter failure_counter(struct session *s, enum eb_conn_failure f)
{
	switch (f) {
	case EB_CONN_FAIL_UNKNOWN_USER:
		return EB_COUNTER_AUTH_UNKNOWN_USER;
	case EB_CONN_FAIL_BAD_KEY:
		return EB_COUNTER_AUTH_WRONG_KEY;
	case EB_CONN_FAIL_KEY_HASH:
		return EB_COUNTER_AUTH_OTHER;
	case EB_CONN_FAIL_NOT_TLS:
		return sent_proxy_header(s) ? EB_COUNTER_PROXY_NOT_ALLOWED : EB_COUNTER_TLS_FAILED;
	case EB_CONN_FAIL_NONE:
	case EB_CONN_FAIL_TLS:
	case EB_CONN_FAIL_EOF:
	case EB_CONN_FAIL_RECORDS:
	case EB_CONN_FAIL_POST:
	case _EB_CONN_FAILURE_MAX:
	case _EB_CONN_FAILURE_INVALID:
		break;
	}
	return EB_COUNTER_TLS_FAILED;
}

int session_handshake_result(struct session *s, int r)
{
	struct broker *b = s->broker;

	if (r == -EAGAIN)
		return 0;
	if (r < 0) {
		enum eb_conn_failure f = eb_conn_failure(s->conn);
		const char *tls_err = eb_conn_tls_error(s->conn);

		if (f != EB_CONN_FAIL_EOF)
			broker_count(b, failure_counter(s, f));

		if (f == EB_CONN_FAIL_EOF)
			log_peer(b, PEER_LOG_HANDSHAKE, LOG_INFO,
			         "%s closed during the TLS handshake", s->peer);
		else if (f == EB_CONN_FAIL_UNKNOWN_USER)
			log_peer_refused(b, PEER_LOG_HANDSHAKE, LOG_WARNING,
			                 "Refusing %s: unknown user \"%s\"", s->peer,
			                 eb_conn_offered_identity(s->conn));
		else if (f == EB_CONN_FAIL_BAD_KEY)
			log_peer_refused(b, PEER_LOG_HANDSHAKE, LOG_WARNING,
			                 "Refusing %s: wrong key for user \"%s\"", s->peer,
			                 eb_conn_offered_identity(s->conn));
		else if (f == EB_CONN_FAIL_RECORDS)
			log_peer_refused(
			    b, PEER_LOG_RECORDS, LOG_WARNING,
			    "Refusing %s: more than %u TLS records before its handshake was done (tiny records?)",
			    s->peer, EB_CONN_HANDSHAKE_RECORDS_MAX);
		else if (f == EB_CONN_FAIL_NOT_TLS && sent_proxy_header(s))
			log_peer_refused(
			    b, PEER_LOG_HANDSHAKE, LOG_WARNING,
			    "Refusing %s: it sent a PROXY protocol header, but is not in proxy-protocol-from= (add the load balancer's address there)",
			    s->peer);
		else
			log_peer_refused(b, PEER_LOG_HANDSHAKE, LOG_WARNING, "Refusing %s: %s (%s)",
			                 s->peer, eb_conn_failure_to_string(f),
			                 tls_err[0] ? tls_err : "no detail");
		return -EACCES;
	}
	session_set_state(s, SESSION_HELLO);
	r = identify_tls(s);
	if (r < 0) {
		/* Authenticated by TLS, so the peer may be told why, in the protocol. */
		session_refuse_identity(s, r);
		return 0;
	}
	return 0;
}
