/* SPDX-License-Identifier: MIT */
#include "bootrand.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

#include "io.h"
#include "macro.h"

#ifndef GRND_INSECURE
#define GRND_INSECURE 0x0004 /* Linux 5.6 */
#endif

#define PROVIDER_NAME "eb-bootrand"
#define SOURCE_NAME   "EB-BOOTRAND"
/* A DRBG takes a parent only as strong as itself; OpenSSL's are 256-bit. What the bytes really
 * carry is the kernel's business, as with OpenSSL's own seed source. */
#define SOURCE_STRENGTH 256
#define MAX_REQUEST     4096

static atomic_uint n_seeds;

struct source {
	int state;
};

/* The kernel's CRNG output without waiting for it to be initialised: getrandom(GRND_INSECURE)
 * on 5.6 and later; before 5.6 /dev/urandom, which never waited there. On 5.18 and later
 * /dev/urandom would wait (it runs the jitter loop until the CRNG is ready), so it is only the
 * fallback for kernels that reject the flag. */
static int fill_urandom(uint8_t *out, size_t len)
{
	_cleanup_close_ int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t k;

	if (fd < 0)
		return negative_errno();
	k = eb_read_all(fd, out, len);
	if (k < 0)
		return (int)k;
	return (size_t)k == len ? 0 : -EIO;
}

static int fill(uint8_t *out, size_t len)
{
	while (len > 0) {
		ssize_t k = getrandom(out, len, GRND_INSECURE);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EINVAL)
			return fill_urandom(out, len);
		if (k <= 0)
			return k < 0 ? negative_errno() : -EIO;
		out += k;
		len -= (size_t)k;
	}
	return 0;
}

static void *source_new(void *provctx, void *parent, const OSSL_DISPATCH *parent_calls)
{
	(void)provctx, (void)parent_calls;
	/* A seed source is the root of the DRBG tree. */
	if (parent)
		return NULL;
	return OPENSSL_zalloc(sizeof(struct source));
}

static void source_free(void *vctx)
{
	OPENSSL_free(vctx);
}

static int source_instantiate(void *vctx, unsigned strength, int prediction_resistance,
                              const unsigned char *pstr, size_t pstr_len, const OSSL_PARAM params[])
{
	struct source *s = vctx;

	(void)prediction_resistance, (void)pstr, (void)pstr_len, (void)params;
	if (strength > SOURCE_STRENGTH)
		return 0;
	s->state = EVP_RAND_STATE_READY;
	return 1;
}

static int source_uninstantiate(void *vctx)
{
	struct source *s = vctx;

	s->state = EVP_RAND_STATE_UNINITIALISED;
	return 1;
}

static int source_generate(void *vctx, unsigned char *out, size_t outlen, unsigned strength,
                           int prediction_resistance, const unsigned char *adin, size_t adin_len)
{
	struct source *s = vctx;

	(void)prediction_resistance, (void)adin, (void)adin_len;
	if (s->state != EVP_RAND_STATE_READY || strength > SOURCE_STRENGTH)
		return 0;
	return fill(out, outlen) == 0;
}

static int source_reseed(void *vctx, int prediction_resistance, const unsigned char *ent,
                         size_t ent_len, const unsigned char *adin, size_t adin_len)
{
	(void)vctx, (void)prediction_resistance, (void)ent, (void)ent_len, (void)adin,
	    (void)adin_len;
	return 1;
}

/* Nothing to lock: the state is set once, and getrandom() is safe from any thread. */
static int source_enable_locking(void *vctx)
{
	(void)vctx;
	return 1;
}

static int source_lock(void *vctx)
{
	(void)vctx;
	return 1;
}

static void source_unlock(void *vctx)
{
	(void)vctx;
}

static const OSSL_PARAM *source_gettable_ctx_params(void *vctx, void *provctx)
{
	static const OSSL_PARAM p[] = {
	    OSSL_PARAM_int(OSSL_RAND_PARAM_STATE, NULL),
	    OSSL_PARAM_uint(OSSL_RAND_PARAM_STRENGTH, NULL),
	    OSSL_PARAM_size_t(OSSL_RAND_PARAM_MAX_REQUEST, NULL),
	    OSSL_PARAM_END,
	};

	(void)vctx, (void)provctx;
	return p;
}

static int source_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
	struct source *s = vctx;
	OSSL_PARAM *p;

	p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_STATE);
	if (p && !OSSL_PARAM_set_int(p, s->state))
		return 0;
	p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_STRENGTH);
	if (p && !OSSL_PARAM_set_uint(p, SOURCE_STRENGTH))
		return 0;
	p = OSSL_PARAM_locate(params, OSSL_RAND_PARAM_MAX_REQUEST);
	if (p && !OSSL_PARAM_set_size_t(p, MAX_REQUEST))
		return 0;
	return 1;
}

static int source_verify_zeroization(void *vctx)
{
	(void)vctx;
	return 1;
}

