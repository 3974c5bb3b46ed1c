/* SPDX-License-Identifier: MIT */
#include "conf.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>
#include <openssl/crypto.h>

#include "key.h"
#include "macro.h"
#include "proto.h"
#include "uri.h"

#define DEFAULT_CAPACITY_BITS  UINT64_C(1048576)
#define DEFAULT_LOW_WATER_PCT  25
#define DEFAULT_HIGH_WATER_PCT 90
#define DEFAULT_SEED_FILE      "/var/lib/entropy-broker/seed"
#define DEFAULT_SEED_SAVE_S    600
#define DEFAULT_STATUS_S       60
#define DEFAULT_MAX_SESSIONS   1024
#define DEFAULT_MAX_LOCAL      256
#define DEFAULT_MAX_HANDSHAKES 64
#define DEFAULT_MAX_PER_ADDR   8
#define DEFAULT_HELLO_S        10
#define DEFAULT_FRAME_S        30
#define DEFAULT_USER_SESSIONS  128
#define DEFAULT_MAX_CREDIT     8
#define USER_NAME_MAX          64
#define LINE_MAX_RAW           1024

enum section {
	SECTION_NONE,
	SECTION_BROKER,
	SECTION_USER,
};

struct ctx;
typedef int (*parse_fn)(struct ctx *c, const char *value, void *field);

struct item {
	enum section section;
	const char *key;
	parse_fn parse;
	size_t offset;   /* into struct eb_conf for [broker], struct eb_user for [user] */
	bool repeatable; /* listen= may be given several times; everything else once */
	const char *expected;
};

/* Where something was set: files[file], line. */
struct place {
	unsigned file, line;
};

struct ctx {
	const char *const *files; /* read in this order; later ones override earlier ones */
	unsigned n_files;
	unsigned file;    /* the one being read */
	const char *path; /* files[file] */
	FILE *f;
	char *raw; /* the line as read, NUL bytes and all */
	size_t raw_size;
	struct eb_conf *conf;
	unsigned line; /* the line the reader handed inih last */
	bool stop;     /* an error was found: hand inih no more lines */
	enum section section;
	unsigned section_line;
	unsigned user;               /* index of the current [user] in conf->users */
	struct place *user_places;   /* each user's section header, for errors after parsing */
	unsigned broker_line;        /* the current file's [broker], 0 before it */
	uint64_t seen;               /* bit i: items[i] was set in the current section */
	struct place item_place[32]; /* where each item was set last */
	const char *reason; /* a parser's own explanation, instead of the item's "expected" */
	char *error;
	int r;
};

static int parse_capacity(struct ctx *c, const char *value, void *field);
static int parse_percent(struct ctx *c, const char *value, void *field);
static int parse_seed_file(struct ctx *c, const char *value, void *field);
static int parse_bool(struct ctx *c, const char *value, void *field);
static int parse_save_interval(struct ctx *c, const char *value, void *field);
static int parse_status_interval(struct ctx *c, const char *value, void *field);
static int parse_max_sessions(struct ctx *c, const char *value, void *field);
static int parse_timeout(struct ctx *c, const char *value, void *field);
static int parse_listen(struct ctx *c, const char *value, void *field);
static int parse_roles(struct ctx *c, const char *value, void *field);
static int parse_key_file(struct ctx *c, const char *value, void *field);
static int parse_uid(struct ctx *c, const char *value, void *field);
static int parse_gid(struct ctx *c, const char *value, void *field);
static int parse_credit(struct ctx *c, const char *value, void *field);
static int parse_quota(struct ctx *c, const char *value, void *field);

/* Every key the file may hold. A key not here is an error, so that a typo cannot silently leave
 * a default (say, an unlimited quota) in place. */
