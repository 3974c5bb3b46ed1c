/* SPDX-License-Identifier: MIT */
/* Clones of a guest: one [user] with guest = yes, and the key it logged in with, drawing from two
 * live sessions at once. A VM restored or cloned from a snapshot carries its key with it, so
 * each copy connects as the one machine it was; the broker cannot tell which copy is the
 * original and serves them all, but it says so once (per key, every CLONE_LOG_INTERVAL_USEC),
 * counts them (EB_COUNTER_CLONES) and marks their sessions (EB_REPORT_CLONE). */
#include <inttypes.h>
#include <stdio.h>

#include "broker.h"
#include "conf.h"
#include "log.h"
#include "report.h"
#include "session-internal.h"
#include "session.h"

#define MSGID_CLONE "d06b61be4841454e8c5c772acb196431"
/* One line per key at most this often: a host that restores a snapshot again and again is told
 * once, and eb-brokerctl and the metrics count every copy. */
#define CLONE_LOG_INTERVAL_USEC (600 * 1000000ULL)
/* A slot whose drawing session closed while another drew beside it: the next session of the
 * key to draw looks for one that still does. */
#define CLONE_SLOT_LOOK UINT64_MAX

/* The slot of s's key among its user's, taken for it if it has none: a free one (no live
 * drawing session), the one used longest ago first. A user holds at most EB_USER_KEYS_MAX keys,
 * and a session over plain unix has none: CLONE_SLOTS is enough for every key a user has at
 * once; a reload that replaced keys leaves slots of keys that no session can use again. */
static struct clone_slot *slot_take(struct session *s, uint64_t serial)
{
	struct clone_slot *v = s->broker->totals[s->reg.user].clones, *pick = NULL;

	for (size_t i = 0; i < CLONE_SLOTS; i++)
		if (v[i].serial == serial && (v[i].session_id || v[i].used_usec))
			return &v[i];
	for (size_t i = 0; i < CLONE_SLOTS; i++)
		if (!pick || (v[i].session_id == 0) > (pick->session_id == 0) ||
		    ((v[i].session_id == 0) == (pick->session_id == 0) &&
		     v[i].used_usec < pick->used_usec))
			pick = &v[i];
	*pick = (struct clone_slot){.serial = serial};
	return pick;
}

/* Marks every other live session of s's user and key that has drawn; returns how many, and one
 * of them in *ret_other. A walk over the sessions, only when a slot says another may draw: a
 * guest that reconnects after its session ended never walks. */
static unsigned mark_others(struct session *s, uint64_t serial, struct session **ret_other)
{
	struct registry_entry *e;
	unsigned n = 0;

	registry_foreach_ready(e, &s->broker->registry) {
		struct session *o = session_of(e);

		if (o == s || e->user != s->reg.user || !o->drawing ||
		    session_key_serial(o) != serial)
			continue;
		o->clone = true;
		*ret_other = o;
		n++;
	}
	return n;
}

static void log_clone(struct session *s, uint64_t serial, const struct session *other, unsigned n)
{
	const struct eb_user *u = session_user(s);
	const struct eb_user_key *k = serial ? eb_user_key_by_serial(u, serial) : NULL;
	const char *key = !serial ? "(unix)" : k && k->id ? k->id : "(default)";
	char fields[512];

	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_CLONE
	         "\nEB_USER=%s\nEB_KEY_ID=%s\nEB_PEER=%s\nEB_OTHER_PEER=%s"
	         "\nEB_SESSIONS=%u",
	         u->name, key, s->peer, other->peer, n + 1);
	log_struct(
	    LOG_WARNING, fields,
	    "Guest %s (key %s) draws from %u sessions at once: %s and %s; copies of one "
	    "machine (a VM restored or cloned from a snapshot) share its RNG state until "
	    "each reseeds. Every copy is served; this key's copies are told at most every %u s",
	    u->name, key, n + 1, s->peer, other->peer,
	    (unsigned)(CLONE_LOG_INTERVAL_USEC / 1000000ULL));
}

void session_clones_draw(struct session *s)
{
	struct session *other = NULL;
	struct clone_slot *slot;
	uint64_t serial, now;
	unsigned n;

	/* Once per session, at its first GET: drawing is what a copy does. */
	if (s->drawing)
		return;
	s->drawing = true;
	if (!session_user(s)->guest)
		return;
	serial = session_key_serial(s);
	now = broker_now(s->broker);
	slot = slot_take(s, serial);
	slot->used_usec = now;
	/* The slot names no live drawing session: none draws but s. A session the slot names
	 * may have ended while a reload renumbered users (session_clones_leave() found no slot):
	 * the walk tells. */
	n = slot->session_id && slot->session_id != s->id ? mark_others(s, serial, &other) : 0;
	slot->session_id = s->id;
	if (n == 0)
		return;
	s->clone = true;
	broker_count(s->broker, EB_COUNTER_CLONES);
	if (slot->logged_usec != 0 && now - slot->logged_usec < CLONE_LOG_INTERVAL_USEC)
		return;
	slot->logged_usec = now;
	log_clone(s, serial, other, n);
}

void session_clones_leave(struct session *s)
{
	struct clone_slot *v;
	uint64_t serial;

	if (!s->drawing || s->reg.user < 0 || (unsigned)s->reg.user >= s->broker->conf->n_users)
		return;
	/* In a reload the user's index may be the old file's while the totals are the new's: a
	 * slot is found only by this session's id, which no other session ever has. */
	serial = session_key_serial(s);
	v = s->broker->totals[s->reg.user].clones;
	for (size_t i = 0; i < CLONE_SLOTS; i++)
		if (v[i].serial == serial && v[i].session_id == s->id)
			/* A clone leaves the others it drew beside: the next to draw looks. */
			v[i].session_id = s->clone ? CLONE_SLOT_LOOK : 0;
}
