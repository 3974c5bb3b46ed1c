/* SPDX-License-Identifier: MIT */
/* The broker's INI configuration (inih): [broker] and one [user NAME] section per user. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cidr.h"
#include "key.h"

#define EB_CONF_DEFAULT_PATH "/etc/entropy-broker/eb-brokerd.conf"
#define EB_CONF_USERS_MAX    4096
#define EB_CONF_LISTEN_MAX   16
#define EB_CONF_UPSTREAM_MAX 16
/* unix-uid= and unix-gid= each name at most this many accounts. */
#define EB_CONF_UNIX_IDS_MAX 16
/* proxy-protocol-from= names at most this many addresses or networks. */
#define EB_CONF_PROXY_FROM_MAX 16

/* A user holds at most this many keys, so that one can be staged beside the one in use. */
#define EB_USER_KEYS_MAX 8

/* One of a user's pre-shared keys: key-file= (no id) or key = ID PATH. */
struct eb_user_key {
	char *id;                 /* NULL: key-file='s, which has none */
	char *file;               /* the key file, an absolute path */
	char *origin;             /* "path:line" of its line, for the errors of loading it */
	uint8_t key[EB_KEY_SIZE]; /* loaded from file by eb_conf_load_keys() */
	bool loaded;
	uint64_t serial; /* the broker's: which version of the key this is (0: not numbered) */
};

struct eb_user {
	char *name;
	unsigned roles; /* enum eb_role bits */
	/* The user's keys, none when it connects over unix: only. The first is its default key,
	 * the one a bare user name names: key-file='s when it has one, else the first key=. */
	struct eb_user_key keys[EB_USER_KEYS_MAX];
	unsigned n_keys;
	enum eb_key_hash key_hash; /* the hash every key is bound to (default SHA-384) */
	uid_t unix_uids[EB_CONF_UNIX_IDS_MAX]; /* these uids over unix: are this user */
	unsigned n_unix_uids;
	gid_t unix_gids[EB_CONF_UNIX_IDS_MAX]; /* and members of these groups (primary, or */
	unsigned n_unix_gids;                  /* supplementary: eb_conf_find_unix_peer()) */
	unsigned max_credit_per_byte; /* 0..8; a source's claims are capped at this (default 8) */
	uint64_t quota_bits_per_hour; /* 0: no quota; pool bits a sink's draws may spend per hour */
	unsigned max_sessions;        /* default 128: authenticated sessions at once */
	bool downstream_broker; /* a broker drawing from this one: its HELLO may carry chain ids */
	/* guest = yes: each key is one machine, which draws over one session at a time; two
	 * sessions of one key drawing at once are copies of it (daemon/session-clones.c). */
	bool guest;
};

/* [upstream]: this broker draws from other brokers as a sink when its level is low. */
struct eb_conf_upstream {
	bool set;                            /* the section is there */
	char *brokers[EB_CONF_UPSTREAM_MAX]; /* broker=, tried in order with failover */
	unsigned n_brokers;
	char *user;             /* user= at the upstream; over unix: none is needed */
	char *key_file;         /* key-file=; NULL: the credential eb.key */
	char *key_id;           /* key-id=: the id of that key at the upstream; NULL: none */
	unsigned low_water_pct; /* default 50: draw when the level is below this */
	uint64_t draw_bits;     /* default 65536: what one refill asks for */
};

/* handshake-threads: TLS handshakes on worker threads, at most this many. */
#define EB_CONF_HANDSHAKE_THREADS_MAX  64
#define EB_CONF_HANDSHAKE_THREADS_AUTO (-1)

