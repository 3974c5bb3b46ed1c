/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE 1 /* asprintf() */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "confdir.h"
#include "key.h"
#include "macro.h"
#include "proto.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct eb_conf *, eb_conf_free);

static char dir[] = "/tmp/test-conf.XXXXXX";
static char conf_path[256];

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(conf_path, sizeof(conf_path), "%s/eb-brokerd.conf", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[64];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *content, mode_t mode)
{
	int fd;

	(void)unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* Loads content as a config file. */
static int load(const char *content, struct eb_conf **ret, char **ret_error)
{
	write_file(conf_path, content, 0644);
	return eb_conf_load(conf_path, ret, ret_error);
}

static struct eb_conf *load_ok(const char *content)
{
	struct eb_conf *conf = NULL;
	_cleanup_free_ char *error = NULL;
	int r = load(content, &conf, &error);

	if (r < 0)
		fail_msg("load failed: %d %s", r, error ? error : "(no message)");
	assert_non_null(conf);
	return conf;
}

/* The load fails with -EINVAL and exactly "PATH:LINE: msg". */
static void expect_error(const char *content, unsigned line, const char *msg)
{
	struct eb_conf *conf = (struct eb_conf *)0x1;
	_cleanup_free_ char *error = NULL, *expected = NULL;
	int r;

	r = load(content, &conf, &error);
	assert_int_equal(r, -EINVAL);
	assert_ptr_equal(conf, (struct eb_conf *)0x1); /* untouched on failure */
	assert_non_null(error);
	assert_true(asprintf(&expected, "%s:%u: %s", conf_path, line, msg) > 0);
	assert_string_equal(error, expected);
}

static void check_defaults(const struct eb_conf *conf)
{
	assert_int_equal(conf->capacity_bits, 1048576);
	assert_int_equal(conf->low_water_pct, 25);
	assert_int_equal(conf->high_water_pct, 90);
	assert_string_equal(conf->seed_file, "/var/lib/entropy-broker/seed");
	assert_false(conf->credit_seed_file);
	assert_int_equal(conf->seed_save_interval_s, 600);
	assert_int_equal(conf->status_interval_s, 60);
	assert_int_equal(conf->max_sessions, 1024);
	assert_int_equal(conf->max_local_sessions, 256);
	assert_int_equal(conf->max_handshakes, 64);
	assert_int_equal(conf->max_handshakes_per_address, 8);
	assert_int_equal(conf->hello_timeout_s, 10);
	assert_int_equal(conf->frame_timeout_s, 30);
	assert_int_equal(conf->handshake_threads, EB_CONF_HANDSHAKE_THREADS_AUTO);
	assert_int_equal(conf->n_listen, 0);
	assert_int_equal(conf->n_proxy_from, 0);
}

static void test_defaults(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *a = NULL, *b = NULL, *c = NULL;

	(void)state;
	assert_int_equal(eb_conf_new_default(&a), 0);
	check_defaults(a);
	assert_null(a->path);
	assert_int_equal(a->n_users, 0);

	b = load_ok("");
	check_defaults(b);
	assert_string_equal(b->path, conf_path);
	assert_int_equal(b->n_users, 0);

	c = load_ok("; only comments\n# here\n\n[broker]\n");
	check_defaults(c);

	assert_null(eb_conf_free(NULL));
}

/* handshake-threads: auto (the default) and 0 (on the loop) are both said in words too. */
static void test_handshake_threads(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *a = NULL, *b = NULL;

	(void)state;
	a = load_ok("[broker]\nhandshake-threads = 0\n");
	assert_int_equal(a->handshake_threads, 0);
	b = load_ok("[broker]\nhandshake-threads = auto\n");
	assert_int_equal(b->handshake_threads, EB_CONF_HANDSHAKE_THREADS_AUTO);
}

static void test_full(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	const struct eb_user *u;

	(void)state;
	conf = load_ok("\xef\xbb\xbf; a BOM first\n"
	               "[broker]\n"
	               "capacity-bits = 4096\n"
	               "low-water-percent=0\n"
	               "high-water-percent = 100 ; inline comment\n"
	               "seed-file =\n"
	               "credit-seed-file = YES\n"
	               "seed-save-interval-sec = 604800\n"
	               "status-interval-sec = 1\n"
	               "max-sessions = 65536\n"
	               "max-local-sessions = 2\n"
	               "max-handshakes = 3\n"
	               "max-handshakes-per-address = 1\n"
	               "hello-timeout-sec = 3600\n"
	               "frame-timeout-sec = 1\n"
	               "handshake-threads = 64\n"
	               "listen = tcp://[::]:55225\n"
	               "listen = unix:/run/eb.sock\r\n"
	               "listen = vsock://any\n"
	               "\n"
	               "[user alice]\n"
	               "role = source\n"
	               "key-file = /k/alice.key\n"
	               "max-credit-per-byte = 0\n"
	               "  ; an indented comment\n"
	               "[user  bob.b_2-x]\n"
	               "role = sink , admin,source\n"
	               "unix-uid = 1000\n"
	               "unix-gid = 100\n"
	               "quota-bits-per-hour = 18446744073709551615\n"
	               "max-sessions = 65536\n"
	               "[user root-by-name]\n"
	               "role=admin\n"
	               "unix-uid = root\n"
	               "unix-gid = root\n");

	assert_int_equal(conf->capacity_bits, 4096);
	assert_int_equal(conf->low_water_pct, 0);
	assert_int_equal(conf->high_water_pct, 100);
	assert_string_equal(conf->seed_file, "");
	assert_true(conf->credit_seed_file);
	assert_int_equal(conf->seed_save_interval_s, 604800);
	assert_int_equal(conf->status_interval_s, 1);
	assert_int_equal(conf->max_sessions, 65536);
	assert_int_equal(conf->max_local_sessions, 2);
	assert_int_equal(conf->max_handshakes, 3);
	assert_int_equal(conf->max_handshakes_per_address, 1);
	assert_int_equal(conf->hello_timeout_s, 3600);
	assert_int_equal(conf->frame_timeout_s, 1);
	assert_int_equal(conf->handshake_threads, 64);
	assert_int_equal(conf->n_listen, 3);
	assert_string_equal(conf->listen[0], "tcp://[::]:55225");
	assert_string_equal(conf->listen[1], "unix:/run/eb.sock");
	assert_string_equal(conf->listen[2], "vsock://any");

	assert_int_equal(conf->n_users, 3);
	u = eb_conf_find_user(conf, "alice");
	assert_non_null(u);
	assert_int_equal(u->roles, EB_ROLE_SOURCE);
	assert_int_equal(u->n_keys, 1);
	assert_string_equal(u->keys[0].file, "/k/alice.key");
	assert_null(u->keys[0].id);
	assert_false(u->keys[0].loaded);
	assert_int_equal(u->n_unix_uids, 0);
	assert_int_equal(u->n_unix_gids, 0);
	assert_int_equal(u->max_credit_per_byte, 0);
	assert_int_equal(u->quota_bits_per_hour, 0);
	assert_int_equal(u->max_sessions, 128);

	u = eb_conf_find_user(conf, "bob.b_2-x");
	assert_non_null(u);
	assert_int_equal(u->roles, EB_ROLE_ALL);
	assert_int_equal(u->n_keys, 0);
	assert_int_equal(u->n_unix_uids, 1);
	assert_int_equal(u->unix_uids[0], 1000);
	assert_int_equal(u->n_unix_gids, 1);
	assert_int_equal(u->unix_gids[0], 100);
	assert_int_equal(u->max_credit_per_byte, 8);
	assert_int_equal(u->quota_bits_per_hour, UINT64_MAX);
	assert_int_equal(u->max_sessions, 65536);

	u = eb_conf_find_user(conf, "root-by-name");
	assert_non_null(u);
	assert_int_equal(u->roles, EB_ROLE_ADMIN);
	assert_int_equal(u->unix_uids[0], 0);
	assert_int_equal(u->unix_gids[0], 0);

	assert_null(eb_conf_find_user(conf, "carol"));
	assert_null(eb_conf_find_user(conf, "Alice"));
}

static void test_example(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	_cleanup_free_ char *error = NULL, *path = NULL;
	const char *root = getenv("EB_SOURCE_ROOT");
	const struct eb_user *u;

	(void)state;
	if (!root)
		skip();
	assert_true(asprintf(&path, "%s/etc/eb-brokerd.conf", root) > 0);
	if (eb_conf_load(path, &conf, &error) < 0)
		fail_msg("%s", error ? error : "load failed");

	check_defaults(&(struct eb_conf){
	    .capacity_bits = conf->capacity_bits,
	    .low_water_pct = conf->low_water_pct,
	    .high_water_pct = conf->high_water_pct,
	    .seed_file = conf->seed_file,
	    .credit_seed_file = conf->credit_seed_file,
	    .seed_save_interval_s = conf->seed_save_interval_s,
	    .status_interval_s = conf->status_interval_s,
	    .max_sessions = conf->max_sessions,
	    .max_local_sessions = conf->max_local_sessions,
	    .max_handshakes = conf->max_handshakes,
	    .max_handshakes_per_address = conf->max_handshakes_per_address,
	    .hello_timeout_s = conf->hello_timeout_s,
	    .frame_timeout_s = conf->frame_timeout_s,
	    .handshake_threads = conf->handshake_threads,
	});
	assert_int_equal(conf->n_listen, 3);
	assert_int_equal(conf->n_users, 3);
	u = eb_conf_find_user(conf, "alice");
	assert_non_null(u);
	assert_int_equal(u->max_credit_per_byte, 4);
	u = eb_conf_find_unix_peer(conf, 1000, 1000, NULL, 0);
	assert_non_null(u);
	assert_string_equal(u->name, "vm1");
}

/* [upstream]: the brokers, the user and key, when and how much; each key checked, the section
 * replaced whole by a later file. */
static void test_upstream(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;

	(void)state;
	conf = load_ok("[upstream]\nbroker = tcp://up1.example\nbroker = unix:/run/up.sock\n"
	               "user = edge-1\nkey-file = /etc/entropy-broker/up.key\n"
	               "low-water-percent = 30\ndraw-bits = 131072\n");
	assert_true(conf->upstream.set);
	assert_int_equal(conf->upstream.n_brokers, 2);
	assert_string_equal(conf->upstream.brokers[0], "tcp://up1.example");
	assert_string_equal(conf->upstream.brokers[1], "unix:/run/up.sock");
	assert_string_equal(conf->upstream.user, "edge-1");
	assert_string_equal(conf->upstream.key_file, "/etc/entropy-broker/up.key");
	assert_int_equal(conf->upstream.low_water_pct, 30);
	assert_int_equal(conf->upstream.draw_bits, 131072);
	conf = eb_conf_free(conf);

	conf = load_ok("[upstream]\nbroker = unix:/run/up.sock\n");
	assert_int_equal(conf->upstream.low_water_pct, 50);
	assert_int_equal(conf->upstream.draw_bits, 65536);
	assert_null(conf->upstream.user);
	conf = eb_conf_free(conf);
	conf = load_ok("[broker]\n");
	assert_false(conf->upstream.set);

	expect_error(
	    "[upstream]\nuser = a\n", 1,
	    "[upstream] has no broker=: expected the address of at least one broker to draw from");
	expect_error(
	    "[upstream]\nbroker = bogus://x\n", 2,
	    "invalid value \"bogus://x\" for broker: expected tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH, vsock://CID[:PORT], virtio:NAME or srv:NAME");
	expect_error("[upstream]\nbroker = unix:/a\nbroker = unix:/a\n", 3,
	             "invalid value \"unix:/a\" for broker: this broker is already listed");
	expect_error(
	    "[upstream]\nbroker = unix:/a\ndraw-bits = 1000\n", 3,
	    "invalid value \"1000\" for draw-bits: expected a number of bits 512..2147483648, multiple of 512");
	expect_error(
	    "[upstream]\nbroker = unix:/a\nuser = -x\n", 3,
	    "invalid value \"-x\" for user: expected a user name of 1..64 letters, digits, \".\", \"_\" or \"-\"");
	expect_error("[upstream]\nbroker = unix:/a\nrole = sink\n", 3,
	             "unknown key \"role\" in [upstream]");
	expect_error("[upstream]\nbroker = unix:/a\n[upstream]\n", 3,
	             "duplicate section [upstream], first defined on line 1");
}

static void test_errors_structure(void **state)
{
	struct eb_conf *conf = NULL;
	_cleanup_free_ char *error = NULL;
	char missing[300];

	(void)state;
	expect_error("[broker]\ncapacity-bits = 4096\nbogus = 1\n", 3,
	             "unknown key \"bogus\" in [broker]");
	expect_error("[user a]\nrole = sink\nunix-uid = 1\ncapacity-bits = 4096\n", 4,
	             "unknown key \"capacity-bits\" in [user NAME]");
	expect_error("[broker]\n[brokers]\n", 2,
	             "unknown section [brokers]: expected [broker], [upstream] or [user NAME]");
	expect_error("[users a]\n", 1,
	             "unknown section [users a]: expected [broker], [upstream] or [user NAME]");
	expect_error("[user]\n", 1,
	             "unknown section [user]: expected [broker], [upstream] or [user NAME]");
	expect_error("[Broker]\n", 1,
	             "unknown section [Broker]: expected [broker], [upstream] or [user NAME]");
	expect_error("capacity-bits = 4096\n[broker]\n", 1,
	             "key \"capacity-bits\" outside any section");
	expect_error("[broker]\n\n\njunk\n", 4,
	             "syntax error: expected [SECTION], KEY = VALUE or a comment");
	expect_error("[broker\n", 1, "invalid section header: missing \"]\"");
	expect_error("[broker] x\n", 1, "unexpected \"x\" after section header");
	expect_error("[broker] ; fine\n[broker]\n", 2,
	             "duplicate section [broker], first defined on line 1");
	expect_error("[broker]\ncapacity-bits = 4096\n\ncapacity-bits = 8192\n", 4,
	             "duplicate key capacity-bits, first set on line 2");
	expect_error("[user a]\nrole = sink\nunix-uid = 1\nrole = source\n", 4,
	             "duplicate key role, first set on line 2");
	expect_error("[user a]\nrole = sink\nunix-uid = 1\n\n[user b]\nrole = sink\nunix-uid = 2\n"
	             "[user a]\n",
	             8, "duplicate section [user a], first defined on line 1");
	expect_error("[user a]\n[user a]\n", 2,
	             "duplicate section [user a], first defined on line 1");
	expect_error("[user a]\nrole = sink\nkey = k1 /a\nkey = k1 /b\n", 4,
	             "invalid value \"k1 /b\" for key: the user has a key of that id already");
	expect_error("[user a]\nrole = sink\nkey-file = /a\nkey = 1 /a\nkey = 2 /a\nkey = 3 /a\n"
	             "key = 4 /a\nkey = 5 /a\nkey = 6 /a\nkey = 7 /a\nkey = 8 /a\n",
	             11, "invalid value \"8 /a\" for key: too many keys for one user (at most 8)");
	expect_error(
	    "[user -a]\n", 1,
	    "invalid user name \"-a\": expected 1..64 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit");
	expect_error(
	    "[user a b]\n", 1,
	    "invalid user name \"a b\": expected 1..64 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit");
	expect_error(
	    "[user a/b]\n", 1,
	    "invalid user name \"a/b\": expected 1..64 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit");
	expect_error(
	    "[user "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]\n",
	    1,
	    "invalid user name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": expected 1..64 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit");
	/* Indented lines would be continuations to inih; refuse rather than guess. */
	expect_error("[broker]\ncapacity-bits = 4096\n  low-water-percent = 10\n", 3,
	             "line starts with white space: continuation lines are not supported");
	expect_error("[broker]\nseed-file = /a\n\t/b\n", 3,
	             "line starts with white space: continuation lines are not supported");

	{
		char longline[400], a250[251];

		memset(a250, 'a', 250);
		a250[250] = '\0';
		snprintf(longline, sizeof(longline), "[broker]\n\nseed-file = /%s\n", a250);
		expect_error(longline, 3, "line too long (at most 197 characters)");
	}

	/* A value's control characters are escaped, never copied into the message. */
	expect_error(
	    "[broker]\ncapacity-bits = 4096\x1b[2J\"\\\n", 2,
	    "invalid value \"4096\\x1b[2J\\x22\\x5c\" for capacity-bits: expected a number 4096..2147483648, multiple of 512");

	/* A missing file: -ENOENT, named. */
	snprintf(missing, sizeof(missing), "%s/missing.conf", dir);
	assert_int_equal(eb_conf_load(missing, &conf, &error), -ENOENT);
	assert_null(conf);
	assert_non_null(error);
	assert_non_null(strstr(error, missing));
}

static void test_errors_values(void **state)
{
	static const struct {
		const char *key, *value, *expected;
		const char
		    *reason; /* instead of "expected ...": the parser's own, naming the item */
	} broker[] = {
	    {"capacity-bits", "abc", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "4097", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "3584", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "2147484160", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "-4096", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "+4096", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "0x1000", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "4096k", "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "99999999999999999999999",
	     "a number 4096..2147483648, multiple of 512"},
	    {"capacity-bits", "", "a number 4096..2147483648, multiple of 512"},
	    {"low-water-percent", "101", "a number 0..100"},
	    {"high-water-percent", "-1", "a number 0..100"},
	    {"high-water-percent", "50%", "a number 0..100"},
	    {"seed-file", "relative/seed", "an absolute path, or nothing to disable the seed file"},
	    {"credit-seed-file", "maybe", "yes, no, true, false, 1 or 0"},
	    {"credit-seed-file", "", "yes, no, true, false, 1 or 0"},
	    {"credit-seed-file", "2", "yes, no, true, false, 1 or 0"},
	    {"seed-save-interval-sec", "0", "a number of seconds 1..604800"},
	    {"seed-save-interval-sec", "604801", "a number of seconds 1..604800"},
	    {"status-interval-sec", "0", "a number of seconds 1..86400"},
	    {"status-interval-sec", "10s", "a number of seconds 1..86400"},
	    {"max-sessions", "0", "a number 1..65536"},
	    {"max-sessions", "65537", "a number 1..65536"},
	    {"max-local-sessions", "0", "a number 1..65536"},
	    {"max-handshakes", "65537", "a number 1..65536"},
	    {"max-handshakes-per-address", "-1", "a number 1..65536"},
	    {"hello-timeout-sec", "0", "a number of seconds 1..3600"},
	    {"frame-timeout-sec", "3601", "a number of seconds 1..3600"},
	    {"handshake-threads", "65", "auto, or a number 0..64"},
	    {"handshake-threads", "-1", "auto, or a number 0..64"},
	    {"handshake-threads", "Auto", "auto, or a number 0..64"},
	    {"handshake-threads", "", "auto, or a number 0..64"},
	    {"listen", "tcp://host:0",
	     "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]"},
	    {"listen", "unix:relative",
	     "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]"},
	    {"listen", "", "tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]"},
	    {"proxy-protocol-from", "10.1.2.3/8", NULL,
	     "\"10.1.2.3/8\" is not an IP address or a network (192.0.2.1, 10.0.0.0/8, "
	     "2001:db8::/32; no bit set past the prefix)"},
	    {"proxy-protocol-from", "haproxy.example", NULL,
	     "\"haproxy.example\" is not an IP address or a network (192.0.2.1, 10.0.0.0/8, "
	     "2001:db8::/32; no bit set past the prefix)"},
	    {"proxy-protocol-from", "127.0.0.1,",
	     "IP addresses or networks (192.0.2.1, 10.0.0.0/8, 2001:db8::/32), separated by commas"},
	    {"proxy-protocol-from", ",127.0.0.1",
	     "IP addresses or networks (192.0.2.1, 10.0.0.0/8, 2001:db8::/32), separated by commas"},
	    {"proxy-protocol-from", "127.0.0.1,,::1",
	     "IP addresses or networks (192.0.2.1, 10.0.0.0/8, 2001:db8::/32), separated by commas"},
	    {"proxy-protocol-from", "127.0.0.1 ::1",
	     "IP addresses or networks (192.0.2.1, 10.0.0.0/8, 2001:db8::/32), separated by commas"},
	    {"proxy-protocol-from", "[::1]", NULL,
	     "\"[::1]\" is not an IP address or a network (192.0.2.1, 10.0.0.0/8, "
	     "2001:db8::/32; no bit set past the prefix)"},
	    {"proxy-protocol-from", "::1/129", NULL,
	     "\"::1/129\" is not an IP address or a network (192.0.2.1, 10.0.0.0/8, "
	     "2001:db8::/32; no bit set past the prefix)"},
	};
	static const struct {
		const char *key, *value, *expected;
	} user[] = {
	    {"role", "", "a comma-separated list of source, sink, admin"},
	    {"role", "Source", "a comma-separated list of source, sink, admin"},
	    {"role", "source,,sink", "a comma-separated list of source, sink, admin"},
	    {"role", "source,", "a comma-separated list of source, sink, admin"},
	    {"role", "source sink", "a comma-separated list of source, sink, admin"},
	    {"role", "root", "a comma-separated list of source, sink, admin"},
	    {"key-file", "keys/a.key", "an absolute path"},
	    {"key-file", "", "an absolute path"},
	    {"key", "/a.key",
	     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
	    {"key", "a/b /a.key",
	     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
	    {"key", "-a /a.key",
	     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
	    {"key", "a a.key",
	     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
	    {"key", "123456789012345678901234567890123 /a.key",
	     "a key id (1..32 letters, digits, \".\", \"_\" or \"-\"), a space and an absolute path"},
	    {"key-hash", "sha512", "sha384 or sha256"},
	    {"unix-uid", "-1", "uids or user names, separated by commas"},
	    {"unix-uid", "4294967295", "uids or user names, separated by commas"},
	    {"unix-uid", "1000x", "uids or user names, separated by commas"},
	    {"unix-uid", "1000,", "uids or user names, separated by commas"},
	    {"unix-uid", ",1000", "uids or user names, separated by commas"},
	    {"unix-uid", "1000 1001", "uids or user names, separated by commas"},
	    {"unix-gid", "4294967295", "gids or group names, separated by commas"},
	    {"unix-gid", "0,,4", "gids or group names, separated by commas"},
	    {"max-credit-per-byte", "9", "a number of bits 0..8"},
	    {"max-credit-per-byte", "-0", "a number of bits 0..8"},
	    {"quota-bits-per-hour", "-1", "a number of bits, 0 for no quota"},
	    {"quota-bits-per-hour", "18446744073709551616", "a number of bits, 0 for no quota"},
	    {"max-sessions", "0", "a number 1..65536"},
	};
	char content[512], msg[512];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(broker); i++) {
		snprintf(content, sizeof(content), "; comment\n[broker]\n%s = %s\n", broker[i].key,
		         broker[i].value);
		if (broker[i].reason)
			snprintf(msg, sizeof(msg), "invalid value \"%s\" for %s: %s",
			         broker[i].value, broker[i].key, broker[i].reason);
		else
			snprintf(msg, sizeof(msg), "invalid value \"%s\" for %s: expected %s",
			         broker[i].value, broker[i].key, broker[i].expected);
		expect_error(content, 3, msg);
	}
	for (size_t i = 0; i < ELEMENTSOF(user); i++) {
		snprintf(content, sizeof(content), "[broker]\n[user u1]\nunix-uid = 5\n%s = %s\n",
		         user[i].key, user[i].value);
		if (strcmp(user[i].key, "unix-uid") == 0)
			snprintf(content, sizeof(content),
			         "[broker]\n[user u1]\nrole = sink\n%s = %s\n", user[i].key,
			         user[i].value);
		snprintf(msg, sizeof(msg), "invalid value \"%s\" for %s: expected %s",
		         user[i].value, user[i].key, user[i].expected);
		expect_error(content, 4, msg);
	}

	expect_error("[user a]\nrole = sink\nunix-uid = no-such-user-eb-test\n", 3,
	             "invalid value \"no-such-user-eb-test\" for unix-uid: no such user");
	expect_error("[user a]\nrole = sink\nunix-gid = no-such-group-eb-test\n", 3,
	             "invalid value \"no-such-group-eb-test\" for unix-gid: no such group");
	expect_error("[user a]\nrole = sink\nunix-gid = 0, no-such-group-eb-test\n", 3,
	             "invalid value \"0, no-such-group-eb-test\" for unix-gid: no such group");
	expect_error("[user a]\nrole = sink\nunix-gid = 4, 0, 4\n", 3,
	             "invalid value \"4, 0, 4\" for unix-gid: an account is listed twice");
	expect_error(
	    "[user a]\nrole = sink\nunix-uid = 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n", 3,
	    "invalid value \"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\" for unix-uid: "
	    "too many users (at most 16)");
	expect_error(
	    "[user a]\nrole = sink\nunix-gid = 4, 5\n[user b]\nrole = sink\nunix-gid = 6, 5\n", 4,
	    "[user b] has unix-gid 5, which [user a] on line 1 has already");

	expect_error("[broker]\nproxy-protocol-from = 127.0.0.1, 10.0.0.0/8, 127.0.0.1\n", 2,
	             "invalid value \"127.0.0.1, 10.0.0.0/8, 127.0.0.1\" for proxy-protocol-from: "
	             "127.0.0.1 is listed twice");
	{
		char value[400] = "10.0.0.1", many[512], big[600];

		/* 17 addresses, one too many (and the line still short enough). */
		for (int i = 2; i <= 17; i++)
			snprintf(value + strlen(value), sizeof(value) - strlen(value), ",10.0.0.%d",
			         i);
		snprintf(many, sizeof(many), "[broker]\nproxy-protocol-from = %s\n", value);
		snprintf(
		    big, sizeof(big),
		    "invalid value \"%s\" for proxy-protocol-from: too many addresses (at most 16)",
		    value);
		expect_error(many, 2, big);
	}
	expect_error("[broker]\nlisten = unix:/a\nlisten = tcp://h\nlisten = tcp://h:55225\n", 4,
	             "invalid value \"tcp://h:55225\" for listen: this address is already listed");
	expect_error(
	    "[broker]\nlisten = srv:fleet.test\n", 2,
	    "invalid value \"srv:fleet.test\" for listen: srv:NAME names brokers to connect to, not an address to listen on");
	{
		char many[2048] = "[broker]\n";
		size_t used = strlen(many);

		for (int i = 1; i <= 17; i++)
			used += (size_t)snprintf(many + used, sizeof(many) - used,
			                         "listen = tcp://127.0.0.1:%d\n", i);
		expect_error(
		    many, 18,
		    "invalid value \"tcp://127.0.0.1:17\" for listen: too many listen addresses (at most 16)");
	}
}

/* inih takes a line as a C string: a NUL byte would end the value there and drop the rest of
 * the line without a word. */
static void test_nul_byte(void **state)
{
	static const char content[] = "[broker]\ncapacity-bits = 4096\0junk\n";
	struct eb_conf *conf = NULL;
	_cleanup_free_ char *error = NULL, *expected = NULL;
	int fd;

	(void)state;
	(void)unlink(conf_path);
	fd = open(conf_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, sizeof(content) - 1), (ssize_t)sizeof(content) - 1);
	close(fd);
	assert_int_equal(eb_conf_load(conf_path, &conf, &error), -EINVAL);
	assert_null(conf);
	assert_true(asprintf(&expected, "%s:2: NUL byte in the line", conf_path) > 0);
	assert_string_equal(error, expected);
}

/* Writes content to dir/name, making dir. */
static char *write_in(const char *sub, const char *name, const char *content)
{
	char *d = NULL, *path = NULL;

	assert_true(asprintf(&d, "%s/%s", dir, sub) > 0);
	(void)mkdir(d, 0755);
	assert_true(asprintf(&path, "%s/%s", d, name) > 0);
	if (content)
		write_file(path, content, 0644);
	free(d);
	return path;
}

static void test_dropin_order(void **state)
{
	_cleanup_free_ char *a = NULL, *b = NULL, *vendor_dir = NULL, *admin_dir = NULL;
	_cleanup_free_ char *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL, *p5 = NULL;
	char **files = NULL;
	unsigned n = 0;

	(void)state;
	p1 = write_in("vendor", "50-x.conf", "[broker]\ncapacity-bits = 4096\n");
	p2 = write_in("vendor", "10-a.conf", "");
	p3 = write_in("vendor", "README", "not a drop-in\n");
	p4 = write_in("admin", "50-x.conf", "");
	p5 = write_in("admin", "20-b.conf", "");
	assert_true(asprintf(&vendor_dir, "%s/vendor", dir) > 0);
	assert_true(asprintf(&admin_dir, "%s/admin", dir) > 0);
	a = write_in("admin", ".hidden.conf", "");
	b = write_in("admin", "x.conf.bak", "");

	/* By name across both, the admin's 50-x masking the vendor's; only *.conf, no dot files;
	 * a directory that is not there has none. */
	assert_int_equal(
	    eb_confdir_list((const char *const[]){vendor_dir, "/nonexistent/eb", admin_dir}, 3,
	                    &files, &n),
	    0);
	assert_int_equal(n, 3);
	assert_string_equal(files[0], p2);
	assert_string_equal(files[1], p5);
	assert_string_equal(files[2], p4);
	assert_null(files[3]);
	files = eb_confdir_free(files);
	assert_null(eb_confdir_free(NULL));
}

static void test_dropin_override(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	_cleanup_free_ char *d1 = NULL, *d2 = NULL, *main_path = NULL;
	const struct eb_user *u;
	const char *files[3];
	char *error = NULL;

	(void)state;
	d1 = write_in("o", "10-ship.conf",
	              "[broker]\ncapacity-bits = 8192\nlisten = unix:/a\nlisten = unix:/b\n"
	              "[user ship]\nrole = source\nunix-gid = 100\nmax-credit-per-byte = 4\n"
	              "[user both]\nrole = sink\nunix-uid = 7\n"
	              "[user keep]\nrole = admin\nunix-uid = 8\n");
	d2 = write_in("o", "20-more.conf", "[broker]\nstatus-interval-sec = 5\n");
	main_path = write_in("o", "main.conf",
	                     "[broker]\ncapacity-bits = 16384\nlisten = unix:/c\n"
	                     "[user both]\nrole = source\nunix-uid = 9\n"
	                     "[user mine]\nrole = source\nunix-gid = 100\n");
	files[0] = d1, files[1] = d2, files[2] = main_path;
	if (eb_conf_load_files(files, 3, &conf, &error) < 0)
		fail_msg("%s", error ? error : "load failed");

	/* Later files win key by key; listen= is replaced as a list. */
	assert_int_equal(conf->capacity_bits, 16384);
	assert_int_equal(conf->status_interval_s, 5);
	assert_int_equal(conf->n_listen, 1);
	assert_string_equal(conf->listen[0], "unix:/c");
	assert_string_equal(conf->path, main_path);

	/* A user defined again is replaced whole: "both" is a source on uid 9 only. */
	u = eb_conf_find_user(conf, "both");
	assert_non_null(u);
	assert_int_equal(u->roles, EB_ROLE_SOURCE);
	assert_int_equal(u->unix_uids[0], 9);
	assert_ptr_equal(eb_conf_find_unix_peer(conf, 7, 7, NULL, 0), NULL);

	/* The main file maps gid 100 to "mine": the drop-in's "ship" gives way, whole. */
	assert_null(eb_conf_find_user(conf, "ship"));
	u = eb_conf_find_unix_peer(conf, 1000, 100, NULL, 0);
	assert_non_null(u);
	assert_string_equal(u->name, "mine");
	assert_non_null(eb_conf_find_user(conf, "keep"));
	assert_int_equal(conf->n_users, 3);
}

static bool trusted(const struct eb_conf *conf, int family, const char *addr)
{
	struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
	void *a = family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
	                            : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;

	assert_int_equal(inet_pton(family, addr, a), 1);
	return eb_conf_proxy_trusted(conf, (struct sockaddr *)&ss);
}

static void test_proxy_from(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	_cleanup_free_ char *d1 = NULL, *main_path = NULL;
	const char *files[2];
	char *error = NULL;

	(void)state;
	conf = load_ok("[broker]\nproxy-protocol-from = 127.0.0.1 , 10.0.0.0/8,2001:db8::/32\n");
	assert_int_equal(conf->n_proxy_from, 3);
	assert_true(trusted(conf, AF_INET, "127.0.0.1"));
	assert_false(trusted(conf, AF_INET, "127.0.0.2"));
	assert_true(trusted(conf, AF_INET, "10.20.30.40"));
	assert_true(trusted(conf, AF_INET6, "::ffff:10.20.30.40"));
	assert_true(trusted(conf, AF_INET6, "2001:db8:5::1"));
	assert_false(trusted(conf, AF_INET6, "::1"));
	eb_conf_free(conf);

	/* Nothing is none: a drop-in may turn it off. */
	conf = load_ok("[broker]\nproxy-protocol-from =\n");
	assert_int_equal(conf->n_proxy_from, 0);
	assert_false(trusted(conf, AF_INET, "127.0.0.1"));
	eb_conf_free(conf);
	conf = NULL;

	/* A later file's list replaces an earlier one's whole. */
	d1 = write_in("p", "10-lb.conf", "[broker]\nproxy-protocol-from = 192.0.2.1, 192.0.2.2\n");
	main_path = write_in("p", "main.conf", "[broker]\nproxy-protocol-from = 198.51.100.7\n");
	files[0] = d1, files[1] = main_path;
	if (eb_conf_load_files(files, 2, &conf, &error) < 0)
		fail_msg("%s", error ? error : "load failed");
	assert_int_equal(conf->n_proxy_from, 1);
	assert_false(trusted(conf, AF_INET, "192.0.2.1"));
	assert_true(trusted(conf, AF_INET, "198.51.100.7"));
}

static void test_dropin_errors(void **state)
{
	_cleanup_free_ char *d1 = NULL, *main_path = NULL, *expected = NULL;
	struct eb_conf *conf = NULL;
	const char *files[2];
	char *error = NULL;

	(void)state;
	/* An error names the drop-in and its line. */
	d1 = write_in("e", "10-bad.conf", "[broker]\n\ncapacity-bits = 5\n");
	main_path = write_in("e", "main.conf", "[broker]\n");
	files[0] = d1, files[1] = main_path;
	assert_int_equal(eb_conf_load_files(files, 2, &conf, &error), -EINVAL);
	assert_true(asprintf(&expected,
	                     "%s:3: invalid value \"5\" for capacity-bits: expected a number "
	                     "4096..2147483648, multiple of 512",
	                     d1) > 0);
	assert_string_equal(error, expected);
	free(error), error = NULL;
	free(expected), expected = NULL;

	/* Within one file a clash is still an error, drop-in or not. */
	free(d1);
	files[0] = d1 =
	    write_in("e", "10-bad.conf",
	             "[user a]\nrole = sink\nunix-uid = 5\n[user b]\nrole = sink\nunix-uid = 5\n");
	assert_int_equal(eb_conf_load_files(files, 2, &conf, &error), -EINVAL);
	assert_true(asprintf(&expected,
	                     "%s:4: [user b] has unix-uid 5, which [user a] on line 1 has already",
	                     d1) > 0);
	assert_string_equal(error, expected);
	free(error), error = NULL;
	free(expected), expected = NULL;

	/* A user twice in the same file is a duplicate, whatever other files do. */
	free(d1);
	files[0] = d1 =
	    write_in("e", "10-bad.conf", "[user a]\nrole = sink\nunix-uid = 5\n[user a]\n");
	assert_int_equal(eb_conf_load_files(files, 2, &conf, &error), -EINVAL);
	assert_true(asprintf(&expected, "%s:4: duplicate section [user a], first defined on line 1",
	                     d1) > 0);
	assert_string_equal(error, expected);
	free(error);
	assert_null(conf);
}

/* One read finds every error it can: a bad value, an unknown key, a refused section (whose keys
 * are skipped, not taken for the section before), a bad line, in each file; the files after a
 * broken one are read too. Validation, which a broken file would only confuse, is left out. */
static void test_errors_all(void **state)
{
	_cleanup_free_ char *d1 = NULL, *main_path = NULL, *expected = NULL, *error = NULL;
	struct eb_conf *conf = NULL;
	const char *files[3];

	(void)state;
	d1 = write_in("all", "10-bad.conf", "[broker]\ncapacity-bits = 5\n[user a]\nrole = sink\n");
	main_path = write_in("all", "main.conf",
	                     "[broker]\n"
	                     "capacity-bits = 4096\n"
	                     "typo-key = 1\n"
	                     "[nonsense]\n"
	                     "capacity-bits = 8192\n"
	                     "  indented = 1\n"
	                     "[user b]\n"
	                     "role = sink,wizard\n"
	                     "unix-uid = 7\n");
	files[0] = d1, files[1] = "/nonexistent/eb-test.conf", files[2] = main_path;
	assert_int_equal(eb_conf_load_files(files, 3, &conf, &error), -EINVAL);
	assert_true(
	    asprintf(
		&expected,
		"%s:2: invalid value \"5\" for capacity-bits: expected a number "
		"4096..2147483648, multiple of 512\n"
		"/nonexistent/eb-test.conf: No such file or directory\n"
		"%s:3: unknown key \"typo-key\" in [broker]\n"
		"%s:4: unknown section [nonsense]: expected [broker], [upstream] or [user NAME]\n"
		"%s:6: line starts with white space: continuation lines are not supported\n"
		"%s:8: invalid value \"sink,wizard\" for role: expected a comma-separated list "
		"of source, sink, admin",
		d1, main_path, main_path, main_path, main_path) > 0);
	assert_string_equal(error, expected);
	assert_null(conf);
}

static void test_errors_validation(void **state)
{
	(void)state;
	expect_error("[broker]\nlow-water-percent = 90\n", 2,
	             "low-water-percent (90) must be below high-water-percent (90)");
	expect_error(
	    "[broker]\nhigh-water-percent = 50\nmax-sessions = 3\nlow-water-percent = 60\n", 4,
	    "low-water-percent (60) must be below high-water-percent (50)");
	expect_error("[broker]\nlow-water-percent = 60\nhigh-water-percent = 50\n", 3,
	             "low-water-percent (60) must be below high-water-percent (50)");
	expect_error("[broker]\n\n[user a]\nunix-uid = 3\n", 3,
	             "[user a] has no role: expected role = source, sink or admin");
	expect_error("[user a]\nrole = sink\nunix-uid = 3\n[user empty]\n", 4,
	             "[user empty] has no role: expected role = source, sink or admin");
	expect_error(
	    "[user a]\nrole = sink\nunix-uid = 3\n\n[user b]\nrole = source\n"
	    "max-credit-per-byte = 2\n",
	    5, "[user b] has neither key-file nor unix-uid or unix-gid, so it could never connect");
	expect_error("[user a]\nrole = sink\nunix-uid = 3\n[user b]\nrole = source\nunix-uid = 3\n",
	             4, "[user b] has unix-uid 3, which [user a] on line 1 has already");
	expect_error("[user a]\nrole = sink\nunix-gid = 7\n[user b]\nrole = source\nunix-gid = 7\n",
	             4, "[user b] has unix-gid 7, which [user a] on line 1 has already");
}

static void test_unix_peer(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	const struct eb_user *u;

	(void)state;
	conf = load_ok("[user bygid]\nrole = sink\nunix-gid = 100\n"
	               "[user byuid]\nrole = source\nunix-uid = 1000\n"
	               "[user keyonly]\nrole = admin\nkey-file = /x\n");
	u = eb_conf_find_unix_peer(conf, 1000, 100, NULL, 0);
	assert_non_null(u);
	assert_string_equal(u->name, "byuid"); /* the uid wins over an earlier gid match */
	u = eb_conf_find_unix_peer(conf, 1001, 100, NULL, 0);
	assert_non_null(u);
	assert_string_equal(u->name, "bygid");
	assert_null(eb_conf_find_unix_peer(conf, 0, 0, NULL, 0));
	assert_null(eb_conf_find_unix_peer(NULL, 0, 0, NULL, 0));
	assert_null(eb_conf_find_user(NULL, "x"));
	conf = eb_conf_free(conf);

	/* Several accounts in one section; supplementary groups count after the uid and the
	 * primary gid, and only when they name one user. */
	conf = load_ok("[user admins]\nrole = admin\nunix-gid = 0, 4\nunix-uid = 1005,1006\n"
	               "[user sinks]\nrole = sink\nunix-gid = 200\n");
	u = eb_conf_find_user(conf, "admins");
	assert_int_equal(u->n_unix_gids, 2);
	assert_int_equal(u->unix_gids[1], 4);
	assert_int_equal(u->n_unix_uids, 2);
	assert_string_equal(eb_conf_find_unix_peer(conf, 1006, 1006, NULL, 0)->name, "admins");
	assert_string_equal(eb_conf_find_unix_peer(conf, 0, 0, NULL, 0)->name, "admins");
	/* root in a unit with Group=200 is that group's user, not an admin. */
	assert_string_equal(eb_conf_find_unix_peer(conf, 0, 200, NULL, 0)->name, "sinks");
	{
		const gid_t adm[] = {24, 4}, both[] = {4, 200}, none[] = {5, 6};

		assert_string_equal(eb_conf_find_unix_peer(conf, 1000, 1000, adm, 2)->name,
		                    "admins");
		assert_string_equal(eb_conf_find_unix_peer(conf, 1000, 200, adm, 2)->name, "sinks");
		assert_null(eb_conf_find_unix_peer(conf, 1000, 1000, both, 2));
		assert_null(eb_conf_find_unix_peer(conf, 1000, 1000, none, 2));
	}
}

static void test_keys(void **state)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	_cleanup_free_ char *error = NULL, *expected = NULL;
	char ka[300], kb[300], content[1024], several[2048];
	const struct eb_user *u;
	uint8_t want[EB_KEY_SIZE];

	(void)state;
	snprintf(ka, sizeof(ka), "%s/a.key", dir);
	snprintf(kb, sizeof(kb), "%s/b.key", dir);
	write_file(ka, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", 0600);
	(void)unlink(kb);
	assert_int_equal(eb_key_generate(kb), 0);
	assert_int_equal(eb_key_load(kb, want), 0);

	snprintf(content, sizeof(content),
	         "[user a]\nrole = source\nkey-file = %s\n"
	         "[user b]\nrole = sink\nkey-file = %s\n"
	         "[user local]\nrole = sink\nunix-uid = 1\n",
	         ka, kb);
	conf = load_ok(content);
	assert_int_equal(eb_conf_load_keys(conf, &error), 0);
	assert_null(error);
	u = eb_conf_find_user(conf, "a");
	assert_true(u->keys[0].loaded);
	assert_int_equal(u->keys[0].key[0], 0x00);
	assert_int_equal(u->keys[0].key[15], 0xff);
	u = eb_conf_find_user(conf, "b");
	assert_true(u->keys[0].loaded);
	assert_memory_equal(u->keys[0].key, want, EB_KEY_SIZE);
	assert_int_equal(eb_conf_find_user(conf, "local")->n_keys, 0);
	conf = eb_conf_free(conf);

	/* Several keys: key-file= is the default whatever its line, the others by their ids. */
	snprintf(several, sizeof(several),
	         "[user a]\nrole = sink\nkey = new %s\nkey-file = %s\nkey = n2 %s\n"
	         "[user b]\nrole = sink\nkey = only %s\n",
	         kb, ka, ka, kb);
	conf = load_ok(several);
	assert_int_equal(eb_conf_load_keys(conf, &error), 0);
	{
		const struct eb_user *who = NULL;
		const struct eb_user_key *k;

		u = eb_conf_find_user(conf, "a");
		assert_int_equal(u->n_keys, 3);
		assert_null(u->keys[0].id);
		assert_string_equal(u->keys[1].id, "new");
		assert_string_equal(u->keys[2].id, "n2");
		k = eb_conf_find_key(conf, "a", &who);
		assert_ptr_equal(k, &u->keys[0]);
		assert_ptr_equal(who, u);
		assert_ptr_equal(eb_conf_find_key(conf, "a/new", &who), &u->keys[1]);
		assert_memory_equal(eb_conf_find_key(conf, "a/new", &who)->key, want, EB_KEY_SIZE);
		assert_ptr_equal(eb_conf_find_key(conf, "a/n2", &who), &u->keys[2]);
		assert_null(eb_conf_find_key(conf, "a/", &who));
		assert_null(eb_conf_find_key(conf, "a/n", &who));
		assert_null(eb_conf_find_key(conf, "a/new/", &who));
		assert_null(eb_conf_find_key(conf, "/new", &who));
		assert_null(eb_conf_find_key(conf, "c/new", &who));
		/* A user whose only key has an id: its bare name names that key too. */
		u = eb_conf_find_user(conf, "b");
		assert_ptr_equal(eb_conf_find_key(conf, "b", &who), &u->keys[0]);
		assert_ptr_equal(eb_conf_find_key(conf, "b/only", &who), &u->keys[0]);
	}
	conf = eb_conf_free(conf);

	/* Too open: named at its key-file= line, with the fix (test-key checks the words). */
	assert_int_equal(chmod(kb, 0644), 0);
	conf = load_ok(content);
	assert_int_equal(eb_conf_load_keys(conf, &error), -EPERM);
	assert_true(asprintf(&expected, "%s:6: [user b]: key file %s is ", conf_path, kb) > 0);
	assert_true(strncmp(error, expected, strlen(expected)) == 0);
	free(expected);
	assert_true(asprintf(&expected, "&& chmod 0600 %s\"", kb) > 0);
	assert_non_null(strstr(error, expected));
	conf = eb_conf_free(conf);
	error = (free(error), NULL);
	expected = (free(expected), NULL);

	/* Malformed. */
	write_file(kb, "not a key\n", 0600);
	conf = load_ok(content);
	assert_int_equal(eb_conf_load_keys(conf, &error), -EBADMSG);
	assert_true(
	    asprintf(
		&expected,
		"%s:6: [user b]: key file %s is not 64 hexadecimal digits and an optional newline",
		conf_path, kb) > 0);
	assert_string_equal(error, expected);
	conf = eb_conf_free(conf);
	error = (free(error), NULL);
	expected = (free(expected), NULL);

	/* Missing. */
	assert_int_equal(unlink(kb), 0);
	conf = load_ok(content);
	assert_int_equal(eb_conf_load_keys(conf, &error), -ENOENT);
	assert_true(asprintf(&expected,
	                     "%s:6: [user b]: cannot read key file %s: No such file or directory",
	                     conf_path, kb) > 0);
	assert_string_equal(error, expected);
	conf = eb_conf_free(conf);
	error = (free(error), NULL);
	expected = (free(expected), NULL);

	/* Every key is tried: both bad ones are named, each at its key-file= line. */
	write_file(ka, "not a key either\n", 0600);
	conf = load_ok(content);
	assert_int_equal(eb_conf_load_keys(conf, &error), -EBADMSG);
	assert_true(
	    asprintf(
		&expected,
		"%s:3: [user a]: key file %s is not 64 hexadecimal digits and an optional newline\n"
		"%s:6: [user b]: cannot read key file %s: No such file or directory",
		conf_path, ka, conf_path, kb) > 0);
	assert_string_equal(error, expected);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),          cmocka_unit_test(test_full),
	    cmocka_unit_test(test_handshake_threads), cmocka_unit_test(test_upstream),
	    cmocka_unit_test(test_example),           cmocka_unit_test(test_errors_structure),
	    cmocka_unit_test(test_errors_values),     cmocka_unit_test(test_nul_byte),
	    cmocka_unit_test(test_errors_validation), cmocka_unit_test(test_dropin_order),
	    cmocka_unit_test(test_dropin_override),   cmocka_unit_test(test_dropin_errors),
	    cmocka_unit_test(test_unix_peer),         cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_errors_all),        cmocka_unit_test(test_proxy_from),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