static const struct item items[] = {
    {SECTION_BROKER, "capacity-bits", parse_capacity, offsetof(struct eb_conf, capacity_bits),
     false, "a number 4096..2147483648, multiple of 512"},
    {SECTION_BROKER, "low-water-percent", parse_percent, offsetof(struct eb_conf, low_water_pct),
     false, "a number 0..100"},
    {SECTION_BROKER, "high-water-percent", parse_percent, offsetof(struct eb_conf, high_water_pct),
     false, "a number 0..100"},
    {SECTION_BROKER, "seed-file", parse_seed_file, offsetof(struct eb_conf, seed_file), false,
     "an absolute path, or nothing to disable the seed file"},
    {SECTION_BROKER, "credit-seed-file", parse_bool, offsetof(struct eb_conf, credit_seed_file),
     false, "yes, no, true, false, 1 or 0"},
    {SECTION_BROKER, "seed-save-interval-sec", parse_save_interval,
     offsetof(struct eb_conf, seed_save_interval_s), false, "a number of seconds 1..604800"},
    {SECTION_BROKER, "status-interval-sec", parse_status_interval,
     offsetof(struct eb_conf, status_interval_s), false, "a number of seconds 1..86400"},
    {SECTION_BROKER, "max-sessions", parse_max_sessions, offsetof(struct eb_conf, max_sessions),
     false, "a number 1..65536"},
    {SECTION_BROKER, "max-local-sessions", parse_max_sessions,
     offsetof(struct eb_conf, max_local_sessions), false, "a number 1..65536"},
    {SECTION_BROKER, "max-handshakes", parse_max_sessions, offsetof(struct eb_conf, max_handshakes),
     false, "a number 1..65536"},
    {SECTION_BROKER, "max-handshakes-per-address", parse_max_sessions,
     offsetof(struct eb_conf, max_handshakes_per_address), false, "a number 1..65536"},
    {SECTION_BROKER, "hello-timeout-sec", parse_timeout, offsetof(struct eb_conf, hello_timeout_s),
     false, "a number of seconds 1..3600"},
    {SECTION_BROKER, "frame-timeout-sec", parse_timeout, offsetof(struct eb_conf, frame_timeout_s),
     false, "a number of seconds 1..3600"},
    {SECTION_BROKER, "listen", parse_listen, offsetof(struct eb_conf, listen), true,
     "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]"},
    {SECTION_USER, "role", parse_roles, offsetof(struct eb_user, roles), false,
     "a comma-separated list of source, sink, admin"},
    {SECTION_USER, "key-file", parse_key_file, offsetof(struct eb_user, key_file), false,
     "an absolute path"},
    {SECTION_USER, "unix-uid", parse_uid, offsetof(struct eb_user, unix_uid), false,
     "a uid or a user name"},
    {SECTION_USER, "unix-gid", parse_gid, offsetof(struct eb_user, unix_gid), false,
     "a gid or a group name"},
    {SECTION_USER, "max-credit-per-byte", parse_credit,
     offsetof(struct eb_user, max_credit_per_byte), false, "a number of bits 0..8"},
    {SECTION_USER, "quota-bits-per-hour", parse_quota,
     offsetof(struct eb_user, quota_bits_per_hour), false, "a number of bits, 0 for no quota"},
    {SECTION_USER, "max-sessions", parse_max_sessions, offsetof(struct eb_user, max_sessions),
     false, "a number 1..65536"},
};

_Static_assert(EB_CONF_LISTEN_MAX == 16, "parse_listen() names the limit");
_Static_assert(ELEMENTSOF(items) <= 64, "ctx.seen has a bit per item");
_Static_assert(ELEMENTSOF(items) <= ELEMENTSOF(((struct ctx *)0)->item_place),
               "item_place too small");

