/* SPDX-License-Identifier: MIT */
#include "clock-jump.h"

/* No reading a peer controls reaches here: the RTC is the VMM's, parsed and bounded by the
 * caller, and CLOCK_BOOTTIME the kernel's. Bounded anyway, so that the arithmetic cannot
 * overflow whatever a broken RTC says. */
#define RTC_MAX_S ((int64_t)1 << 40)

void clock_jump_init(struct clock_jump *c, int64_t grace_ns)
{
	*c = (struct clock_jump){.grace_ns = grace_ns, .deadline_ns = INT64_MAX};
}

/* Rebases c on the sample; returns the jump since the old base in ms, 0 when there was none to
 * compare with or the sample is too loose to compare. */
static int64_t measure(struct clock_jump *c, int64_t rtc_s, int64_t boot_before_ns,
                       int64_t boot_after_ns)
{
	/* The RTC was read somewhere between the two: the middle is off by at most half the
	 * spread, which a read that took too long makes too large to judge a jump by. */
	int64_t boot_ns = boot_before_ns + (boot_after_ns - boot_before_ns) / 2;
	int64_t jump_ms = 0;

	if (boot_after_ns < boot_before_ns ||
	    boot_after_ns - boot_before_ns > CLOCK_JUMP_SAMPLE_MAX_NS || rtc_s < 0 ||
	    rtc_s > RTC_MAX_S) {
		c->have = false;
		return 0;
	}
	if (c->have)
		jump_ms = (rtc_s - c->rtc_s) * 1000 - (boot_ns - c->boot_ns) / 1000000;
	c->have = true;
	c->rtc_s = rtc_s;
	c->boot_ns = boot_ns;
	return jump_ms;
}

enum clock_jump_verdict clock_jump_sample(struct clock_jump *c, int64_t rtc_s,
                                          int64_t boot_before_ns, int64_t boot_after_ns,
                                          int64_t *ret_jump_ms)
{
	int64_t jump_ms = measure(c, rtc_s, boot_before_ns, boot_after_ns);

	*ret_jump_ms = jump_ms;
	/* Only forward: a resume moves the RTC ahead of the guest's clock. One set back (hwclock
	 * --systohc from a clock that was behind) is no copy. */
	if (jump_ms <= CLOCK_JUMP_THRESHOLD_MS)
		return CLOCK_JUMP_NONE;
	if (c->grace_ns <= 0)
		return CLOCK_JUMP_RESEED;
	/* A second jump while one waits is answered by the same reseed, which starts after both;
	 * its deadline stays, or a stream of jumps would put the reseed off for good. */
	if (c->deadline_ns == INT64_MAX)
		c->deadline_ns = c->boot_ns + c->grace_ns;
	return CLOCK_JUMP_WAIT;
}

void clock_jump_forget(struct clock_jump *c)
{
	c->have = false;
}

void clock_jump_fork_line(struct clock_jump *c, bool have_rtc, int64_t rtc_s,
                          int64_t boot_before_ns, int64_t boot_after_ns, int64_t *ret_jump_ms)
{
	c->deadline_ns = INT64_MAX;
	*ret_jump_ms = 0;
	if (!have_rtc) {
		c->have = false;
		return;
	}
	*ret_jump_ms = measure(c, rtc_s, boot_before_ns, boot_after_ns);
}

enum clock_jump_verdict clock_jump_tick(struct clock_jump *c, int64_t now_ns)
{
	if (c->deadline_ns == INT64_MAX || now_ns < c->deadline_ns)
		return CLOCK_JUMP_NONE;
	c->deadline_ns = INT64_MAX;
	return CLOCK_JUMP_RESEED;
}

int64_t clock_jump_deadline(const struct clock_jump *c)
{
	return c->deadline_ns;
}
