/* SPDX-License-Identifier: MIT */
/* srv:NAME broker addresses: the DNS SRV records _entropy-broker._tcp.NAME (RFC 2782), parsed,
 * put in the order a client tries them, and looked up again when their time is up. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The owner name's prefix: the service and protocol labels of RFC 2782. */
#define EB_SRV_PREFIX "_entropy-broker._tcp."
/* A domain name as text, without its final dot (RFC 1035 2.3.4: 255 octets on the wire). */
#define EB_SRV_NAME_MAX 253
/* The longest NAME in srv:NAME, so that the owner name fits. */
#define EB_SRV_DOMAIN_MAX (EB_SRV_NAME_MAX - (sizeof(EB_SRV_PREFIX) - 1))
/* Records taken from one answer; the rest are left out. A fleet's brokers are a few per site, and
 * each is a connection attempt in a pass. */
#define EB_SRV_TARGETS_MAX 32
/* The bounds on how long an answer is used before it is looked up again, whatever its TTL says:
 * a TTL of 0 must not make a fleet of long-lived clients query the DNS every few seconds, and
 * one of a week must not keep a client on a broker its administrator has moved. */
#define EB_SRV_TTL_MIN_S 30
#define EB_SRV_TTL_MAX_S 3600
/* A client leaves a target that changed records no longer put first at a moment drawn uniformly
 * over this many seconds after it saw the change, so that a fleet whose resolvers' caches expire
 * together does not reconnect together. */
#define EB_SRV_LEAVE_SPREAD_S 15
/* How long a failed look-up is trusted before asking again, while the last good answer is
 * used. */
#define EB_SRV_RETRY_S 5

struct eb_srv_record {
	uint16_t priority;
	uint16_t weight;
	uint16_t port;
	uint32_t ttl;
	char target[EB_SRV_NAME_MAX + 1];
};

/* Parses a DNS answer to the SRV query for qname: the SRV records of class IN owned by qname
 * (compared without case), at most max of them, in the answer's order. -EBADMSG for a message
 * that is not well formed, a record cut short, or a target that is no host name; -ENOENT when
 * the one record is the target "." (RFC 2782: the service is decidedly not available there) or
 * there is none. *ret_ttl is the least TTL taken. */
int eb_srv_parse(const uint8_t *msg, size_t len, const char *qname, struct eb_srv_record *ret,
                 size_t max, size_t *ret_n, uint32_t *ret_ttl);

/* A uniform random number in 0..bound. */
typedef uint32_t (*eb_srv_random_t)(uint32_t bound, void *userdata);
/* Puts records in RFC 2782's order: by priority, lowest first, and within one priority by
 * weighted random choice, each drawn with a chance proportional to its weight (weight 0 placed
 * first, so that it is chosen only when the draw is 0; all weights 0: uniform). */
void eb_srv_order(struct eb_srv_record *r, size_t n, eb_srv_random_t rnd, void *userdata);
/* rnd for eb_srv_order() from getrandom(). */
uint32_t eb_srv_random(uint32_t bound, void *userdata);

struct eb_lookup_bound;

/* One srv: address's state in a client: the ordered targets and when to look them up again. */
struct eb_srv;

/* -EINVAL for a NAME that is not a host name or is too long. */
int eb_srv_new(const char *name, struct eb_srv **ret);
struct eb_srv *eb_srv_free(struct eb_srv *s);
static inline void eb_srv_freep(struct eb_srv **s)
{
	if (*s)
		eb_srv_free(*s);
}

/* Looks the records up when there are none yet, their time is up, or every target failed since
 * the last look-up, waiting for the DNS no longer than bound allows (lookup.h); returns how many
 * targets there are (at least 1). On failure the error names the address, the owner name and the
 * DNS error (eb_srv_error()); -ENOENT for no such records, -EAGAIN for a server that did not
 * answer (in time), -ECANCELED for a stop. A temporary failure keeps the last good answer for
 * EB_SRV_RETRY_S. */
int eb_srv_refresh(struct eb_srv *s, uint64_t now_ms, const struct eb_lookup_bound *bound);
/* True when the answer's time (or a failed look-up's, EB_SRV_RETRY_S) is up. */
bool eb_srv_expired(const struct eb_srv *s, uint64_t now_ms);
/* The i-th target to try, in RFC 2782's order. */
const struct eb_srv_record *eb_srv_target(const struct eb_srv *s, size_t i);
/* Target i could not be reached; once all have, the next eb_srv_refresh() asks again. */
void eb_srv_failed(struct eb_srv *s, size_t i);
/* Whether host:port is still a target, and none of a lower priority number is: a client on it
 * may stay. */
bool eb_srv_still_best(const struct eb_srv *s, const char *host, uint16_t port);
/* Whether a client connected to host:port should leave it now: only once a look-up found the
 * records changed (another set of records, order aside, or none left) and they no longer put
 * host:port first, and then from a moment drawn over EB_SRV_LEAVE_SPREAD_S on. A target passed
 * over because it failed, with the records as they were, is no reason: a client stays on the
 * one that works. */
bool eb_srv_should_leave(struct eb_srv *s, const char *host, uint16_t port, uint64_t now_ms);
/* Whether host:port is a target and another of its priority is too: a peer a sink may move to
 * when host:port has only EMPTY to give (eb_client_leave()). A lower priority is a fallback, not
 * a peer. */
bool eb_srv_has_peer(const struct eb_srv *s, const char *host, uint16_t port);
/* The targets' indices in the order a pass tries them, into ret (EB_SRV_TARGETS_MAX): RFC 2782's,
 * except that left_host:left_port (NULL: none), left for being empty, comes after the others of
 * its priority, so that the pass moves to a peer and comes back to it only when the peers fail.
 * Returns how many. */
size_t eb_srv_try_order(const struct eb_srv *s, const char *left_host, uint16_t left_port,
                        size_t *ret);
/* A connection pass has chosen a target afresh: a change seen before it is followed. */
void eb_srv_settled(struct eb_srv *s);
/* Takes recs (n of them, the least TTL ttl) as a look-up's answer at now_ms: orders them, sets
 * when to look up again, and notes a change from the last answer. eb_srv_refresh()'s own; the
 * unit tests feed answers through it. */
void eb_srv_take(struct eb_srv *s, struct eb_srv_record *recs, size_t n, uint32_t ttl,
                 uint64_t now_ms);
const char *eb_srv_error(const struct eb_srv *s);