/* Formats into a new string; NULL when out of memory. */
_printf_(1, 0) static char *vformat(const char *fmt, va_list ap)
{
	va_list aq;
	char *s;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

_printf_(1, 2) static char *format(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vformat(fmt, ap);
	va_end(ap);
	return s;
}

/* Records the first error as "path:line: message" and stops the parse. Returns 0, inih's "failed".
 */
_printf_(3, 0) static int conf_verror_at(struct ctx *c, struct place at, const char *fmt,
                                         va_list ap)
{
	_cleanup_free_ char *msg = NULL;

	c->stop = true;
	if (c->r < 0)
		return 0;
	c->r = -EINVAL;

	msg = vformat(fmt, ap);
	if (!msg)
		c->r = -ENOMEM;
	else
		c->error = format("%s:%u: %s", c->files[at.file], at.line, msg);
	return 0;
}

_printf_(3, 4) static int conf_error_at(struct ctx *c, struct place at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conf_verror_at(c, at, fmt, ap);
	va_end(ap);
	return 0;
}

/* The same, at a line of the file being read. */
_printf_(3, 4) static int conf_error(struct ctx *c, unsigned line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conf_verror_at(c, (struct place){c->file, line}, fmt, ap);
	va_end(ap);
	return 0;
}

/* Quotes a value for a message: printable ASCII as is, anything else as \xNN, so that a stray
 * control character in the file cannot forge a log line. */
static const char *quote(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 5 < size; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			buf[n++] = (char)ch;
		else
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", ch);
	}
	buf[n] = '\0';
	return buf;
}

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

static int parse_capacity(struct ctx *c, const char *value, void *field)
{
	uint64_t v;
	int r;

	(void)c;
	r = parse_u64(value, 4096, UINT64_C(1) << 31, &v);
	if (r < 0)
		return r;
	/* The pool conditions input into 512-bit blocks; see eb_pool_new(). */
	if (v % 512 != 0)
		return -EINVAL;
	*(uint64_t *)field = v;
	return 0;
}

static int parse_percent(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 0, 100, field);
}

static int parse_save_interval(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 7 * 24 * 3600, field);
}

static int parse_status_interval(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 24 * 3600, field);
}

static int parse_max_sessions(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 65536, field);
}

static int parse_timeout(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 1, 3600, field);
}

static int parse_credit(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_unsigned(value, 0, 8, field);
}

static int parse_quota(struct ctx *c, const char *value, void *field)
{
	(void)c;
	return parse_u64(value, 0, UINT64_MAX, field);
}

static int parse_bool(struct ctx *c, const char *value, void *field)
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

static int parse_seed_file(struct ctx *c, const char *value, void *field)
{
	(void)c;
	if (value[0] != '\0' && value[0] != '/')
		return -EINVAL;
	return set_string(value, field);
}

static int parse_key_file(struct ctx *c, const char *value, void *field)
{
	(void)c;
	if (value[0] != '/')
		return -EINVAL;
	return set_string(value, field);
}

static int parse_listen(struct ctx *c, const char *value, void *field)
{
	char **listen = field;
	struct eb_uri u;
	int r;

	r = eb_uri_parse(value, &u);
	if (r < 0)
		return r;
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

static int parse_roles(struct ctx *c, const char *value, void *field)
{
	unsigned roles = 0;
	const char *p = value;

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
		p += strspn(p, " \t");
		if (*p == '\0')
			break;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
	*(unsigned *)field = roles;
	return 0;
}

static long getxx_r_size(int name)
{
	long n = sysconf(name);

	return n > 0 ? n : 16384;
}

/* What may name an account: an id, or a name as useradd(8) would take it. Anything else (a sign,
 * a space) is a typo better reported as such than as "no such user". */
static bool is_account_name(const char *s)
{
	if (!*s || strlen(s) > 256)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || (*p == '-' && p != s) ||
		      (*p == '$' && p[1] == '\0')))
			return false;
	return true;
}

