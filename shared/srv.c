/* SPDX-License-Identifier: MIT */
/* srv:NAME broker addresses: SRV records (RFC 2782) looked up with libc's own stub resolver
 * (res_nquery, libresolv), parsed with its ns_parserr() and put in RFC 2782's order.
 * docs/decisions.md says why this resolver. */
#include "srv.h"

#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

/* <arpa/nameser.h> brings <sys/param.h>'s MIN and MAX; macro.h's are the project's. */
#undef MIN
#undef MAX
#include "lookup.h"
#include "macro.h"

/* Wait per query and tries per server that a look-up may spend at most, whatever resolv.conf
 * says. The caller waits no longer than its own deadline (lookup.h); these bound how long the
 * thread of a look-up it gave up on lives on, which glibc's defaults (5 s, 2 tries, per server)
 * would stretch. */
#define QUERY_TIMEOUT_S 2
#define QUERY_TRIES     2
/* The largest DNS message (over TCP), which is what an answer too large for UDP comes as. */
#define ANSWER_MAX 65535

struct eb_srv {
	char name[EB_SRV_DOMAIN_MAX + 1];
	char qname[EB_SRV_NAME_MAX + 1];
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX];
	size_t n;
	uint64_t failed;     /* bit i: target i failed since the last look-up */
	uint64_t expires_ms; /* when to look up again; 0: never looked up */
	uint64_t leave_ms; /* the records changed: when a client not on the best may leave; 0: no */
	char error[3 * EB_SRV_NAME_MAX];
};

static bool is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

/* A host name as text, its final dot dropped: letters, digits, '-', '_' and dots between
 * non-empty labels of at most 63. */
static int normalize_name(const char *s, char *buf, size_t size)
{
	size_t len = strlen(s), label = 0;

	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0 || len >= size || len > EB_SRV_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!is_host_char(s[i]))
			return -EINVAL;
		if (s[i] != '.') {
			if (++label > 63)
				return -EINVAL;
			continue;
		}
		if (label == 0)
			return -EINVAL;
		label = 0;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

int eb_srv_parse(const uint8_t *msg, size_t len, const char *qname, struct eb_srv_record *ret,
                 size_t max, size_t *ret_n, uint32_t *ret_ttl)
{
	uint32_t ttl = UINT32_MAX;
	bool unavailable = false;
	size_t n = 0;
	ns_msg h;
	int count;

	if (!msg || len > ANSWER_MAX || ns_initparse(msg, (int)len, &h) < 0)
		return -EBADMSG;
	count = ns_msg_count(h, ns_s_an);
	for (int i = 0; i < count; i++) {
		char target[NS_MAXDNAME];
		struct eb_srv_record rec;
		const uint8_t *rd;
		ns_rr rr;
		int k;

		if (ns_parserr(&h, ns_s_an, i, &rr) < 0)
			return -EBADMSG;
		/* A CNAME on the way, or a record of another name or class, is no broker. */
		if (ns_rr_type(rr) != ns_t_srv || ns_rr_class(rr) != ns_c_in ||
		    strcasecmp(ns_rr_name(rr), qname) != 0)
			continue;
		rd = ns_rr_rdata(rr);
		/* Priority, weight, port, then the target: at least the root's one octet. */
		if (ns_rr_rdlen(rr) < 7)
			return -EBADMSG;
		rec.priority = ns_get16(rd);
		rec.weight = ns_get16(rd + 2);
		rec.port = ns_get16(rd + 4);
		rec.ttl = ns_rr_ttl(rr);
		k = ns_name_uncompress(ns_msg_base(h), ns_msg_end(h), rd + 6, target,
		                       sizeof(target));
		/* The name must end where the record does: nothing left over, nothing borrowed
		 * from the next record. */
		if (k < 0 || (size_t)k != (size_t)ns_rr_rdlen(rr) - 6)
			return -EBADMSG;
		/* "." is RFC 2782's "decidedly not available at this domain". */
		if (strcmp(target, ".") == 0 || target[0] == '\0') {
			unavailable = true;
			continue;
		}
		if (normalize_name(target, rec.target, sizeof(rec.target)) < 0)
			return -EBADMSG;
		/* Port 0 is nothing to connect to. */
		if (rec.port == 0)
			continue;
		if (n >= max)
			continue;
		ttl = MIN(ttl, rec.ttl);
		ret[n++] = rec;
	}
	if (n == 0)
		return unavailable ? -EHOSTDOWN : -ENOENT;
	*ret_n = n;
	*ret_ttl = ttl;
	return 0;
}

