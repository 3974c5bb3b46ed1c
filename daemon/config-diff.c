/* SPDX-License-Identifier: MIT */
#include "config-diff.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "conf.h"
#include "macro.h"

/* Appends to a line, keeping it terminated; past its end the line ends in "..." once. */
struct line {
	char *buf;
	size_t size, used;
	bool cut;
};

_printf_(2, 3) static void add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->cut)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->used, l->size - l->used, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < l->size - l->used) {
		l->used += (size_t)n;
		return;
	}
	l->cut = true;
	l->used = l->size - 1;
	if (l->size >= 4)
		memcpy(l->buf + l->size - 4, "...", 4);
}

enum change {
	CHANGE_ADDED,
	CHANGE_REMOVED,
	CHANGE_KEY,
	CHANGE_LIMITS,
	_CHANGE_MAX,
};

static const char *const change_names[_CHANGE_MAX] = {
    [CHANGE_ADDED] = "users added",
    [CHANGE_REMOVED] = "users removed",
    [CHANGE_KEY] = "keys changed",
    [CHANGE_LIMITS] = "limits changed",
};

static bool same_ids(const unsigned *a, unsigned na, const unsigned *b, unsigned nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/* A key that appears, goes or differs (its id, its bytes, its hash); compared in constant time,
 * as keys always are. */
static bool key_changed(const struct eb_user *a, const struct eb_user *b)
{
	bool changed = a->n_keys != b->n_keys || a->key_hash != b->key_hash;

	for (unsigned i = 0; !changed && i < a->n_keys; i++)
		changed = !a->keys[i].id != !b->keys[i].id ||
		          (a->keys[i].id && strcmp(a->keys[i].id, b->keys[i].id) != 0) ||
		          CRYPTO_memcmp(a->keys[i].key, b->keys[i].key, EB_KEY_SIZE) != 0;
	return changed;
}

/* Roles, the caps and quota, max-sessions, and who the user is over unix. */
static bool limits_changed(const struct eb_user *a, const struct eb_user *b)
{
	return a->roles != b->roles || a->max_credit_per_byte != b->max_credit_per_byte ||
	       a->quota_bits_per_hour != b->quota_bits_per_hour ||
	       a->max_sessions != b->max_sessions || a->downstream_broker != b->downstream_broker ||
	       !same_ids(a->unix_uids, a->n_unix_uids, b->unix_uids, b->n_unix_uids) ||
	       !same_ids(a->unix_gids, a->n_unix_gids, b->unix_gids, b->n_unix_gids);
}

static bool user_in(const struct eb_user *u, enum change c, const struct eb_conf *other)
{
	const struct eb_user *o = eb_conf_find_user(other, u->name);

	switch (c) {
	case CHANGE_ADDED:
	case CHANGE_REMOVED:
		return !o;
	case CHANGE_KEY:
		return o && key_changed(o, u);
	case CHANGE_LIMITS:
		return o && limits_changed(o, u);
	case _CHANGE_MAX:
		break;
	}
	return false;
}

static bool list_users(struct line *l, const struct eb_conf *old, const struct eb_conf *new,
                       enum change c, bool first)
{
	/* Removed users are found in the old file, the others in the new. */
	const struct eb_conf *from = c == CHANGE_REMOVED ? old : new;
	const struct eb_conf *other = c == CHANGE_REMOVED ? new : old;
	unsigned n = 0;

	for (unsigned i = 0; i < from->n_users; i++) {
		const struct eb_user *u = &from->users[i];

		if (!user_in(u, c, other))
			continue;
		if (n++ == 0)
			add(l, "%s%s: %s", first ? "" : "; ", change_names[c], u->name);
		else
			add(l, ", %s", u->name);
	}
	return n > 0;
}

static bool list_broker(struct line *l, const struct eb_conf *old, const struct eb_conf *new,
                        bool first)
{
	const struct {
		const char *key;
		unsigned a, b;
	} keys[] = {
	    {"low-water-pct", old->low_water_pct, new->low_water_pct},
	    {"high-water-pct", old->high_water_pct, new->high_water_pct},
	    {"max-sessions", old->max_sessions, new->max_sessions},
	    {"max-local-sessions", old->max_local_sessions, new->max_local_sessions},
	    {"max-handshakes", old->max_handshakes, new->max_handshakes},
	    {"max-handshakes-per-address", old->max_handshakes_per_address,
	     new->max_handshakes_per_address},
	    {"max-lingering", old->max_lingering, new->max_lingering},
	    {"hello-timeout-sec", old->hello_timeout_s, new->hello_timeout_s},
	    {"frame-timeout-sec", old->frame_timeout_s, new->frame_timeout_s},
	    {"status-interval-sec", old->status_interval_s, new->status_interval_s},
	    {"seed-save-interval-sec", old->seed_save_interval_s, new->seed_save_interval_s},
	    {"proxy-protocol-from", old->n_proxy_from, new->n_proxy_from},
	};
	bool proxy_same =
	    old->n_proxy_from == new->n_proxy_from &&
	    (old->n_proxy_from == 0 || memcmp(old->proxy_from, new->proxy_from,
	                                      old->n_proxy_from * sizeof(*old->proxy_from)) == 0);
	unsigned n = 0;

	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		bool changed = keys[i].a != keys[i].b ||
		               (strcmp(keys[i].key, "proxy-protocol-from") == 0 && !proxy_same);

		if (!changed)
			continue;
		if (n++ == 0)
			add(l, "%s[broker] changed: %s", first ? "" : "; ", keys[i].key);
		else
			add(l, ", %s", keys[i].key);
	}
	return n > 0;
}

void config_diff(const struct eb_conf *old, const struct eb_conf *new, char *buf, size_t size)
{
	struct line l = {buf, size, 0, false};
	bool any = false;

	if (size == 0)
		return;
	buf[0] = '\0';
	for (enum change c = 0; c < _CHANGE_MAX; c++)
		any |= list_users(&l, old, new, c, !any);
	any |= list_broker(&l, old, new, !any);
	if (!any)
		add(&l, "nothing changed");
}
