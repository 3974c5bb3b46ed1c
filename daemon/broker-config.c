/* SPDX-License-Identifier: MIT */
/* The broker's configuration: read at start, read again on SIGHUP (reload), and the descriptor
 * limit the session limits need. */
#include "broker-config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <systemd/sd-daemon.h>

#include "broker.h"
#include "confdir.h"
#include "config-diff.h"
#include "log.h"
#include "macro.h"
#include "serve.h"
#include "session.h"
#include "time-util.h"
#include "upstream.h"

/* The journal's catalog (catalog/entropy-broker.catalog) explains this one. */
#define MSGID_RELOAD_FAILED "6da76a98a1654939a53ddffd70c463b3"
/* STATUS= carries the first error of a failed reload, cut to this. */
#define RELOAD_ERROR_MAX 300

static char *mfree_str(char *p)
{
	free(p);
	return NULL;
}

static inline void confdir_freep(char ***p)
{
	*p = eb_confdir_free(*p);
}

/* Logs each line of errors (one error a line) and hands the first to *ret_error. */
static int log_errors(int r, const char *errors, const char *fallback, char **ret_error)
{
	const char *p = errors ? errors : fallback;

	if (ret_error) {
		*ret_error = strndup(p, strcspn(p, "\n"));
		if (!*ret_error)
			return log_oom();
	}
	while (*p) {
		size_t n = strcspn(p, "\n");

		log_error("%.*s", (int)n, p);
		p += n + (p[n] == '\n');
	}
	return r;
}

/* The configuration is read as eb-brokerd.conf(5) says: the drop-ins (the package's in
 * EB_CONF_VENDOR_DIR, the administrator's in MAIN.d/, together in the order of their names, a
 * name in MAIN.d/ masking the package's), then MAIN itself, which has the last word. With
 * --config PATH the package's drop-ins are left out: PATH and PATH.d/ are the whole of it. */
int broker_config_load(const char *path, struct eb_conf **ret, char **ret_error)
{
	const char *main_path = path ? path : EB_CONF_DEFAULT_PATH;
	_cleanup_free_ char *error = NULL, *dropin_dir = NULL;
	_cleanup_(confdir_freep) char **files = NULL;
	struct eb_conf *conf = NULL;
	const char *dirs[2];
	unsigned n_dirs = 0, n = 0;
	bool have_main;
	int r;

	if (asprintf(&dropin_dir, "%s.d", main_path) < 0)
		return log_oom();
	if (!path)
		dirs[n_dirs++] = EB_CONF_VENDOR_DIR;
	dirs[n_dirs++] = dropin_dir;
	r = eb_confdir_list(dirs, n_dirs, &files, &n);
	if (r < 0) {
		r = log_error_errno(r, "Failed to list the drop-ins in %s%s%s: %m",
		                    path ? "" : EB_CONF_VENDOR_DIR, path ? "" : " and ",
		                    dropin_dir);
		if (ret_error &&
		    asprintf(ret_error, "cannot list the drop-ins in %s", dropin_dir) < 0)
			*ret_error = NULL;
		return r;
	}
	have_main = path || access(main_path, F_OK) == 0 || errno != ENOENT;
	if (have_main) {
		char **t = reallocarray(files, n + 2, sizeof(*files));

		if (!t)
			return log_oom();
		files = t;
		files[n] = strdup(main_path);
		if (!files[n])
			return log_oom();
		files[++n] = NULL;
	}
	if (n == 0) {
		log_notice("No %s and no drop-ins; running with defaults and no users", main_path);
		return eb_conf_new_default(ret);
	}
	if (!have_main)
		log_notice("No %s; running with the drop-ins alone", main_path);
	for (unsigned i = 0; i < n; i++)
		log_debug("Reading %s", files[i]);

	r = eb_conf_load_files((const char *const *)files, n, &conf, &error);
	if (r < 0)
		return log_errors(r, error, "Failed to load the configuration: out of memory",
		                  ret_error);
	r = eb_conf_load_keys(conf, &error);
	if (r < 0) {
		eb_conf_free(conf); /* wipes the keys loaded before the one that failed */
		return log_errors(r, error, "Failed to load the keys: out of memory", ret_error);
	}
	*ret = conf;
	return 0;
}