/* A number is an id; anything else is looked up as a name, through NSS as the system would. */
static int parse_uid(struct ctx *c, const char *value, void *field)
{
	struct eb_user *u = &c->conf->users[c->user];
	uint64_t v;

	if (!is_account_name(value))
		return -EINVAL;
	if (value[0] >= '0' && value[0] <= '9') {
		/* (uid_t)-1 means "no uid" to the kernel's calls, so it cannot name anyone. */
		if (parse_u64(value, 0, (uid_t)-2, &v) < 0)
			return -EINVAL;
	} else {
		struct passwd pw, *res = NULL;
		size_t size = (size_t)getxx_r_size(_SC_GETPW_R_SIZE_MAX);

		for (;;) {
			_cleanup_free_ char *buf = malloc(size);
			int e;

			if (!buf)
				return -ENOMEM;
			e = getpwnam_r(value, &pw, buf, size, &res);
			if (e == ERANGE && size < 1024 * 1024) {
				size *= 2;
				continue;
			}
			if (e != 0 || !res) {
				c->reason =
				    e == 0 || e == ENOENT ? "no such user" : "user lookup failed";
				return -ESRCH;
			}
			v = res->pw_uid;
			break;
		}
	}
	*(uid_t *)field = (uid_t)v;
	u->has_uid = true;
	return 0;
}

static int parse_gid(struct ctx *c, const char *value, void *field)
{
	struct eb_user *u = &c->conf->users[c->user];
	uint64_t v;

	if (!is_account_name(value))
		return -EINVAL;
	if (value[0] >= '0' && value[0] <= '9') {
		if (parse_u64(value, 0, (gid_t)-2, &v) < 0)
			return -EINVAL;
	} else {
		struct group gr, *res = NULL;
		size_t size = (size_t)getxx_r_size(_SC_GETGR_R_SIZE_MAX);

		for (;;) {
			_cleanup_free_ char *buf = malloc(size);
			int e;

			if (!buf)
				return -ENOMEM;
			e = getgrnam_r(value, &gr, buf, size, &res);
			if (e == ERANGE && size < 1024 * 1024) {
				size *= 2;
				continue;
			}
			if (e != 0 || !res) {
				c->reason =
				    e == 0 || e == ENOENT ? "no such group" : "group lookup failed";
				return -ESRCH;
			}
			v = res->gr_gid;
			break;
		}
	}
	*(gid_t *)field = (gid_t)v;
	u->has_gid = true;
	return 0;
}