struct eb_conf {
	char *path;
	uint64_t capacity_bits;        /* default 1048576 */
	unsigned low_water_pct;        /* default 25: WAKE sources below this */
	unsigned high_water_pct;       /* default 90: SLEEP sources at this */
	char *seed_file;               /* default /var/lib/entropy-broker/seed; "" disables */
	bool credit_seed_file;         /* default no */
	unsigned seed_save_interval_s; /* default 600 */
	unsigned status_interval_s;    /* default 60: periodic pool-level journal line */
	unsigned max_sessions;         /* default 1024: over TCP, vsock and unix+tls, any state */
	unsigned max_local_sessions;   /* default 256: over plain unix, apart from the above */
	unsigned max_handshakes;       /* default 64: network sessions not yet authenticated */
	unsigned max_lingering;        /* default 64: ended sessions lingering, counted apart */
	unsigned max_handshakes_per_address; /* default 8: the same, per IPv4 address, IPv6 /64,
	                                      * vsock CID or unix+tls process */
	unsigned hello_timeout_s;            /* default 10: TLS and HELLO must be done by then */
	unsigned frame_timeout_s;            /* default 30: a frame begun must end within it */
	int handshake_threads; /* default -1 (auto: one per CPU, none on one); 0: on the loop */
	char *listen[EB_CONF_LISTEN_MAX];
	unsigned n_listen;
	/* The load balancers whose TCP connections start with a PROXY protocol header naming the
	 * client; none by default. */
	struct eb_cidr proxy_from[EB_CONF_PROXY_FROM_MAX];
	unsigned n_proxy_from;
	struct eb_user *users;
	unsigned n_users;
	struct eb_conf_upstream upstream;
};

/* Parses path. Unknown sections or keys, bad values and duplicate users are errors; the message
 * in *ret_error (malloc()ed) has a line for each error found (joined by '\n'), each naming
 * "path:line" and quoting the value. Keys are not loaded. A
 * missing file is -ENOENT with an error message naming the path. */
int eb_conf_load(const char *path, struct eb_conf **ret, char **ret_error);

/* Parses several files in order, each on top of the ones before, the last one (the main file)
 * authoritative: a [broker] key set again replaces the earlier value (listen= replaces the whole
 * earlier list); a [user NAME] defined again replaces the earlier section whole; a user that
 * maps a uid or gid an earlier file's user maps takes it, and that earlier user is dropped.
 * Within one file the rules of eb_conf_load() hold. conf->path is the last path. */
int eb_conf_load_files(const char *const *paths, unsigned n_paths, struct eb_conf **ret,
                       char **ret_error);

/* Loads every user's key files (eb_key_load()). Every key is tried; on failure *ret_error has a
 * line for each that failed ("path:line: [user NAME]: key file ...", lines joined by '\n'). */
int eb_conf_load_keys(struct eb_conf *conf, char **ret_error);

/* A configuration with defaults and no users, for a broker run without a file. */
int eb_conf_new_default(struct eb_conf **ret);

struct eb_conf *eb_conf_free(struct eb_conf *conf); /* wipes keys; accepts NULL */

/* Whether a TCP peer is one of proxy-protocol-from=, and so must send a PROXY header. */
bool eb_conf_proxy_trusted(const struct eb_conf *conf, const struct sockaddr *peer);

const struct eb_user *eb_conf_find_user(const struct eb_conf *conf, const char *name);
/* Whether name (n bytes) may name a [user]: 1-64 of letters, digits, '.', '_' and '-', the first
 * a letter or a digit (what eb-keygen --user writes is what the broker reads). */
bool eb_conf_user_name_valid(const char *name, size_t n);
/* u's key numbered serial (struct eb_user_key), or NULL. */
const struct eb_user_key *eb_user_key_by_serial(const struct eb_user *u, uint64_t serial);
/* The loaded key a TLS identity names (docs/protocol.md 1.1): "NAME" the user's default key (its
 * first), "NAME/ID" the key with that id; its user in *ret_user. NULL when there is none. */
const struct eb_user_key *eb_conf_find_key(const struct eb_conf *conf, const char *identity,
                                           const struct eb_user **ret_user);
/* The user a unix peer is: the one that maps its uid; else the one that maps its primary gid;
 * else the one that maps one of its supplementary groups (groups, n_groups; may be NULL, 0), as
 * long as they all map to that one: a peer whose groups map to several users is none of them,
 * since its rights must not depend on the order of sections. NULL when none maps it. */
const struct eb_user *eb_conf_find_unix_peer(const struct eb_conf *conf, uid_t uid, gid_t gid,
                                             const gid_t *groups, size_t n_groups);
