/* SPDX-License-Identifier: MIT */
/* eb-sink-kernel --watch-fork: the kernel's log watched for a VM fork, and the copy's reseed
 * (RESEED_UNIT, which runs --reseed) started at each. */
#pragma once

#define RESEED_UNIT "eb-seed-reseed.service"

/* Reads kmsg (/dev/kmsg: one record a read) from its end on, and at each record
 * kernel_reseed_is_fork_record() knows starts RESEED_UNIT with systemctl --no-block, logging a
 * line with its MESSAGE_ID. Returns 0 when kmsg ends (a test's FIFO), else a negative errno,
 * logged. */
int fork_watch_run(const char *kmsg);