static bool user_name_valid(const char *s, size_t n)
{
	if (n == 0 || n > USER_NAME_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* Frees what a user holds and wipes its key; the struct is left for reuse. */
static void user_clear(struct eb_user *u)
{
	OPENSSL_cleanse(u->key, sizeof(u->key));
	free(u->name);
	free(u->key_file);
	*u = (struct eb_user){};
}

static void listen_clear(struct eb_conf *conf)
{
	for (unsigned i = 0; i < conf->n_listen; i++) {
		free(conf->listen[i]);
		conf->listen[i] = NULL;
	}
	conf->n_listen = 0;
}

/* A user of the same name in an earlier file is replaced whole by this section: a drop-in or the
 * main file redefines a user, it does not patch it. In the same file it is an error. */
static int add_user(struct ctx *c, const char *name, size_t n)
{
	struct eb_conf *conf = c->conf;
	struct eb_user *users;
	struct place *places;
	char *copy;
	unsigned i;

	for (i = 0; i < conf->n_users; i++)
		if (strlen(conf->users[i].name) == n && strncmp(conf->users[i].name, name, n) == 0)
			break;
	if (i < conf->n_users && c->user_places[i].file == c->file)
		return conf_error(c, c->line,
		                  "duplicate section [user %s], first defined on line %u",
		                  conf->users[i].name, c->user_places[i].line);
	if (i == conf->n_users && conf->n_users >= EB_CONF_USERS_MAX)
		return conf_error(c, c->line, "too many users (at most %u)", EB_CONF_USERS_MAX);

	copy = strndup(name, n);
	if (!copy)
		goto oom;
	if (i < conf->n_users) {
		user_clear(&conf->users[i]);
	} else {
		users = reallocarray(conf->users, conf->n_users + 1, sizeof(*users));
		if (!users)
			goto oom_copy;
		conf->users = users;
		places = reallocarray(c->user_places, conf->n_users + 1, sizeof(*places));
		if (!places)
			goto oom_copy;
		c->user_places = places;
		conf->n_users++;
	}
	conf->users[i] = (struct eb_user){
	    .name = copy,
	    .max_credit_per_byte = DEFAULT_MAX_CREDIT,
	    .max_sessions = DEFAULT_USER_SESSIONS,
	};
	c->user_places[i] = (struct place){c->file, c->line};
	c->user = i;
	return 1;
oom_copy:
	free(copy);
oom:
	c->stop = true;
	if (c->r >= 0)
		c->r = -ENOMEM;
	return 0;
}

/* Handles a "[...]" line. inih would note the section too, but it truncates long names silently
 * and does not tell its handler where a section starts, so sections are tracked here. */
static int begin_section(struct ctx *c, const char *p)
{
	char q[4 * LINE_MAX_RAW + 1];
	const char *end = strchr(p, ']');
	const char *rest, *name;
	size_t n;

	if (!end)
		return conf_error(c, c->line, "invalid section header: missing \"]\"");
	rest = end + 1 + strspn(end + 1, " \t\r\n");
	if (*rest != '\0' && *rest != ';' && *rest != '#') {
		_cleanup_free_ char *copy = strndup(rest, strcspn(rest, "\r\n"));
		if (!copy)
			return conf_error(c, c->line, "out of memory");
		return conf_error(c, c->line, "unexpected \"%s\" after section header",
		                  quote(copy, q, sizeof(q)));
	}

	p++;
	n = (size_t)(end - p);
	c->seen = 0;
	c->section_line = c->line;

	if (n == 6 && strncmp(p, "broker", 6) == 0) {
		if (c->broker_line > 0)
			return conf_error(c, c->line,
			                  "duplicate section [broker], first defined on line %u",
			                  c->broker_line);
		c->section = SECTION_BROKER;
		c->broker_line = c->line;
		return 1;
	}

	if (n > 5 && strncmp(p, "user", 4) == 0 && (p[4] == ' ' || p[4] == '\t')) {
		name = p + 5 + strspn(p + 5, " \t");
		n = (size_t)(end - name);
		if (!user_name_valid(name, n)) {
			char s[4 * LINE_MAX_RAW + 1];
			_cleanup_free_ char *copy = strndup(name, n);
			if (!copy)
				return conf_error(c, c->line, "out of memory");
			return conf_error(
			    c, c->line,
			    "invalid user name \"%s\": expected 1..%u letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit",
			    quote(copy, s, sizeof(s)), USER_NAME_MAX);
		}
		c->section = SECTION_USER;
		return add_user(c, name, n);
	}

	{
		_cleanup_free_ char *copy = strndup(p, n);
		if (!copy)
			return conf_error(c, c->line, "out of memory");
		return conf_error(c, c->line,
		                  "unknown section [%s]: expected [broker] or [user NAME]",
		                  quote(copy, q, sizeof(q)));
	}
}

/* inih reads through this, one line per call, so that every error can name its line (Debian's
 * inih is built without INI_HANDLER_LINENO) and so that what inih would take differently from
 * what a reader of the file sees is refused: over-long lines, which inih splits silently, and
 * indented lines, which inih joins to the key before as a continuation. */
static char *reader(char *str, int num, void *stream)
{
	struct ctx *c = stream;
	const char *p;
	ssize_t len;

	if (c->stop || num < 2)
		return NULL;
	len = getline(&c->raw, &c->raw_size, c->f);
	if (len < 0)
		return NULL;
	c->line++;

	/* inih sees a string, so a NUL byte would end the value there and drop the rest of the
	 * line without a word: "capacity-bits = 4096\0junk" must not read as 4096. */
	if (memchr(c->raw, '\0', (size_t)len)) {
		conf_error(c, c->line, "NUL byte in the line");
		return NULL;
	}
	if (len >= LINE_MAX_RAW || len > num - 1) {
		conf_error(c, c->line, "line too long (at most %d characters)", num - 3);
		return NULL;
	}
	memcpy(str, c->raw, (size_t)len + 1);

	p = str;
	if (c->line == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	if (*p == ' ' || *p == '\t') {
		p += strspn(p, " \t");
		if (*p != '\0' && *p != '\r' && *p != '\n' && *p != ';' && *p != '#') {
			conf_error(
			    c, c->line,
			    "line starts with white space: continuation lines are not supported");
			return NULL;
		}
	}
	if (*p == '[' && !begin_section(c, p))
		return NULL;
	return str;
}

static const struct item *find_item(enum section s, const char *key, size_t *ret_index)
{
	for (size_t i = 0; i < ELEMENTSOF(items); i++)
		if (items[i].section == s && strcmp(items[i].key, key) == 0) {
			*ret_index = i;
			return &items[i];
		}
	return NULL;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	char q[4 * LINE_MAX_RAW + 1], k[4 * LINE_MAX_RAW + 1];
	struct ctx *c = user;
	const struct item *it;
	void *base;
	size_t i;
	int r;

	(void)section; /* tracked by the reader, which sees every header */
	if (c->stop)
		return 0;
	if (!value)
		return conf_error(c, c->line, "expected KEY = VALUE");

	if (c->section == SECTION_NONE)
		return conf_error(c, c->line, "key \"%s\" outside any section",
		                  quote(name, k, sizeof(k)));

	it = find_item(c->section, name, &i);
	if (!it)
		return conf_error(c, c->line, "unknown key \"%s\" in %s", quote(name, k, sizeof(k)),
		                  c->section == SECTION_BROKER ? "[broker]" : "[user NAME]");
	if (!it->repeatable && (c->seen & (UINT64_C(1) << i)))
		return conf_error(c, c->line, "duplicate key %s, first set on line %u", it->key,
		                  c->item_place[i].line);
	/* listen= collects addresses within a file; a later file's list replaces an earlier's. */
	if (it->repeatable && !(c->seen & (UINT64_C(1) << i)) && c->section == SECTION_BROKER)
		listen_clear(c->conf);

	base = c->section == SECTION_BROKER ? (void *)c->conf : (void *)&c->conf->users[c->user];
	c->reason = NULL;
	r = it->parse(c, value, (uint8_t *)base + it->offset);
	if (r == -ENOMEM) {
		c->stop = true;
		c->r = c->r < 0 ? c->r : -ENOMEM;
		return 0;
	}
	if (r < 0) {
		if (c->reason)
			return conf_error(c, c->line, "invalid value \"%s\" for %s: %s",
			                  quote(value, q, sizeof(q)), it->key, c->reason);
		return conf_error(c, c->line, "invalid value \"%s\" for %s: expected %s",
		                  quote(value, q, sizeof(q)), it->key, it->expected);
	}

	c->seen |= UINT64_C(1) << i;
	c->item_place[i] = (struct place){c->file, c->line};
	return 1;
}

static struct place broker_item_place(const struct ctx *c, const char *key)
{
	size_t i;

	if (!find_item(SECTION_BROKER, key, &i))
		return (struct place){};
	return c->item_place[i];
}

static bool place_before(struct place a, struct place b)
{
	return a.file < b.file || (a.file == b.file && a.line < b.line);
}

static bool maps_same_peer(const struct eb_user *a, const struct eb_user *b)
{
	return (a->has_uid && b->has_uid && a->unix_uid == b->unix_uid) ||
	       (a->has_gid && b->has_gid && a->unix_gid == b->unix_gid);
}

/* A later file is authoritative over an earlier one: a user there that maps a uid or gid an
 * earlier file's user maps takes it, and the earlier user is dropped whole (a shipped drop-in's
 * mapping gives way to the administrator's own). Within one file the clash is an error, left
 * for validate(). */
static void drop_overridden_users(struct ctx *c)
{
	struct eb_conf *conf = c->conf;
	unsigned k = 0;

	for (unsigned i = 0; i < conf->n_users; i++) {
		bool dropped = false;

		for (unsigned j = 0; j < conf->n_users && !dropped; j++)
			dropped = j != i && c->user_places[j].file > c->user_places[i].file &&
			          maps_same_peer(&conf->users[i], &conf->users[j]);
		if (dropped) {
			user_clear(&conf->users[i]);
			continue;
		}
		conf->users[k] = conf->users[i];
		c->user_places[k] = c->user_places[i];
		k++;
	}
	conf->n_users = k;
}

/* What no single line can show: relations between keys, and users that could never connect. */
static int validate(struct ctx *c)
{
	const struct eb_conf *conf = c->conf;

	if (conf->low_water_pct >= conf->high_water_pct) {
		struct place lo = broker_item_place(c, "low-water-percent"),
			     hi = broker_item_place(c, "high-water-percent");

		return conf_error_at(c, place_before(lo, hi) ? hi : lo,
		                     "low-water-percent (%u) must be below high-water-percent (%u)",
		                     conf->low_water_pct, conf->high_water_pct);
	}

	for (unsigned i = 0; i < conf->n_users; i++) {
		const struct eb_user *u = &conf->users[i];

		if (u->roles == 0)
			return conf_error_at(
			    c, c->user_places[i],
			    "[user %s] has no role: expected role = source, sink or admin",
			    u->name);
		if (!u->key_file && !u->has_uid && !u->has_gid)
			return conf_error_at(
			    c, c->user_places[i],
			    "[user %s] has neither key-file nor unix-uid or unix-gid, so it could never connect",
			    u->name);

		/* A peer must map to one user, or its rights would depend on the order of sections.
		 */
		for (unsigned j = 0; j < i; j++) {
			const struct eb_user *o = &conf->users[j];
			if (u->has_uid && o->has_uid && u->unix_uid == o->unix_uid)
				return conf_error_at(
				    c, c->user_places[i],
				    "[user %s] has unix-uid %u, which [user %s] on line %u has already",
				    u->name, (unsigned)u->unix_uid, o->name,
				    c->user_places[j].line);
			if (u->has_gid && o->has_gid && u->unix_gid == o->unix_gid)
				return conf_error_at(
				    c, c->user_places[i],
				    "[user %s] has unix-gid %u, which [user %s] on line %u has already",
				    u->name, (unsigned)u->unix_gid, o->name,
				    c->user_places[j].line);
		}
	}
	return 0;
}

int eb_conf_new_default(struct eb_conf **ret)
{
	struct eb_conf *conf;

	if (!ret)
		return -EINVAL;
	conf = calloc(1, sizeof(*conf));
	if (!conf)
		return -ENOMEM;
	*conf = (struct eb_conf){
	    .capacity_bits = DEFAULT_CAPACITY_BITS,
	    .low_water_pct = DEFAULT_LOW_WATER_PCT,
	    .high_water_pct = DEFAULT_HIGH_WATER_PCT,
	    .seed_file = strdup(DEFAULT_SEED_FILE),
	    .seed_save_interval_s = DEFAULT_SEED_SAVE_S,
	    .status_interval_s = DEFAULT_STATUS_S,
	    .max_sessions = DEFAULT_MAX_SESSIONS,
	    .max_local_sessions = DEFAULT_MAX_LOCAL,
	    .max_handshakes = DEFAULT_MAX_HANDSHAKES,
	    .max_handshakes_per_address = DEFAULT_MAX_PER_ADDR,
	    .hello_timeout_s = DEFAULT_HELLO_S,
	    .frame_timeout_s = DEFAULT_FRAME_S,
	};
	if (!conf->seed_file) {
		free(conf);
		return -ENOMEM;
	}
	*ret = conf;
	return 0;
}

struct eb_conf *eb_conf_free(struct eb_conf *conf)
{
	if (!conf)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		user_clear(&conf->users[i]);
	free(conf->users);
	listen_clear(conf);
	free(conf->seed_file);
	free(conf->path);
	free(conf);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct eb_conf *, eb_conf_free);

static void set_error(char **ret_error, char *error)
{
	if (ret_error)
		*ret_error = error;
	else
		free(error);
}

/* Parses one file into c->conf, on top of what earlier files set. */
static void parse_file(struct ctx *c)
{
	_cleanup_fclose_ FILE *f = NULL;
	int e;

	c->path = c->files[c->file];
	c->line = c->broker_line = 0;
	c->section = SECTION_NONE;
	c->seen = 0;
	f = fopen(c->path, "re");
	if (!f) {
		c->r = negative_errno();
		c->error = format("%s: %s", c->path, strerror(-c->r));
		c->stop = true;
		return;
	}
	c->f = f;
	e = ini_parse_stream(reader, c, handler, c);
	if (c->r >= 0 && ferror(f))
		conf_error(c, c->line + 1, "read error");
	else if (c->r >= 0 && e > 0)
		conf_error(c, (unsigned)e,
		           "syntax error: expected [SECTION], KEY = VALUE or a comment");
	else if (c->r >= 0 && e < 0)
		c->r = -ENOMEM;
	c->f = NULL;
}

int eb_conf_load_files(const char *const *paths, unsigned n_paths, struct eb_conf **ret,
                       char **ret_error)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	struct ctx c = {.files = paths, .n_files = n_paths};
	int r;

	if (!paths || n_paths == 0 || !ret)
		return -EINVAL;

	r = eb_conf_new_default(&conf);
	if (r < 0) {
		set_error(ret_error, NULL);
		return r;
	}
	conf->path = strdup(paths[n_paths - 1]);
	if (!conf->path) {
		set_error(ret_error, NULL);
		return -ENOMEM;
	}

	c.conf = conf;
	for (c.file = 0; c.file < n_paths && c.r >= 0; c.file++)
		parse_file(&c);
	if (c.r >= 0) {
		drop_overridden_users(&c);
		validate(&c);
	}

	free(c.user_places);
	free(c.raw);
	if (c.r < 0) {
		set_error(ret_error, c.error);
		return c.r;
	}

	*ret = TAKE_PTR(conf);
	return 0;
}

int eb_conf_load(const char *path, struct eb_conf **ret, char **ret_error)
{
	return eb_conf_load_files(&path, 1, ret, ret_error);
}

static const char *key_error(int r)
{
	switch (r) {
	case -EPERM:
		return "is readable by group or others; chmod 0600";
	case -EBADMSG:
		return "is not 64 hexadecimal digits and an optional newline";
	case -ELOOP:
		return "is a symbolic link, which is not followed";
	default:
		return NULL;
	}
}

int eb_conf_load_keys(struct eb_conf *conf, char **ret_error)
{
	int r;

	if (!conf)
		return -EINVAL;

	for (unsigned i = 0; i < conf->n_users; i++) {
		struct eb_user *u = &conf->users[i];
		const char *why;

		if (!u->key_file)
			continue;
		r = eb_key_load(u->key_file, u->key);
		if (r < 0) {
			why = key_error(r);
			if (why)
				set_error(ret_error,
				          format("%s: [user %s]: key file %s %s",
				                 conf->path ? conf->path : "configuration", u->name,
				                 u->key_file, why));
			else
				set_error(ret_error,
				          format("%s: [user %s]: cannot read key file %s: %s",
				                 conf->path ? conf->path : "configuration", u->name,
				                 u->key_file, strerror(-r)));
			return r;
		}
		u->has_key = true;
	}
	return 0;
}

const struct eb_user *eb_conf_find_user(const struct eb_conf *conf, const char *name)
{
	if (!conf || !name)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		if (strcmp(conf->users[i].name, name) == 0)
			return &conf->users[i];
	return NULL;
}

/* The uid decides before the gid: a uid names one account, a gid a whole group of them. */
const struct eb_user *eb_conf_find_unix_peer(const struct eb_conf *conf, uid_t uid, gid_t gid)
{
	if (!conf)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		if (conf->users[i].has_uid && conf->users[i].unix_uid == uid)
			return &conf->users[i];
	for (unsigned i = 0; i < conf->n_users; i++)
		if (conf->users[i].has_gid && conf->users[i].unix_gid == gid)
			return &conf->users[i];
	return NULL;
}
