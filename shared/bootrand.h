/* SPDX-License-Identifier: MIT */
/* A seed source for OpenSSL's DRBGs that does not wait for the kernel's CRNG, for a seeder that
 * must speak TLS before the kernel it seeds is initialised. */
#pragma once

/* Makes this process's OpenSSL DRBGs seed from getrandom(GRND_INSECURE) instead of the default
 * getentropy(), which blocks until the kernel's CRNG is initialised; after that moment both
 * return the same CRNG output. Must run before anything in the process uses OpenSSL's RAND
 * (creating an SSL_CTX does): it instantiates the primary DRBG at once and checks that the seed
 * came from here, -EBUSY when the DRBG already existed. -ENOMEM, or -ENOPKG when OpenSSL refused
 * the provider.
 *
 * Before the CRNG is initialised this output may be guessable: use it only where that costs no
 * more than forward secrecy against someone who also learns the pre-shared key (see
 * docs/vm-seeding.md). */
int eb_bootrand_use(void);

/* How many seeds the source has handed out since eb_bootrand_use(), for tests. */
unsigned eb_bootrand_seeds(void);
