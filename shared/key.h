/* SPDX-License-Identifier: MIT */
/* Pre-shared key files: 64 hex digits, mode 0600 or stricter. */
#pragma once

#include <stdint.h>

#define EB_KEY_SIZE 32

/* Loads a key file. -EPERM when the file is readable by group or others (it is not read then),
 * -EBADMSG when it is not 64 hex digits and an optional newline. The hex is decoded in constant
 * time and every buffer that held it is wiped. */
int eb_key_load(const char *path, uint8_t ret_key[EB_KEY_SIZE]);

/* Why eb_key_load() refused a file, as the words that complete "key file PATH ..." in a message:
 * "is readable by group or others; chmod 0600" for -EPERM, and likewise for -EBADMSG and -ELOOP.
 * NULL for any other error, which strerror() names better. One text for every program, so that
 * an administrator sees the same fix whichever one refused the key. */
const char *eb_key_error_text(int r);

/* Writes a new random key (getrandom) to path, created with mode 0600; -EEXIST if it exists. */
int eb_key_generate(const char *path);

/* The key path a client uses without -k: $CREDENTIALS_DIRECTORY/eb.key, or NULL. The result is
 * malloc()ed. */
char *eb_key_default_path(void);
