/* SPDX-License-Identifier: MIT */
/* The keys a configuration may hold, and the parser of each one's value. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account.h"
#include "conf-internal.h"
#include "macro.h"
#include "proto.h"
#include "uri.h"

static int parse_capacity(struct conf_ctx *c, const char *value, void *field);
static int parse_percent(struct conf_ctx *c, const char *value, void *field);
static int parse_seed_file(struct conf_ctx *c, const char *value, void *field);
static int parse_bool(struct conf_ctx *c, const char *value, void *field);
static int parse_key_hash(struct conf_ctx *c, const char *value, void *field);
static int parse_save_interval(struct conf_ctx *c, const char *value, void *field);
static int parse_status_interval(struct conf_ctx *c, const char *value, void *field);
static int parse_max_sessions(struct conf_ctx *c, const char *value, void *field);
static int parse_timeout(struct conf_ctx *c, const char *value, void *field);
static int parse_threads(struct conf_ctx *c, const char *value, void *field);
static int parse_listen(struct conf_ctx *c, const char *value, void *field);
static int parse_roles(struct conf_ctx *c, const char *value, void *field);
static int parse_key_file(struct conf_ctx *c, const char *value, void *field);
static int parse_key_id(struct conf_ctx *c, const char *value, void *field);
static int parse_uid(struct conf_ctx *c, const char *value, void *field);
static int parse_gid(struct conf_ctx *c, const char *value, void *field);
static int parse_credit(struct conf_ctx *c, const char *value, void *field);
static int parse_quota(struct conf_ctx *c, const char *value, void *field);
static int parse_upstream_broker(struct conf_ctx *c, const char *value, void *field);
static int parse_user_name(struct conf_ctx *c, const char *value, void *field);
static int parse_draw_bits(struct conf_ctx *c, const char *value, void *field);
static int parse_proxy_from(struct conf_ctx *c, const char *value, void *field);

/* Every key the file may hold. A key not here is an error, so that a typo cannot silently leave
 * a default (say, an unlimited quota) in place. */