/* What a DRBG asks its parent for at instantiation and reseed: a buffer it hands back to
 * source_clear_seed(), as OpenSSL's own seed source does, counting a byte as 8 bits. */
static size_t source_get_seed(void *vctx, unsigned char **pout, int entropy, size_t min_len,
                              size_t max_len, int prediction_resistance, const unsigned char *adin,
                              size_t adin_len)
{
	size_t len = entropy > 0 ? ((size_t)entropy + 7) / 8 : 0;
	unsigned char *p;

	(void)vctx, (void)prediction_resistance, (void)adin, (void)adin_len;
	len = MAX(len, min_len);
	if (len == 0 || len > max_len || len > MAX_REQUEST)
		return 0;
	p = OPENSSL_secure_malloc(len);
	if (!p)
		return 0;
	if (fill(p, len) < 0) {
		OPENSSL_secure_clear_free(p, len);
		return 0;
	}
	atomic_fetch_add(&n_seeds, 1);
	*pout = p;
	return len;
}

static void source_clear_seed(void *vctx, unsigned char *out, size_t outlen)
{
	(void)vctx;
	OPENSSL_secure_clear_free(out, outlen);
}

#define FN(id, f)                                                                                  \
	{                                                                                          \
		id, (void (*)(void))(f)                                                            \
	}
static const OSSL_DISPATCH source_functions[] = {
    FN(OSSL_FUNC_RAND_NEWCTX, source_new),
    FN(OSSL_FUNC_RAND_FREECTX, source_free),
    FN(OSSL_FUNC_RAND_INSTANTIATE, source_instantiate),
    FN(OSSL_FUNC_RAND_UNINSTANTIATE, source_uninstantiate),
    FN(OSSL_FUNC_RAND_GENERATE, source_generate),
    FN(OSSL_FUNC_RAND_RESEED, source_reseed),
    FN(OSSL_FUNC_RAND_ENABLE_LOCKING, source_enable_locking),
    FN(OSSL_FUNC_RAND_LOCK, source_lock),
    FN(OSSL_FUNC_RAND_UNLOCK, source_unlock),
    FN(OSSL_FUNC_RAND_GETTABLE_CTX_PARAMS, source_gettable_ctx_params),
    FN(OSSL_FUNC_RAND_GET_CTX_PARAMS, source_get_ctx_params),
    FN(OSSL_FUNC_RAND_VERIFY_ZEROIZATION, source_verify_zeroization),
    FN(OSSL_FUNC_RAND_GET_SEED, source_get_seed),
    FN(OSSL_FUNC_RAND_CLEAR_SEED, source_clear_seed),
    {0, NULL},
};

static const OSSL_ALGORITHM rands[] = {
    {SOURCE_NAME, "provider=" PROVIDER_NAME, source_functions,
     "the kernel's CRNG, not waiting for its initialisation"},
    {NULL, NULL, NULL, NULL},
};

static const OSSL_ALGORITHM *query(void *provctx, int operation_id, int *no_cache)
{
	(void)provctx;
	*no_cache = 0;
	return operation_id == OSSL_OP_RAND ? rands : NULL;
}

static const OSSL_DISPATCH provider_functions[] = {
    FN(OSSL_FUNC_PROVIDER_QUERY_OPERATION, query),
    {0, NULL},
};

static int provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                         const OSSL_DISPATCH **out, void **provctx)
{
	(void)in;
	*out = provider_functions;
	*provctx = (void *)handle;
	return 1;
}

int eb_bootrand_use(void)
{
	/* Kept loaded for the life of the process, as the DRBGs that use it are. */
	static OSSL_PROVIDER *provider;
	unsigned before = atomic_load(&n_seeds);
	EVP_RAND *rand;

	if (!provider) {
		if (!OSSL_PROVIDER_add_builtin(NULL, PROVIDER_NAME, provider_init))
			return -ENOMEM;
		/* retain_fallbacks: the default provider must still load by itself for TLS. */
		provider = OSSL_PROVIDER_try_load(NULL, PROVIDER_NAME, 1);
		if (!provider)
			return -ENOPKG;
	}
	/* Fetched once here, because OpenSSL would fall back to its own, blocking, source in
	 * silence if it could not. */
	rand = EVP_RAND_fetch(NULL, SOURCE_NAME, "provider=" PROVIDER_NAME);
	if (!rand)
		return -ENOPKG;
	EVP_RAND_free(rand);
	/* Refused once the primary DRBG exists: it keeps the source it was made with. */
	if (!RAND_set_seed_source_type(NULL, SOURCE_NAME, "provider=" PROVIDER_NAME))
		return -EBUSY;
	/* A primary DRBG made before this call keeps its source: only a seed counted here proves
	 * that ours is in use. */
	if (!RAND_get0_primary(NULL))
		return -ENOPKG;
	return atomic_load(&n_seeds) > before ? 0 : -EBUSY;
}

unsigned eb_bootrand_seeds(void)
{
	return atomic_load(&n_seeds);
}
