/* SPDX-License-Identifier: MIT */
/* systemd credentials ($CREDENTIALS_DIRECTORY): how a unit, or a hypervisor through SMBIOS or
 * fw_cfg, hands a client its key and user name. */
#pragma once

#include <stddef.h>

/* The path of credential name, malloc()ed; NULL when $CREDENTIALS_DIRECTORY is unset or not
 * absolute, or when out of memory. */
char *eb_credential_path(const char *name);

/* Reads credential name as one line holding one printable word (no spaces or control
 * characters) of at most size - 1 bytes into buf. 1 when read, 0 with nothing written when there
 * is no such credential, -EBADMSG when it is not one such word, or a negative errno. */
int eb_credential_read_word(const char *name, char *buf, size_t size);
