/* SPDX-License-Identifier: MIT */
/* Tests for shared/seedfile.c in a temporary directory: round trip, credit only when asked and
 * only once, malformed files, modes. */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "macro.h"
#include "pool.h"
#include "seedfile.h"

struct fixture {
	char dir[64];
	char path[96];
};

/* geteuid() is doubled (meson: -Wl,--wrap=geteuid): with other_euid set, the seed file the
 * test wrote belongs to someone else as the loader sees it. */
uid_t __real_geteuid(void);
uid_t __wrap_geteuid(void);
static bool other_euid;

uid_t __wrap_geteuid(void)
{
	return __real_geteuid() + (other_euid ? 1 : 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test-seedfile.XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/seed", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	DIR *d = opendir(f->dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char p[512];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
		(void)unlink(p);
	}
	if (d)
		closedir(d);
	(void)rmdir(f->dir);
	free(f);
	return 0;
}

static void pool_freep(struct eb_pool **p)
{
	*p = eb_pool_free(*p);
}

/* Fills a pool with n blocks of credited input. */
static struct eb_pool *filled(uint64_t capacity, unsigned blocks)
{
	struct eb_pool *p = NULL;
	uint8_t data[72];

	assert_int_equal(eb_pool_new(capacity, &p, NULL), 0);
	for (unsigned i = 0; i < blocks; i++) {
		memset(data, (int)i + 1, sizeof(data));
		assert_int_equal(eb_pool_add(p, data, sizeof(data), 576, NULL), 0);
	}
	assert_int_equal(eb_pool_level(p), 512 * (uint64_t)blocks);
	return p;
}

/* Reads the header back: credit and length, and checks the file is whole. */
static void read_header(const char *path, uint32_t *ret_credit, uint32_t *ret_len)
{
	uint8_t h[16];
	struct stat st;
	FILE *f = fopen(path, "re");

	assert_non_null(f);
	assert_int_equal(fread(h, 1, sizeof(h), f), sizeof(h));
	fclose(f);
	assert_memory_equal(h, "EBSEED1\n", 8);
	memcpy(ret_credit, h + 8, 4);
	memcpy(ret_len, h + 12, 4);
	*ret_credit = be32toh(*ret_credit);
	*ret_len = be32toh(*ret_len);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, 16 + (uint64_t)*ret_len);
	assert_int_equal(st.st_mode & 07777, 0600);
}

static void write_raw(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static unsigned count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_round_trip(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *a = filled(8192, 8), *b = NULL;
	uint64_t bits = 1, credited = 1;
	uint32_t credit, len;

	assert_int_equal(eb_seedfile_save(f->path, a, true, &bits), 0);
	assert_int_equal(bits, 8 * 512);
	/* Draining moves the content out: it must not be both in the file and in the pool. */
	assert_int_equal(eb_pool_level(a), 0);
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 8 * 512);
	assert_int_equal(len, 8 * 64);
	assert_int_equal(count_files(f->dir), 1);

	assert_int_equal(eb_pool_new(8192, &b, NULL), 0);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	/* The blocks go back as they are: the level survives a stop and a start. */
	assert_int_equal(credited, 8 * 512);
	assert_int_equal(eb_pool_level(b), 8 * 512);

	/* At once replaced by an uncredited file, so loading again credits nothing. */
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 0);
	assert_int_equal(len, 64);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 0);
	assert_int_equal(eb_pool_level(b), 8 * 512);
	assert_int_equal(count_files(f->dir), 1);
}

static void test_credit_only_when_asked(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *a = filled(8192, 4), *b = NULL;
	uint64_t bits = 0, credited = 1;
	uint32_t credit, len;

	assert_int_equal(eb_seedfile_save(f->path, a, true, &bits), 0);
	assert_int_equal(bits, 4 * 512);
	assert_int_equal(eb_pool_new(8192, &b, NULL), 0);
	assert_int_equal(eb_seedfile_load(f->path, b, false, &credited), 0);
	assert_int_equal(credited, 0);
	assert_int_equal(eb_pool_level(b), 0);
	/* Uncredited, but still spent: the file no longer claims anything. */
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 0);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 0);
}

static void test_periodic_save(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *a = filled(8192, 4);
	uint64_t bits = 1;
	uint32_t credit, len;

	/* Without drain the pool keeps its level (the DRBG's first seed aside) and the file
	 * carries no credit. */
	assert_int_equal(eb_seedfile_save(f->path, a, false, &bits), 0);
	assert_int_equal(bits, 0);
	assert_true(eb_pool_level(a) >= 3 * 512);
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 0);
	assert_int_equal(len, 64);

	/* Draining an empty pool writes an uncredited file too. */
	a = eb_pool_free(a);
	assert_int_equal(eb_pool_new(4096, &a, NULL), 0);
	assert_int_equal(eb_seedfile_save(f->path, a, true, &bits), 0);
	assert_int_equal(bits, 0);
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 0);
	assert_int_equal(count_files(f->dir), 1);
}