static const struct conf_item items[] = {
    {CONF_SECTION_BROKER, "capacity-bits", parse_capacity, offsetof(struct eb_conf, capacity_bits),
     false, "a number 4096..2147483648, multiple of 512"},
    {CONF_SECTION_BROKER, "low-water-percent", parse_percent,
     offsetof(struct eb_conf, low_water_pct), false, "a number 0..100"},
    {CONF_SECTION_BROKER, "high-water-percent", parse_percent,
     offsetof(struct eb_conf, high_water_pct), false, "a number 0..100"},
    {CONF_SECTION_BROKER, "seed-file", parse_seed_file, offsetof(struct eb_conf, seed_file), false,
     "an absolute path, or nothing to disable the seed file"},
    {CONF_SECTION_BROKER, "credit-seed-file", parse_bool,
     offsetof(struct eb_conf, credit_seed_file), false, "yes, no, true, false, 1 or 0"},
    {CONF_SECTION_BROKER, "seed-save-interval-sec", parse_save_interval,
     offsetof(struct eb_conf, seed_save_interval_s), false, "a number of seconds 1..604800"},
    {CONF_SECTION_BROKER, "status-interval-sec", parse_status_interval,
     offsetof(struct eb_conf, status_interval_s), false, "a number of seconds 1..86400"},
    {CONF_SECTION_BROKER, "max-sessions", parse_max_sessions,
     offsetof(struct eb_conf, max_sessions), false, "a number 1..65536"},
    {CONF_SECTION_BROKER, "max-local-sessions", parse_max_sessions,
     offsetof(struct eb_conf, max_local_sessions), false, "a number 1..65536"},
    {CONF_SECTION_BROKER, "max-handshakes", parse_max_sessions,
     offsetof(struct eb_conf, max_handshakes), false, "a number 1..65536"},
    {CONF_SECTION_BROKER, "max-lingering", parse_max_sessions,
     offsetof(struct eb_conf, max_lingering), false, "a number 1..65536"},
    {CONF_SECTION_BROKER, "max-handshakes-per-address", parse_max_sessions,
     offsetof(struct eb_conf, max_handshakes_per_address), false, "a number 1..65536"},
    {CONF_SECTION_BROKER, "hello-timeout-sec", parse_timeout,
     offsetof(struct eb_conf, hello_timeout_s), false, "a number of seconds 1..3600"},
    {CONF_SECTION_BROKER, "frame-timeout-sec", parse_timeout,
     offsetof(struct eb_conf, frame_timeout_s), false, "a number of seconds 1..3600"},
    {CONF_SECTION_BROKER, "handshake-threads", parse_threads,
     offsetof(struct eb_conf, handshake_threads), false, "auto, or a number 0..64"},
    {CONF_SECTION_BROKER, "listen", parse_listen, offsetof(struct eb_conf, listen), true,
     "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]"},
    {CONF_SECTION_BROKER, "proxy-protocol-from", parse_proxy_from,
     offsetof(struct eb_conf, proxy_from), false,
     "IP addresses or networks (192.0.2.1, 10.0.0.0/8, 2001:db8::/32), separated by commas"},
    {CONF_SECTION_USER, "role", parse_roles, offsetof(struct eb_user, roles), false,
     "a comma-separated list of source, sink, admin"},
    {CONF_SECTION_USER, "key-file", conf_parse_user_key_file, offsetof(struct eb_user, keys), false,
     "an absolute path"},
    {CONF_SECTION_USER, "key", conf_parse_user_key, offsetof(struct eb_user, keys), true,
     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
    {CONF_SECTION_USER, "key-hash", parse_key_hash, offsetof(struct eb_user, key_hash), false,
     "sha384 or sha256"},
    {CONF_SECTION_USER, "unix-uid", parse_uid, offsetof(struct eb_user, unix_uids), false,
     "uids or user names, separated by commas"},
    {CONF_SECTION_USER, "unix-gid", parse_gid, offsetof(struct eb_user, unix_gids), false,
     "gids or group names, separated by commas"},
    {CONF_SECTION_USER, "max-credit-per-byte", parse_credit,
     offsetof(struct eb_user, max_credit_per_byte), false, "a number of bits 0..8"},
    {CONF_SECTION_USER, "quota-bits-per-hour", parse_quota,
     offsetof(struct eb_user, quota_bits_per_hour), false, "a number of bits, 0 for no quota"},
    {CONF_SECTION_USER, "max-sessions", parse_max_sessions, offsetof(struct eb_user, max_sessions),
     false, "a number 1..65536"},
    {CONF_SECTION_USER, "downstream-broker", parse_bool,
     offsetof(struct eb_user, downstream_broker), false, "yes, no, true, false, 1 or 0"},
    {CONF_SECTION_USER, "guest", parse_bool, offsetof(struct eb_user, guest), false,
     "yes, no, true, false, 1 or 0"},
    {CONF_SECTION_UPSTREAM, "broker", parse_upstream_broker,
     offsetof(struct eb_conf_upstream, brokers), true,
     "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH, vsock://CID[:PORT], virtio:NAME or srv:NAME"},
    {CONF_SECTION_UPSTREAM, "user", parse_user_name, offsetof(struct eb_conf_upstream, user), false,
     "a user name of 1..64 letters, digits, \".\", \"_\" or \"-\""},
    {CONF_SECTION_UPSTREAM, "key-file", parse_key_file, offsetof(struct eb_conf_upstream, key_file),
     false, "an absolute path"},
    {CONF_SECTION_UPSTREAM, "key-id", parse_key_id, offsetof(struct eb_conf_upstream, key_id),
     false, "a key id: 1..32 letters, digits, \".\", \"_\" or \"-\""},
    {CONF_SECTION_UPSTREAM, "low-water-percent", parse_percent,
     offsetof(struct eb_conf_upstream, low_water_pct), false, "a number 0..100"},
    {CONF_SECTION_UPSTREAM, "draw-bits", parse_draw_bits,
     offsetof(struct eb_conf_upstream, draw_bits), false,
     "a number of bits 512..2147483648, multiple of 512"},
};

_Static_assert(EB_CONF_LISTEN_MAX == 16, "parse_listen() names the limit");
_Static_assert(EB_CONF_UPSTREAM_MAX == 16, "parse_upstream_broker() names the limit");
_Static_assert(EB_CONF_PROXY_FROM_MAX == 16, "parse_proxy_from() names the limit");
_Static_assert(ELEMENTSOF(items) <= 64, "ctx.seen has a bit per item");
_Static_assert(ELEMENTSOF(items) <= CONF_ITEMS_MAX, "item_place too small");

/* A decimal number with nothing around it: strtoull() alone takes signs, spaces and "0x". */
static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_unsigned(const char *value, unsigned min, unsigned max, void *field)
{
	uint64_t v;
	int r;

	r = parse_u64(value, min, max, &v);
	if (r < 0)
		return r;
	*(unsigned *)field = (unsigned)v;
	return 0;
}

/* A number of bits from min to 2^31 in whole 512-bit blocks, the unit the pool conditions input
 * into and hands out (see eb_pool_new()). */
static int parse_blocks(const char *value, uint64_t min, void *field)
{
	uint64_t v;
	int r;

	r = parse_u64(value, min, UINT64_C(1) << 31, &v);
	if (r < 0)
		return r;
	if (v % 512 != 0)
		return -EINVAL;
	*(uint64_t *)field = v;
	return 0;
}

static int parse_capacity(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_blocks(value, 4096, field);
}

static int parse_percent(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 0, 100, field);
}

