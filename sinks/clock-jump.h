/* SPDX-License-Identifier: MIT */
/* The clock trigger of --watch-fork, for a VM without a generation ID device. A copy started from
 * a saved state resumes with its own clocks where the state left them (QEMU saves the guest's
 * clock with it, under TCG and KVM alike), while the real-time clock the VMM hands the guest
 * (QEMU's RTC, clock=host by default) reads the host's time: between two samples the RTC moves
 * on by the time the state spent saved, CLOCK_BOOTTIME does not. Pure: samples in, a verdict out;
 * no I/O, no clock. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

/* The RTC must have moved this much more than CLOCK_BOOTTIME between two samples. It reads whole
 * seconds, so a sample is off by up to a second each way: a resume more than 4 s after the save
 * is always seen, one less than 2 s after it never. */
#define CLOCK_JUMP_THRESHOLD_MS 3000
/* A sample whose RTC read took longer than this (the guest was preempted in it) says too little
 * about when the RTC was read, and is not compared. */
#define CLOCK_JUMP_SAMPLE_MAX_NS (500 * (int64_t)1000000)

enum clock_jump_verdict {
	/* Nothing to do. */
	CLOCK_JUMP_NONE,
	/* Start the reseed now. */
	CLOCK_JUMP_RESEED,
	/* A jump, but a generation ID device may yet have the kernel log the fork: the reseed waits
	 * for that line until clock_jump_deadline(), and the line answers it. */
	CLOCK_JUMP_WAIT,
	_CLOCK_JUMP_VERDICT_MAX,
	_CLOCK_JUMP_VERDICT_INVALID = -EINVAL,
};

struct clock_jump {
	int64_t grace_ns;    /* how long a jump waits for the kernel's fork line */
	bool have;           /* a sample to compare the next with */
	int64_t rtc_s;       /* its RTC reading, seconds since the epoch */
	int64_t boot_ns;     /* CLOCK_BOOTTIME when it was read */
	int64_t deadline_ns; /* a jump waiting for the kernel's line until then; INT64_MAX: none */
};

/* grace_ns: 0 when the VM has no generation ID device (no fork line can come), else how long the
 * kernel may take to log it after a resume. */
void clock_jump_init(struct clock_jump *c, int64_t grace_ns);

/* One sample: the RTC read as rtc_s between boot_before_ns and boot_after_ns (CLOCK_BOOTTIME).
 * A forward jump past the threshold since the last sample is RESEED, or WAIT with a grace; a
 * backward one (the RTC set back) and a slow read are not jumps. The sample is the next one's
 * base. *ret_jump_ms: the jump measured (RTC moved minus BOOTTIME moved; 0 with no base). */
enum clock_jump_verdict clock_jump_sample(struct clock_jump *c, int64_t rtc_s,
                                          int64_t boot_before_ns, int64_t boot_after_ns,
                                          int64_t *ret_jump_ms);

/* The RTC could not be read: the next sample has no base. A jump already waiting still waits. */
void clock_jump_forget(struct clock_jump *c);

/* The kernel logged a VM fork, and the watcher started the reseed for it, then read the RTC as
 * for clock_jump_sample() (have_rtc false: it could not). A jump waiting is answered, and so is
 * one this sample shows: it came with this fork. The sample is the next one's base, so that a
 * resume after the line, a fork of its own, is measured from it. *ret_jump_ms as there. */
void clock_jump_fork_line(struct clock_jump *c, bool have_rtc, int64_t rtc_s,
                          int64_t boot_before_ns, int64_t boot_after_ns, int64_t *ret_jump_ms);

/* RESEED once a waiting jump's grace has run out by now_ns (CLOCK_BOOTTIME), else NONE. */
enum clock_jump_verdict clock_jump_tick(struct clock_jump *c, int64_t now_ns);

/* When a waiting jump's grace runs out (CLOCK_BOOTTIME); INT64_MAX when none waits. */
int64_t clock_jump_deadline(const struct clock_jump *c);