static bool same_string(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* [upstream]'s client was made at start: its brokers and user stay, and so does drawing for a
 * section added now; the thresholds take effect at once, a section removed stops the drawing (its
 * low water reads 0), and another key-file= or key-id= (or key) for the same brokers and user is
 * staged for the next connection (upstream_key_stage()). */
static void keep_upstream(struct eb_conf_upstream *old, struct eb_conf_upstream *new)
{
	if (!old->set && new->set)
		log_notice("[upstream] added; it takes effect at the next restart");
	if (!old->set || !new->set || upstream_same_peer(old, new))
		return;
	log_notice("[upstream] broker= or user= changed; they take effect at the next restart, "
	           "with the key-file= and key-id= they had");
	for (unsigned i = 0; i < EB_CONF_UPSTREAM_MAX; i++)
		SWAP(new->brokers[i], old->brokers[i]);
	SWAP(new->n_brokers, old->n_brokers);
	SWAP(new->user, old->user);
	SWAP(new->key_file, old->key_file);
	SWAP(new->key_id, old->key_id);
}

/* What only a restart can change stays as it is; the reloaded file is told so. */
static void keep_restart_only(struct eb_conf *old, struct eb_conf *new)
{
	bool listen_same = old->n_listen == new->n_listen;

	if (new->capacity_bits != old->capacity_bits) {
		log_notice("capacity-bits changed to %" PRIu64
		           "; it takes effect at the next restart",
		           new->capacity_bits);
		new->capacity_bits = old->capacity_bits;
	}
	if (!same_string(new->seed_file, old->seed_file)) {
		log_notice("seed-file changed to \"%s\"; it takes effect at the next restart",
		           new->seed_file ? new->seed_file : "");
		SWAP(new->seed_file, old->seed_file);
	}
	for (unsigned i = 0; listen_same && i < old->n_listen; i++)
		listen_same = same_string(old->listen[i], new->listen[i]);
	if (!listen_same) {
		log_notice("listen= changed; it takes effect at the next restart");
		for (unsigned i = 0; i < EB_CONF_LISTEN_MAX; i++)
			SWAP(new->listen[i], old->listen[i]);
		SWAP(new->n_listen, old->n_listen);
	}
	if (new->handshake_threads != old->handshake_threads) {
		log_notice("handshake-threads changed; it takes effect at the next restart");
		new->handshake_threads = old->handshake_threads;
	}
	keep_upstream(&old->upstream, &new->upstream);
}

/* Every session is a descriptor. With fewer than the limits need, accept() fails with EMFILE
 * before max-sessions is reached, and the listeners pause for a peer that the limits would have
 * let in: raise the soft limit to what they need, as far as the hard one allows. */
void broker_config_raise_nofile(const struct eb_conf *conf)
{
	rlim_t want = (rlim_t)conf->max_sessions + conf->max_local_sessions + conf->max_lingering +
	              EB_CONF_LISTEN_MAX + 64;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = MIN(want, rl.rlim_max);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		log_warning(
		    "Open files are limited to %llu, fewer than max-sessions + max-local-sessions + max-lingering (%u + %u + %u) need; raise LimitNOFILE=",
		    (unsigned long long)rl.rlim_cur, conf->max_sessions, conf->max_local_sessions,
		    conf->max_lingering);
}

/* The key of was that k is again: the same id (or none), bytes and hash. */
static const struct eb_user_key *same_key(const struct eb_user *was, const struct eb_user *u,
                                          const struct eb_user_key *k)
{
	for (unsigned i = 0; was && was->key_hash == u->key_hash && i < was->n_keys; i++)
		if (same_string(was->keys[i].id, k->id) &&
		    CRYPTO_memcmp(was->keys[i].key, k->key, EB_KEY_SIZE) == 0)
			return &was->keys[i];
	return NULL;
}

unsigned broker_config_number_keys(struct broker *b, const struct eb_conf *old, struct eb_conf *new,
                                   unsigned *ret_removed)
{
	unsigned added = 0, removed = 0;

	for (unsigned i = 0; i < new->n_users; i++) {
		struct eb_user *u = &new->users[i];
		const struct eb_user *was = old ? eb_conf_find_user(old, u->name) : NULL;

		for (unsigned j = 0; j < u->n_keys; j++) {
			const struct eb_user_key *k = same_key(was, u, &u->keys[j]);

			u->keys[j].serial = k ? k->serial : ++b->last_key_serial;
			added += !k;
		}
	}
	for (unsigned i = 0; old && i < old->n_users; i++) {
		const struct eb_user *was = &old->users[i];
		const struct eb_user *u = eb_conf_find_user(new, was->name);

		for (unsigned j = 0; j < was->n_keys; j++)
			removed += !(u && eb_user_key_by_serial(u, was->keys[j].serial));
	}
	if (ret_removed)
		*ret_removed = removed;
	return added;
}

/* A reload that failed ends the reload state as one that succeeded does (systemd waits for
 * READY=1), but says so where "systemctl status" shows it: STATUS= names the first error until a
 * reload succeeds, ERRNO= is set, and one journal line with its own message ID says that the
 * running configuration is not the one on disk. */
static void reload_failed(struct broker *b, int r, const char *error)
{
	char *copy = strdup(error ? error : "out of memory");

	if (copy) {
		/* STATUS= is one line: the error is one already, and long ones are cut. */
		if (strlen(copy) > RELOAD_ERROR_MAX)
			memcpy(copy + RELOAD_ERROR_MAX - 3, "...", 4);
		free(b->reload_error);
		b->reload_error = copy;
	}
	b->reload_failures++;
	b->last_reload_ms = eb_wall_ms();
	snprintf(b->reload_text, sizeof(b->reload_text), "%.*s", (int)sizeof(b->reload_text) - 1,
	         error ? error : "out of memory");
	log_struct(LOG_ERR, "MESSAGE_ID=" MSGID_RELOAD_FAILED,
	           "Reload failed, keeping the running configuration: %s",
	           error ? error : "out of memory");
	(void)sd_notifyf(false, "READY=1\nERRNO=%d", -r);
	broker_notify_status(b);
}

struct rebind {
	const struct eb_conf *old, *new;
	unsigned key_gone; /* sessions closed: their user stays, the key they logged in with not */
};

static int rebind_session(struct registry_entry *e, void *userdata)
{
	struct rebind *rb = userdata;
	uint64_t serial = session_key_serial(session_of(e));
	const struct eb_user *u =
	    e->user >= 0 ? eb_conf_find_user(rb->new, rb->old->users[e->user].name) : NULL;
	int user = session_rebind(session_of(e), rb->old, rb->new);

	rb->key_gone += user < 0 && serial && u && !eb_user_key_by_serial(u, serial);
	return user;
}

/* The switch to new, in one step: nothing between its first line and its last reads the
 * configuration, the quotas, the totals, the users' counts or a session's user, so none of them
 * is ever seen half old and half new. What only a restart changes is kept first, under the write
 * lock: a handshake on a worker reads the configuration it replaces. Returns how many sessions
 * are closing after it. */
static unsigned switch_config(struct broker *b, struct eb_conf *new, struct sched_quota **quotas,
                              struct user_totals **totals, unsigned **counts,
                              unsigned ret_keys[static 3])
{
	struct eb_conf *old = b->conf;
	struct rebind rb = {old, new, 0};
	unsigned closing;

	pthread_rwlock_wrlock(&b->conf_lock);
	keep_restart_only(old, new);
	ret_keys[0] = broker_config_number_keys(b, old, new, &ret_keys[1]);
	b->conf = new;
	pthread_rwlock_unlock(&b->conf_lock);
	SWAP(b->quotas, *quotas);
	SWAP(b->totals, *totals);
	closing =
	    registry_rebind(&b->registry, TAKE_PTR(*counts), new->n_users, rebind_session, &rb);
	/* A handshake on a worker looks keys up in the old conf or in the new, never in one
	 * being freed: every lookup that could see old was under the read lock, before ours. */
	eb_conf_free(old); /* wipes the old keys */
	ret_keys[2] = rb.key_gone;
	return closing;
}

/* SIGHUP: users, keys, roles, caps, quotas and thresholds are read again. A file that does not
 * load changes nothing. Sessions whose access was revoked are closed; the others carry on, and
 * each user's quota and totals keep what they had. */
void broker_config_reload(struct broker *b)
{
	_cleanup_free_ struct sched_quota *quotas = NULL;
	_cleanup_free_ struct user_totals *totals = NULL;
	_cleanup_free_ unsigned *counts = NULL;
	struct eb_conf *new = NULL;
	unsigned before = b->registry.n_sessions, closing, keys[3];
	_cleanup_free_ char *error = NULL;
	struct upstream_key upkey = {};
	char changes[1024], upstream_text[EB_TEXT_MAX];
	int r;

	/* systemd (Type=notify-reload) wants the time the reload began with RELOADING=1, and
	 * READY=1 to end it whether or not it succeeded: the outcome is in STATUS= and ERRNO=. */
	(void)sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, eb_now_ns() / 1000);
	log_info("Reloading the configuration");
	r = broker_config_load(b->config_path, &new, &error);
	if (r < 0) {
		reload_failed(b, r, error);
		return;
	}
	/* [upstream]'s key is loaded as the users' are: a file that does not load fails the
	 * reload, and nothing changes. */
	r = upstream_key_check(b->upstream, &b->conf->upstream, &new->upstream, &upkey, &error);
	if (r < 0) {
		explicit_bzero(&upkey, sizeof(upkey));
		eb_conf_free(new);
		reload_failed(b, r, error);
		return;
	}
	quotas = calloc(MAX(new->n_users, 1u), sizeof(*quotas));
	totals = calloc(MAX(new->n_users, 1u), sizeof(*totals));
	counts = calloc(MAX(new->n_users, 1u), sizeof(*counts));
	if (!quotas || !totals || !counts) {
		log_oom();
		explicit_bzero(&upkey, sizeof(upkey));
		eb_conf_free(new);
		reload_failed(b, -ENOMEM, NULL);
		return;
	}
	for (unsigned i = 0; i < new->n_users; i++) {
		const struct eb_user *u = eb_conf_find_user(b->conf, new->users[i].name);

		if (u) {
			quotas[i] = b->quotas[u - b->conf->users];
			totals[i] = b->totals[u - b->conf->users];
		}
	}
	broker_config_raise_nofile(new);
	/* What changed is told before the switch, which frees the old file. */
	config_diff(b->conf, new, changes, sizeof(changes));
	config_diff(b->conf, new, b->reload_text, sizeof(b->reload_text));
	closing = switch_config(b, new, &quotas, &totals, &counts, keys);
	upstream_key_stage(b->upstream, &upkey, upstream_text, sizeof(upstream_text));
	log_info("Reloaded %s: %u users; %u of %u sessions kept; %s; keys: %u added, %u removed, "
	         "%u sessions closed for a removed key%s%s",
	         new->path ? new->path : "the configuration", new->n_users,
	         b->registry.n_sessions - closing, before, changes, keys[0], keys[1], keys[2],
	         upstream_text[0] ? "; " : "", upstream_text);
	if (upstream_text[0]) {
		size_t n = strlen(b->reload_text);

		snprintf(b->reload_text + n, sizeof(b->reload_text) - n, "; %s", upstream_text);
	}
	b->reloads++;
	b->config_loaded_ms = b->last_reload_ms = eb_wall_ms();
	serve_pool_changed(b); /* the thresholds may have moved */
	b->reload_error = mfree_str(b->reload_error);
	(void)sd_notify(false, "READY=1\nERRNO=0");
	broker_notify_status(b);
}