static int parse_save_interval(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 7 * 24 * 3600, field);
}

static int parse_status_interval(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 24 * 3600, field);
}

static int parse_max_sessions(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 65536, field);
}

static int parse_timeout(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 3600, field);
}

static int parse_threads(struct conf_ctx *c, const char *value, void *field)
{
	unsigned n;
	int r;

	(void)c;
	if (strcmp(value, "auto") == 0) {
		*(int *)field = EB_CONF_HANDSHAKE_THREADS_AUTO;
		return 0;
	}
	r = parse_unsigned(value, 0, EB_CONF_HANDSHAKE_THREADS_MAX, &n);
	if (r < 0)
		return r;
	*(int *)field = (int)n;
	return 0;
}

static int parse_credit(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 0, 8, field);
}

static int parse_quota(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_u64(value, 0, UINT64_MAX, field);
}

static int parse_key_hash(struct conf_ctx *c, const char *value, void *field)
{
	enum eb_key_hash h = eb_key_hash_from_string(value);

	(void)c;
	if (h < 0)
		return -EINVAL;
	*(enum eb_key_hash *)field = h;
	return 0;
}

static int parse_bool(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	if (strcasecmp(value, "yes") == 0 || strcasecmp(value, "true") == 0 ||
	    strcmp(value, "1") == 0)
		*(bool *)field = true;
	else if (strcasecmp(value, "no") == 0 || strcasecmp(value, "false") == 0 ||
	         strcmp(value, "0") == 0)
		*(bool *)field = false;
	else
		return -EINVAL;
	return 0;
}

static int set_string(const char *value, void *field)
{
	char *s = strdup(value);

	if (!s)
		return -ENOMEM;
	free(*(char **)field);
	*(char **)field = s;
	return 0;
}

static int parse_seed_file(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	if (value[0] != '\0' && value[0] != '/')
		return -EINVAL;
	return set_string(value, field);
}

static int parse_key_file(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	if (value[0] != '/')
		return -EINVAL;
	return set_string(value, field);
}

static int parse_key_id(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	if (!eb_key_id_valid(value))
		return -EINVAL;
	return set_string(value, field);
}

static int parse_listen(struct conf_ctx *c, const char *value, void *field)
{
	char **listen = field;
	struct eb_uri u;
	int r;

	r = eb_uri_parse(value, &u);
	if (r < 0)
		return r;
	if (u.kind == EB_URI_SRV) {
		c->reason = "srv:NAME names brokers to connect to, not an address to listen on";
		return -EINVAL;
	}
	/* The same address twice would fail only later, at bind(), and less clearly. */
	for (unsigned i = 0; i < c->conf->n_listen; i++) {
		char a[512], b[512];
		struct eb_uri o;

		if (eb_uri_parse(listen[i], &o) >= 0 &&
		    strcmp(eb_uri_to_string(&o, a, sizeof(a)),
		           eb_uri_to_string(&u, b, sizeof(b))) == 0) {
			c->reason = "this address is already listed";
			return -EEXIST;
		}
	}
	if (c->conf->n_listen >= EB_CONF_LISTEN_MAX) {
		c->reason = "too many listen addresses (at most 16)";
		return -E2BIG;
	}
	listen[c->conf->n_listen] = strdup(value);
	if (!listen[c->conf->n_listen])
		return -ENOMEM;
	c->conf->n_listen++;
	return 0;
}