static void test_missing(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *b = NULL;
	uint64_t credited = 7;

	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), -ENOENT);
	assert_int_equal(credited, 7);
	assert_int_equal(count_files(f->dir), 0);
}

static void test_malformed(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *b = NULL;
	uint8_t buf[16 + 72];
	uint64_t credited = 7;
	uint32_t credit, len, be;
	const struct {
		const char *magic;
		uint32_t credit, len;
		size_t size;
	} cases[] = {
	    {"EBSEED2\n", 576, 72, 16 + 72}, /* wrong magic */
	    {"EBSEED1\n", 576, 73, 16 + 72}, /* length beyond the file */
	    {"EBSEED1\n", 576, 71, 16 + 72}, /* trailing bytes */
	    {"EBSEED1\n", 576, 72, 12},      /* torn header */
	    {"EBSEED1\n", 0, 0, 0},          /* empty file */
	};

	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		memset(buf, 0x42, sizeof(buf));
		memcpy(buf, cases[i].magic, 8);
		be = htobe32(cases[i].credit);
		memcpy(buf + 8, &be, 4);
		be = htobe32(cases[i].len);
		memcpy(buf + 12, &be, 4);
		write_raw(f->path, buf, cases[i].size, 0600);
		credited = 7;

		assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), -EBADMSG);
		assert_int_equal(credited, 7);
		assert_int_equal(eb_pool_level(b), 0);
		/* Replaced by a good, uncredited file. */
		read_header(f->path, &credit, &len);
		assert_int_equal(credit, 0);
		assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
		assert_int_equal(credited, 0);
	}
}

static void write_seed(const char *path, uint32_t credit, uint32_t len, uint8_t fill)
{
	_cleanup_free_ uint8_t *buf = malloc(16 + (size_t)len);
	uint32_t be;

	assert_non_null(buf);
	memset(buf, fill, 16 + (size_t)len);
	memcpy(buf, "EBSEED1\n", 8);
	be = htobe32(credit);
	memcpy(buf + 8, &be, 4);
	be = htobe32(len);
	memcpy(buf + 12, &be, 4);
	write_raw(path, buf, 16 + (size_t)len, 0600);
}

static void test_claims_capped(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *b = NULL;
	uint64_t credited = 0;

	/* A header claiming more than 8 bits a byte gets 8 bits a byte: whole blocks are restored,
	 * the 8-byte tail earns nothing. */
	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	write_seed(f->path, 100000, 72, 0x17);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 512);
	assert_int_equal(eb_pool_level(b), 512);

	/* Less than full entropy is conditioned like a source's input: 1000 bits make one block
	 * of 576 and leave 424 waiting. */
	b = eb_pool_free(b);
	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	write_seed(f->path, 1000, 144, 0x29);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 1000);
	assert_int_equal(eb_pool_level(b), 512);

	/* And never more than the pool has room for. */
	b = eb_pool_free(b);
	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	{
		_cleanup_(pool_freep) struct eb_pool *a = filled(16384, 16);
		uint64_t bits = 0;

		assert_int_equal(eb_seedfile_save(f->path, a, true, &bits), 0);
		assert_int_equal(bits, 16 * 512);
	}
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 8 * 512);
	assert_int_equal(eb_pool_level(b), eb_pool_capacity(b));
}

static void test_readable_not_credited(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *b = NULL;
	uint64_t credited = 1;
	uint32_t credit, len;

	/* Others could have read it: its content is no secret, so it earns no credit. */
	write_seed(f->path, 576, 72, 0x33);
	assert_int_equal(chmod(f->path, 0644), 0);
	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	assert_int_equal(credited, 0);
	/* The replacement is 0600 again. */
	read_header(f->path, &credit, &len);
	assert_int_equal(credit, 0);
}

static void test_other_owner_not_credited(void **state)
{
	struct fixture *f = *state;
	_cleanup_(pool_freep) struct eb_pool *b = NULL;
	uint64_t credited = 1;

	/* 0600, but another user's: that user knows its content, so it earns no credit. */
	write_seed(f->path, 576, 72, 0x33);
	assert_int_equal(eb_pool_new(4096, &b, NULL), 0);
	other_euid = true;
	assert_int_equal(eb_seedfile_load(f->path, b, true, &credited), 0);
	other_euid = false;
	assert_int_equal(credited, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_credit_only_when_asked, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_periodic_save, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claims_capped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_readable_not_credited, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_owner_not_credited, setup, teardown),
	};

	umask(022);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
