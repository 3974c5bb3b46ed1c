/* SPDX-License-Identifier: MIT */
/* eb-assess esv's SHA256SUMS: each file's SHA-256, by OpenSSL's EVP, in sha256sum(1)'s format, so
 * that sha256sum -c checks the folder. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "assess-esv.h"
#include "io.h"
#include "macro.h"

static int digest(int dir_fd, const char *name, unsigned char md[EVP_MAX_MD_SIZE],
                  unsigned *ret_len)
{
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	EVP_MD_CTX *ctx;
	int r = 0;

	if (fd < 0)
		return -errno;
	ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	for (;;) {
		unsigned char buf[65536];
		ssize_t k = eb_read_all(fd, buf, sizeof(buf));

		if (k < 0) {
			r = (int)k;
			break;
		}
		if (k > 0 && EVP_DigestUpdate(ctx, buf, (size_t)k) != 1) {
			r = -EIO;
			break;
		}
		if ((size_t)k < sizeof(buf))
			break;
	}
	if (r >= 0 && EVP_DigestFinal_ex(ctx, md, ret_len) != 1)
		r = -EIO;
	EVP_MD_CTX_free(ctx);
	return r;
}

int assess_esv_write_sums(int dir_fd, const char *const *files, size_t n)
{
	_cleanup_fclose_ FILE *f = NULL;
	int r;

	r = assess_esv_fcreate(dir_fd, ASSESS_ESV_SUMS, &f);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned len;

		r = digest(dir_fd, files[i], md, &len);
		if (r < 0)
			return r;
		for (unsigned j = 0; j < len; j++)
			fprintf(f, "%02x", md[j]);
		/* Two spaces: the file is read as text, as sha256sum writes it by default. */
		fprintf(f, "  %s\n", files[i]);
	}
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0)
		return -EIO;
	return 0;
}