static int parse_upstream_broker(struct conf_ctx *c, const char *value, void *field)
{
	struct eb_conf_upstream *u = &c->conf->upstream;
	char **brokers = field;
	struct eb_uri uri;
	int r;

	r = eb_uri_parse(value, &uri);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < u->n_brokers; i++)
		if (strcmp(brokers[i], value) == 0) {
			c->reason = "this broker is already listed";
			return -EEXIST;
		}
	if (u->n_brokers >= EB_CONF_UPSTREAM_MAX) {
		c->reason = "too many upstream brokers (at most 16)";
		return -E2BIG;
	}
	brokers[u->n_brokers] = strdup(value);
	if (!brokers[u->n_brokers])
		return -ENOMEM;
	u->n_brokers++;
	return 0;
}

/* What eb-brokerd accepts as [user NAME], so that a typo here is not found at the upstream. */
static int parse_user_name(struct conf_ctx *c, const char *value, void *field)
{
	size_t n = strlen(value);

	(void)c;
	if (n == 0 || n > 64 ||
	    strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                  "0123456789._-") != n ||
	    strchr("._-", value[0]))
		return -EINVAL;
	return set_string(value, field);
}

static int parse_draw_bits(struct conf_ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_blocks(value, 512, field);
}

void conf_upstream_clear(struct eb_conf_upstream *u)
{
	for (unsigned i = 0; i < u->n_brokers; i++)
		free(u->brokers[i]);
	free(u->user);
	free(u->key_file);
	free(u->key_id);
	*u = (struct eb_conf_upstream){};
}

/* A number is an id; anything else is looked up as a name, through NSS as the system would. */
static int parse_account(struct conf_ctx *c, enum eb_account_kind kind, const char *value,
                         uint32_t *ret)
{
	int r;

	r = eb_account_resolve(kind, value, ret);
	/* check-source: allow einval-compare (account.h: -EINVAL is "neither an id nor a name") */
	if (r == -EINVAL || r == -ENOMEM)
		return r;
	if (r == -ESRCH)
		c->reason = kind == EB_ACCOUNT_USER ? "no such user" : "no such group";
	else if (r < 0)
		c->reason = kind == EB_ACCOUNT_USER ? "user lookup failed" : "group lookup failed";
	return r < 0 ? -ESRCH : 0;
}

/* After an item of a comma list (roles, accounts): 1 at its end, 0 past the comma before the
 * next item, -EINVAL for anything else. */
static int list_step(const char **p)
{
	*p += strspn(*p, " \t");
	if (**p == '\0')
		return 1;
	if (**p != ',')
		return -EINVAL;
	(*p)++;
	return 0;
}

/* A comma-separated list of accounts ("root, adm"), each an id or a name, at most
 * EB_CONF_UNIX_IDS_MAX, none twice. */
static int parse_accounts(struct conf_ctx *c, enum eb_account_kind kind, const char *value,
                          uint32_t *ids, unsigned *ret_n)
{
	uint32_t got[EB_CONF_UNIX_IDS_MAX];
	const char *p = value;
	unsigned n = 0;
	int r;

	for (;;) {
		char one[256];
		size_t len;

		p += strspn(p, " \t");
		len = strcspn(p, ", \t");
		if (len == 0 || len >= sizeof(one))
			return -EINVAL;
		if (n >= EB_CONF_UNIX_IDS_MAX) {
			c->reason = kind == EB_ACCOUNT_USER ? "too many users (at most 16)"
			                                    : "too many groups (at most 16)";
			return -E2BIG;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		r = parse_account(c, kind, one, &got[n]);
		if (r < 0)
			return r;
		for (unsigned i = 0; i < n; i++)
			if (got[i] == got[n]) {
				c->reason = "an account is listed twice";
				return -EEXIST;
			}
		n++;
		p += len;
		r = list_step(&p);
		if (r < 0)
			return r;
		if (r > 0)
			break;
	}
	memcpy(ids, got, n * sizeof(*ids));
	*ret_n = n;
	return 0;
}

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
               "uids and gids are 32 bits");

