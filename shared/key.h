/* SPDX-License-Identifier: MIT */
/* Pre-shared key files: 64 hex digits, readable by their owner alone, or also by the reading
 * process's own group when it owns the file with root. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define EB_KEY_SIZE 32

/* The hash a key is bound to, as RFC 8446 4.2.11 requires of every PSK: the key is used with the
 * cipher suite of that hash alone (TLS_AES_256_GCM_SHA384 or TLS_AES_128_GCM_SHA256). One key,
 * one hash: the same secret under two hashes would be two PSKs sharing a secret, which RFC 9257
 * section 4 warns against. SHA-384 is the default and what every client of this project offers;
 * SHA-256 is for the TLS stacks that bind external PSKs to SHA-256 alone (GnuTLS 3.7, OpenSSL's
 * s_client). */
enum eb_key_hash {
	EB_KEY_HASH_SHA384,
	EB_KEY_HASH_SHA256,
	_EB_KEY_HASH_MAX,
	_EB_KEY_HASH_INVALID = -EINVAL,
};

/* A key id: what tells a user's keys apart, on the wire after the user name and a '/' (docs/
 * protocol.md 1.1): 1 to EB_KEY_ID_MAX letters, digits, '.', '_' or '-', starting with a letter or
 * a digit, like a user name. */
#define EB_KEY_ID_MAX 32
bool eb_key_id_valid(const char *id);

/* "sha384", "sha256"; NULL for anything else. */
const char *eb_key_hash_to_string(enum eb_key_hash h);
/* The reverse; _EB_KEY_HASH_INVALID for a string that names no hash. */
enum eb_key_hash eb_key_hash_from_string(const char *s);

/* Loads a key file. -EPERM when the file is too open (it is not read then): any permission for
 * others, group write or execute, or group read unless the file's group is the process's own
 * effective group, that group is not root's (gid 0), and the file's owner is root or the
 * process's effective user: "root:entropy-broker 0640" read by a broker running in the group
 * entropy-broker, as chrony keeps its keys, is the one group-readable layout allowed, since only
 * the service itself is in its own group. -EBADMSG when it is not 64 hex digits and an optional
 * newline. The hex is decoded in constant time and every buffer that held it is wiped. */
int eb_key_load(const char *path, uint8_t ret_key[EB_KEY_SIZE]);

/* Why eb_key_load() refused a file, as the words that complete "key file PATH ..." in a message:
 * "is readable by group or others; chmod 0600" for -EPERM, and likewise for -EBADMSG and -ELOOP.
 * NULL for any other error, which strerror() names better. One text for every program, so that
 * an administrator sees the same fix whichever one refused the key. */
const char *eb_key_error_text(int r);

/* The whole message for eb_key_load()'s failure on path: "key file PATH ..." with, for -EPERM
 * and -EACCES, the user and group this process runs as, the file's owner, group and mode, and
 * the command that fixes it; for other errors the reason. malloc()ed; NULL when out of memory. */
char *eb_key_describe_error(const char *path, int r);

/* Writes a new random key (getrandom) to path, created with mode 0600; -EEXIST if it exists. */
int eb_key_generate(const char *path);

/* The same, owned by uid and gid ((uid_t)-1 and (gid_t)-1: the creator's), with mode 0640 when
 * group_read, else 0600. The ownership and mode are set before a byte of the key is written. */
int eb_key_generate_owned(const char *path, uid_t uid, gid_t gid, bool group_read);

/* The key path a client uses without -k: $CREDENTIALS_DIRECTORY/eb.key, or NULL. The result is
 * malloc()ed. */
char *eb_key_default_path(void);
