/* SPDX-License-Identifier: MIT */
/* What a reload changed, in words for the journal and for an admin: the users added and removed,
 * those whose key changed, those whose roles or limits changed, and the broker's own limits. */
#pragma once

#include <stddef.h>

struct eb_conf;

/* Writes into buf (size bytes, always terminated) a line such as "users added: g3, g4; keys
 * changed: g1; [broker] changed: max-sessions", or "nothing changed". A list too long for buf
 * ends in "...". Pure: reads the two configurations and nothing else. */
void config_diff(const struct eb_conf *old, const struct eb_conf *new, char *buf, size_t size);