static int parse_uid(struct conf_ctx *c, const char *value, void *field)
{
	return parse_accounts(c, EB_ACCOUNT_USER, value, field,
	                      &c->conf->users[c->user].n_unix_uids);
}

static int parse_gid(struct conf_ctx *c, const char *value, void *field)
{
	return parse_accounts(c, EB_ACCOUNT_GROUP, value, field,
	                      &c->conf->users[c->user].n_unix_gids);
}

static int parse_roles(struct conf_ctx *c, const char *value, void *field)
{
	unsigned roles = 0;
	const char *p = value;
	int r;

	(void)c;
	for (;;) {
		size_t n;

		p += strspn(p, " \t");
		n = strcspn(p, ", \t");
		if (n == 6 && strncmp(p, "source", n) == 0)
			roles |= EB_ROLE_SOURCE;
		else if (n == 4 && strncmp(p, "sink", n) == 0)
			roles |= EB_ROLE_SINK;
		else if (n == 5 && strncmp(p, "admin", n) == 0)
			roles |= EB_ROLE_ADMIN;
		else
			return -EINVAL;
		p += n;
		r = list_step(&p);
		if (r < 0)
			return r;
		if (r > 0)
			break;
	}
	*(unsigned *)field = roles;
	return 0;
}

/* A comma-separated list of addresses and networks, none twice; nothing at all (a drop-in's
 * "proxy-protocol-from =") takes none. A later file's list replaces an earlier one whole. */
static int parse_proxy_from(struct conf_ctx *c, const char *value, void *field)
{
	struct eb_cidr got[EB_CONF_PROXY_FROM_MAX];
	const char *p = value + strspn(value, " \t");
	unsigned n = 0;
	int r;

	while (*p != '\0') { /* once per item; list_step() ends it, or refuses a trailing comma */
		char one[EB_CIDR_STRING_MAX + 1];
		size_t len;

		p += strspn(p, " \t");
		len = strcspn(p, ", \t");
		if (len == 0 || len >= sizeof(one))
			return -EINVAL;
		if (n >= EB_CONF_PROXY_FROM_MAX) {
			c->reason = "too many addresses (at most 16)";
			return -E2BIG;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		r = eb_cidr_parse(one, &got[n]);
		if (r < 0) {
			/* The item at fault, in a list of up to 16. */
			snprintf(c->reason_buf, sizeof(c->reason_buf),
			         "\"%s\" is not an IP address or a network (192.0.2.1, 10.0.0.0/8, "
			         "2001:db8::/32; no bit set past the prefix)",
			         one);
			c->reason = c->reason_buf;
			return r;
		}
		for (unsigned i = 0; i < n; i++)
			if (memcmp(&got[i], &got[n], sizeof(got[n])) == 0) {
				snprintf(c->reason_buf, sizeof(c->reason_buf), "%s is listed twice",
				         one);
				c->reason = c->reason_buf;
				return -EEXIST;
			}
		n++;
		p += len;
		r = list_step(&p);
		if (r < 0)
			return r;
		if (r > 0)
			break;
		if (*(p + strspn(p, " \t")) == '\0')
			return -EINVAL;
	}
	memcpy(field, got, n * sizeof(got[0]));
	c->conf->n_proxy_from = n;
	return 0;
}

void conf_listen_clear(struct eb_conf *conf)
{
	for (unsigned i = 0; i < conf->n_listen; i++) {
		free(conf->listen[i]);
		conf->listen[i] = NULL;
	}
	conf->n_listen = 0;
}

const struct conf_item *conf_find_item(enum conf_section s, const char *key, size_t *ret_index)
{
	for (size_t i = 0; i < ELEMENTSOF(items); i++)
		if (items[i].section == s && strcmp(items[i].key, key) == 0) {
			*ret_index = i;
			return &items[i];
		}
	return NULL;
}