uint32_t eb_srv_random(uint32_t bound, void *userdata)
{
	/* Values past the last whole multiple of bound + 1 below 2^32 are drawn again, so that the
	 * remainder is uniform. */
	uint64_t n = (uint64_t)bound + 1, limit = (UINT64_C(1) << 32) / n * n;
	uint32_t v;
	ssize_t k;

	(void)userdata;
	for (;;) {
		/* Spreading load needs no secret: GRND_INSECURE never waits for the kernel's CRNG,
		 * which an early-boot seeder drawing through srv: may be the one to initialise. */
		k = getrandom(&v, sizeof(v), GRND_INSECURE);
		if (k < 0 && errno == EINVAL)
			k = getrandom(&v, sizeof(v), GRND_NONBLOCK);
		if (k < 0 && errno == EINTR)
			continue;
		if (k != (ssize_t)sizeof(v)) {
			struct timespec ts;

			/* A kernel before 5.6 with its CRNG not yet up: the clock spreads well
			 * enough. */
			clock_gettime(CLOCK_MONOTONIC, &ts);
			v = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u;
		}
		if ((uint64_t)v < limit)
			return (uint32_t)(v % n);
	}
}

/* Moves r[pick] to r[at], keeping the order of those between: RFC 2782 takes the chosen record
 * out of a list whose order (weight 0 first) the next draw depends on. */
static void take(struct eb_srv_record *r, size_t at, size_t pick)
{
	struct eb_srv_record t = r[pick];

	memmove(r + at + 1, r + at, (pick - at) * sizeof(*r));
	r[at] = t;
}

void eb_srv_order(struct eb_srv_record *r, size_t n, eb_srv_random_t rnd, void *userdata)
{
	/* By priority, and within one the weight-0 records first, both stable (insertion sort:
	 * at most EB_SRV_TARGETS_MAX records). */
	for (size_t i = 1; i < n; i++) {
		size_t j = i;

		while (j > 0 && (r[j - 1].priority > r[i].priority ||
		                 (r[j - 1].priority == r[i].priority && r[j - 1].weight > 0 &&
		                  r[i].weight == 0)))
			j--;
		take(r, j, i);
	}

	for (size_t a = 0; a < n;) {
		size_t b = a;

		while (b < n && r[b].priority == r[a].priority)
			b++;
		/* RFC 2782: sum the weights of those not yet ordered, draw a number from 0 to the
		 * sum, and take the first whose running sum is at least that. */
		for (size_t k = a; k + 1 < b; k++) {
			uint32_t sum = 0, x, run = 0;
			size_t pick = b - 1;

			for (size_t j = k; j < b; j++)
				sum += r[j].weight;
			if (sum == 0) {
				/* All 0: the RFC leaves the order free; uniform spreads
				 * the load. */
				pick = k + rnd((uint32_t)(b - k - 1), userdata);
			} else {
				x = rnd(sum, userdata);
				for (size_t j = k; j < b; j++) {
					run += r[j].weight;
					if (run >= x) {
						pick = j;
						break;
					}
				}
			}
			take(r, k, pick);
		}
		a = b;
	}
}

int eb_srv_new(const char *name, struct eb_srv **ret)
{
	_cleanup_free_ struct eb_srv *s = NULL;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	r = normalize_name(name, s->name, sizeof(s->name));
	if (r < 0)
		return r;
	snprintf(s->qname, sizeof(s->qname), EB_SRV_PREFIX "%s", s->name);
	*ret = TAKE_PTR(s);
	return 0;
}

struct eb_srv *eb_srv_free(struct eb_srv *s)
{
	free(s);
	return NULL;
}

/* The error an administrator reads: the address, what the DNS said, the name asked for, and
 * what to do. fmt has one %s, the owner name. */
#define LOOKUP_FAILED(s, r, fmt)                                                                   \
	(snprintf((s)->error, sizeof((s)->error), "srv:%s: " fmt, (s)->name, (s)->qname), (r))

