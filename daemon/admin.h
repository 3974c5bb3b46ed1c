/* SPDX-License-Identifier: MIT */
/* What the broker tells an admin about its sessions and users: the pages of REPORT rows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct broker;

/* Builds the page of q's table that follows q->after into *ret, its rows in buf
 * (EB_REPORT_ROWS_SIZE bytes). -ENOMEM, or -EINVAL for a row the codec refuses (our bug). */
int admin_report(struct broker *b, const struct eb_msg_report_req *q, uint8_t *buf, size_t size,
                 struct eb_msg *ret);