static int lookup(struct eb_srv *s, const struct eb_lookup_bound *bound, struct eb_srv_record *recs,
                  size_t *ret_n, uint32_t *ret_ttl)
{
	_cleanup_free_ uint8_t *answer = NULL;
	int len, herr, r;

	answer = malloc(ANSWER_MAX);
	if (!answer)
		return -ENOMEM;
	len = eb_lookup_query(s->qname, ns_c_in, ns_t_srv, QUERY_TIMEOUT_S, QUERY_TRIES, answer,
	                      ANSWER_MAX, bound, &herr);
	if (len == -ECANCELED || len == -ENOMEM)
		return len;
	if (len == -EIO)
		return LOOKUP_FAILED(
		    s, -EAGAIN,
		    "cannot look up %s: the resolver's configuration (/etc/resolv.conf) is unusable");
	if (len == -ETIMEDOUT || len == -EAGAIN)
		return LOOKUP_FAILED(
		    s, -EAGAIN,
		    "no answer to the SRV query for %s in time; check the nameserver lines of /etc/resolv.conf");
	if (len < 0 && len != -ENXIO)
		return LOOKUP_FAILED(s, -EAGAIN, "cannot look up %s: out of resources");
	if (len < 0)
		switch (herr) {
		case HOST_NOT_FOUND:
			return LOOKUP_FAILED(
			    s, -ENOENT,
			    "no SRV records for %s (NXDOMAIN); add them to the zone, or use tcp://HOST[:PORT]");
		case NO_DATA:
			return LOOKUP_FAILED(
			    s, -ENOENT,
			    "no SRV records for %s (the name exists, NODATA); add them to the zone, or use tcp://HOST[:PORT]");
		case TRY_AGAIN:
			return LOOKUP_FAILED(
			    s, -EAGAIN,
			    "no answer to the SRV query for %s (SERVFAIL or timeout); check the nameserver lines of /etc/resolv.conf");
		default:
			return LOOKUP_FAILED(
			    s, -EAGAIN,
			    "the DNS server refused the SRV query for %s (REFUSED, FORMERR or NOTIMP); check the nameserver lines of /etc/resolv.conf");
		}
	r = eb_srv_parse(answer, MIN((size_t)len, (size_t)ANSWER_MAX), s->qname, recs,
	                 EB_SRV_TARGETS_MAX, ret_n, ret_ttl);
	if (r == -EHOSTDOWN)
		return LOOKUP_FAILED(
		    s, -ENOENT,
		    "the SRV record for %s says the service is not available there (target \".\"); use another name, or tcp://HOST[:PORT]");
	if (r == -ENOENT)
		return LOOKUP_FAILED(
		    s, -ENOENT,
		    "no usable SRV records for %s (every one has port 0); fix them, or use tcp://HOST[:PORT]");
	if (r < 0)
		return LOOKUP_FAILED(
		    s, -EBADMSG,
		    "the DNS answer for %s is malformed (a record cut short, or a target that is no host name)");
	return 0;
}

/* Whether a and b hold the same records, in whatever order. */
static bool same_records(const struct eb_srv_record *a, size_t na, const struct eb_srv_record *b,
                         size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {
		bool found = false;

		for (size_t j = 0; j < nb && !found; j++)
			found = a[i].priority == b[j].priority && a[i].weight == b[j].weight &&
			        a[i].port == b[j].port && strcasecmp(a[i].target, b[j].target) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* The records changed: a client leaves at a moment drawn over EB_SRV_LEAVE_SPREAD_S, so that a
 * fleet whose resolvers' caches expire together does not reconnect at once. */
static void changed(struct eb_srv *s, uint64_t now_ms)
{
	s->leave_ms = now_ms + 1 + eb_srv_random(EB_SRV_LEAVE_SPREAD_S * 1000, NULL);
}

int eb_srv_refresh(struct eb_srv *s, uint64_t now_ms, const struct eb_lookup_bound *bound)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX];
	uint32_t ttl;
	size_t n;
	int r;

	if (s->n > 0 && now_ms < s->expires_ms && s->failed != (UINT64_C(1) << s->n) - 1)
		return (int)s->n;
	r = lookup(s, bound, recs, &n, &ttl);
	/* A stop says nothing about the records. */
	if (r == -ECANCELED || r == -ENOMEM)
		return r;
	if (r < 0) {
		/* A server that does not answer is no reason to forget where the brokers were;
		 * one that says there are none is. */
		s->expires_ms = now_ms + EB_SRV_RETRY_S * 1000;
		if (r == -EAGAIN && s->n > 0) {
			s->failed = 0;
			return (int)s->n;
		}
		/* Records that are gone are a change. */
		if (s->n > 0)
			changed(s, now_ms);
		s->n = 0;
		return r;
	}
	eb_srv_take(s, recs, n, ttl, now_ms);
	return (int)n;
}

void eb_srv_take(struct eb_srv *s, struct eb_srv_record *recs, size_t n, uint32_t ttl,
                 uint64_t now_ms)
{
	n = MIN(n, (size_t)EB_SRV_TARGETS_MAX);
	/* The first answer is no change, and neither is one that orders the same records
	 * otherwise: a target passed over because it failed is still there. */
	if (s->expires_ms != 0 && !same_records(s->recs, s->n, recs, n))
		changed(s, now_ms);
	eb_srv_order(recs, n, eb_srv_random, NULL);
	memcpy(s->recs, recs, n * sizeof(*recs));
	s->n = n;
	s->failed = 0;
	ttl = MAX(MIN(ttl, (uint32_t)EB_SRV_TTL_MAX_S), (uint32_t)EB_SRV_TTL_MIN_S);
	s->expires_ms = now_ms + (uint64_t)ttl * 1000;
	s->error[0] = '\0';
}

bool eb_srv_expired(const struct eb_srv *s, uint64_t now_ms)
{
	return now_ms >= s->expires_ms;
}

const struct eb_srv_record *eb_srv_target(const struct eb_srv *s, size_t i)
{
	return i < s->n ? &s->recs[i] : NULL;
}

void eb_srv_failed(struct eb_srv *s, size_t i)
{
	if (i < s->n)
		s->failed |= UINT64_C(1) << i;
}

bool eb_srv_still_best(const struct eb_srv *s, const char *host, uint16_t port)
{
	const struct eb_srv_record *found = NULL;

	for (size_t i = 0; i < s->n; i++)
		if (s->recs[i].port == port && strcasecmp(s->recs[i].target, host) == 0) {
			found = &s->recs[i];
			break;
		}
	/* Ordered by priority: the first record has the lowest number there is. */
	return found && s->n > 0 && found->priority == s->recs[0].priority;
}

/* The index of host:port among the targets, or s->n. */
static size_t find(const struct eb_srv *s, const char *host, uint16_t port)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->recs[i].port == port && strcasecmp(s->recs[i].target, host) == 0)
			break;
	return i;
}

bool eb_srv_has_peer(const struct eb_srv *s, const char *host, uint16_t port)
{
	size_t at = find(s, host, port);

	for (size_t i = 0; i < s->n && at < s->n; i++)
		if (i != at && s->recs[i].priority == s->recs[at].priority)
			return true;
	return false;
}

size_t eb_srv_try_order(const struct eb_srv *s, const char *left_host, uint16_t left_port,
                        size_t *ret)
{
	size_t left = left_host ? find(s, left_host, left_port) : s->n, k = 0;
	bool placed = left >= s->n;

	/* The records are ordered by priority: the left one goes before the first record past
	 * it of another priority, or last. */
	for (size_t i = 0; i < s->n; i++) {
		if (i == left)
			continue;
		if (!placed && i > left && s->recs[i].priority != s->recs[left].priority) {
			ret[k++] = left;
			placed = true;
		}
		ret[k++] = i;
	}
	if (!placed)
		ret[k++] = left;
	return k;
}

bool eb_srv_should_leave(struct eb_srv *s, const char *host, uint16_t port, uint64_t now_ms)
{
	if (s->leave_ms == 0)
		return false;
	/* Still first after the change: nothing to follow. */
	if (eb_srv_still_best(s, host, port)) {
		s->leave_ms = 0;
		return false;
	}
	return now_ms >= s->leave_ms;
}

void eb_srv_settled(struct eb_srv *s)
{
	s->leave_ms = 0;
}

const char *eb_srv_error(const struct eb_srv *s)
{
	return s->error[0] ? s->error : "no error";
}
