/* SPDX-License-Identifier: MIT */
/* eb-source-smartcard: donates the random numbers smart cards hand out for ISO 7816-4 GET
 * CHALLENGE (00 84 00 00 08), over PC/SC (pcsclite's pcscd).
 *
 * Every reader whose card answers GET CHALLENGE with 8 bytes and 90 00 is asked in turn; a card
 * that refuses it (no such command, a locked applet) is left alone until it is taken out. Readers
 * that come and go are followed through SCardGetStatusChange() on pcscd's "\\?PnP?\Notification"
 * pseudo-reader, so one long-running source serves whatever cards are plugged in. Each byte of a
 * challenge is one 8-bit sample, health-tested and credited at the conservative H that
 * docs/sources.md explains. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <winscard.h>
#include <wintypes.h>

#include "cli.h"
#include "log.h"
#include "source.h"
#include "time-util.h"

/* The claimed min-entropy per byte of a challenge, in millibits. A card's challenge is the output
 * of its own generator, conditioned and often a DRBG's; nothing of the raw noise behind it can be
 * assessed from outside, and card generators have failed in the field in ways no statistic of
 * their output shows (the Taiwanese citizen cards whose RSA keys shared primes, Bernstein et al.,
 * 2013). A quarter of what a byte could carry. */
#define SMARTCARD_H_MBITS_DEFAULT 2000u

#define CHALLENGE_LEN 8u
/* Ceilings on what pcscd hands us: readers at once and the length of a reader's name. pcsclite
 * itself serves at most 16 readers (PCSCLITE_MAX_READERS_CONTEXTS). */
#define READERS_MAX     16u
#define READER_NAME_MAX 128u
/* How long to wait for a reader or card to appear before asking again; and, while cards are
 * answering, how often to look for new ones. */
#define WAIT_MS  60000u
#define CHECK_MS 2000u
/* How soon to try again to connect to a card that is there but did not answer yet. */
#define RETRY_MS 500u

static const char PNP_READER[] = "\\\\?PnP?\\Notification";

struct reader {
	char name[READER_NAME_MAX];
	DWORD state;    /* pcscd's last event state, handed back as the current one */
	SCARDHANDLE h;  /* connected card; 0: none */
	DWORD protocol; /* of the connection */
	bool refused;   /* the card does not answer GET CHALLENGE: wait for another card */
	bool seen;      /* still listed (while re-listing) */
};

struct cards {
	SCARDCONTEXT ctx;
	bool have_ctx;
	struct reader r[READERS_MAX];
	size_t n, next;
	DWORD pnp_state;
	uint64_t last_check_ms;
	bool said_waiting; /* logged "waiting for a card" since the last card answered */
};

static void help(void)
{
	printf("Usage: eb-source-smartcard [OPTIONS]\n\n"
	       "Donates the random bytes smart cards return for ISO 7816 GET CHALLENGE, from\n"
	       "every PC/SC reader whose card answers it, health-tested (SP 800-90B RCT and APT).\n"
	       "Readers and cards may come and go.\n\n"
	       "      --min-entropy H   claimed min-entropy per byte of a challenge, 0.001-8 bits\n"
	       "                        (default 2)\n" EB_CLI_SOURCE_HELP EB_CLI_CLIENT_HELP
	       "\nSee eb-source-smartcard(1).\n");
}

static void reader_disconnect(struct reader *r)
{
	if (r->h != 0)
		(void)SCardDisconnect(r->h, SCARD_LEAVE_CARD);
	r->h = 0;
}

static void cards_drop_context(struct cards *c)
{
	for (size_t i = 0; i < c->n; i++)
		reader_disconnect(&c->r[i]);
	c->n = 0;
	if (c->have_ctx)
		(void)SCardReleaseContext(c->ctx);
	c->have_ctx = false;
	c->pnp_state = SCARD_STATE_UNAWARE;
}

/* One GET CHALLENGE. 0 with 8 bytes in ret; -EPROTO when the card answers anything else (it does
 * not do GET CHALLENGE, or not like this); -ENODEV when the card or reader went away; -EIO for
 * the rest. */
static int get_challenge(struct reader *r, uint8_t ret[static CHALLENGE_LEN])
{
	static const uint8_t apdu[] = {0x00, 0x84, 0x00, 0x00, CHALLENGE_LEN};
	const SCARD_IO_REQUEST *pci =
	    r->protocol == SCARD_PROTOCOL_T0 ? SCARD_PCI_T0 : SCARD_PCI_T1;
	uint8_t resp[258];
	DWORD len = sizeof(resp);
	LONG rv;

	rv = SCardTransmit(r->h, pci, apdu, sizeof(apdu), NULL, resp, &len);
	if (rv == SCARD_W_REMOVED_CARD || rv == SCARD_E_NO_SMARTCARD ||
	    rv == SCARD_E_READER_UNAVAILABLE || rv == SCARD_W_RESET_CARD ||
	    rv == SCARD_E_INVALID_HANDLE || rv == SCARD_E_NO_SERVICE || rv == SCARD_F_COMM_ERROR)
		return -ENODEV;
	if (rv != SCARD_S_SUCCESS) {
		log_debug("GET CHALLENGE on \"%s\": %s", r->name, pcsc_stringify_error(rv));
		return -EIO;
	}
	/* No status word at all is no answer: vpcd says so when its card went away. */
	if (len < 2)
		return -ENODEV;
	/* The card's answer is what a peer sends us: exactly 8 bytes and 90 00, nothing else. */
	if (len != CHALLENGE_LEN + 2 || resp[CHALLENGE_LEN] != 0x90 ||
	    resp[CHALLENGE_LEN + 1] != 0x00) {
		log_debug("GET CHALLENGE on \"%s\": %lu bytes, status %02x %02x", r->name,
		          (unsigned long)len, len >= 2 ? resp[len - 2] : 0,
		          len >= 2 ? resp[len - 1] : 0);
		explicit_bzero(resp, sizeof(resp));
		return -EPROTO;
	}
	memcpy(ret, resp, CHALLENGE_LEN);
	explicit_bzero(resp, sizeof(resp));
	return 0;
}

/* A card is in reader r: connect, and keep it if it answers GET CHALLENGE. */
static void cards_probe(struct cards *c, struct reader *r)
{
	uint8_t chal[CHALLENGE_LEN];
	LONG rv;
	int k;

	if (r->h != 0 || r->refused)
		return;
	rv = SCardConnect(c->ctx, r->name, SCARD_SHARE_SHARED,
	                  SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1, &r->h, &r->protocol);
	if (rv != SCARD_S_SUCCESS) {
		r->h = 0;
		log_debug("Cannot connect to the card in \"%s\": %s", r->name,
		          pcsc_stringify_error(rv));
		return;
	}
	/* The first answer proves the card does GET CHALLENGE; its bytes are not sampled, so
	 * that every sampled challenge went through the same path. */
	k = get_challenge(r, chal);
	explicit_bzero(chal, sizeof(chal));
	if (k < 0) {
		if (k == -EPROTO) {
			log_info(
			    "The card in \"%s\" does not answer GET CHALLENGE; leaving it alone",
			    r->name);
			r->refused = true;
		}
		reader_disconnect(r);
		return;
	}
	log_info("Taking challenges from the card in \"%s\" (T=%d)", r->name,
	         r->protocol == SCARD_PROTOCOL_T0 ? 0 : 1);
	c->said_waiting = false;
}

/* Re-lists the readers, keeping what is known of those still there; -EAGAIN when pcscd cannot
 * say (the caller starts afresh with a new context). */
static int cards_list(struct cards *c)
{
	char *names = NULL;
	DWORD len = SCARD_AUTOALLOCATE;
	struct reader old[READERS_MAX];
	size_t n_old = c->n;
	LONG rv;

	rv = SCardListReaders(c->ctx, NULL, (LPSTR)&names, &len);
	memcpy(old, c->r, sizeof(old));
	c->n = 0;
	if (rv == SCARD_S_SUCCESS) {
		for (const char *s = names; s < names + len && *s; s += strlen(s) + 1) {
			struct reader *r;

			if (strlen(s) >= READER_NAME_MAX) {
				log_warning("Reader name too long (%zu bytes), ignoring it",
				            strlen(s));
				continue;
			}
			if (c->n == READERS_MAX) {
				log_warning("More than %u readers, ignoring the rest", READERS_MAX);
				break;
			}
			r = &c->r[c->n++];
			*r = (struct reader){.state = SCARD_STATE_UNAWARE};
			snprintf(r->name, sizeof(r->name), "%s", s);
			for (size_t i = 0; i < n_old; i++)
				if (!old[i].seen && strcmp(old[i].name, s) == 0) {
					*r = old[i];
					old[i].seen = true;
					break;
				}
			r->seen = false;
		}
		(void)SCardFreeMemory(c->ctx, names);
	} else if (rv != SCARD_E_NO_READERS_AVAILABLE) {
		for (size_t i = 0; i < n_old; i++)
			reader_disconnect(&old[i]);
		log_notice("Failed to list the smart card readers (%s); connecting again",
		           pcsc_stringify_error(rv));
		return -EAGAIN;
	}
	for (size_t i = 0; i < n_old; i++)
		if (!old[i].seen) {
			if (old[i].h != 0)
				log_info("Reader \"%s\" is gone", old[i].name);
			reader_disconnect(&old[i]);
		}
	if (c->next >= c->n)
		c->next = 0;
	return 0;
}

/* Waits up to timeout_ms for a reader or a card to come or go, then brings the table up to date
 * and connects to new cards. 0, or -EAGAIN when pcscd is not there or went away (the caller
 * waits and asks again). */
static int cards_update(struct cards *c, DWORD timeout_ms)
{
	SCARD_READERSTATE st[READERS_MAX + 1];
	LONG rv;
	int r;

	if (!c->have_ctx) {
		rv = SCardEstablishContext(SCARD_SCOPE_SYSTEM, NULL, NULL, &c->ctx);
		if (rv != SCARD_S_SUCCESS) {
			log_debug("No PC/SC service: %s", pcsc_stringify_error(rv));
			return -EAGAIN;
		}
		c->have_ctx = true;
		r = cards_list(c);
		if (r < 0) {
			cards_drop_context(c);
			return r;
		}
	}

	memset(st, 0, sizeof(st));
	for (size_t i = 0; i < c->n; i++) {
		st[i].szReader = c->r[i].name;
		st[i].dwCurrentState = c->r[i].state;
	}
	st[c->n].szReader = PNP_READER;
	st[c->n].dwCurrentState = c->pnp_state;
	rv = SCardGetStatusChange(c->ctx, timeout_ms, st, (DWORD)c->n + 1);
	c->last_check_ms = eb_now_ms();
	if (rv == SCARD_E_TIMEOUT)
		goto probe;
	if (rv == SCARD_E_UNKNOWN_READER || rv == SCARD_E_READER_UNAVAILABLE) {
		/* A reader left between the listing and the wait: list again. */
		r = cards_list(c);
		if (r < 0)
			cards_drop_context(c);
		return r;
	}
	if (rv != SCARD_S_SUCCESS) {
		/* pcscd went away (socket activation stops it when idle, an upgrade restarts it),
		 * and pcsclite says so in several ways (no service, a transport error, access
		 * denied on a stale context): start afresh with a new context. */
		log_notice("Lost the PC/SC service (%s); connecting again",
		           pcsc_stringify_error(rv));
		cards_drop_context(c);
		return -EAGAIN;
	}

	for (size_t i = 0; i < c->n; i++) {
		struct reader *rd = &c->r[i];
		DWORD ev = st[i].dwEventState;

		rd->state = ev & ~(DWORD)SCARD_STATE_CHANGED;
		if (!(ev & SCARD_STATE_CHANGED))
			continue;
		if (!(ev & SCARD_STATE_PRESENT) || (ev & SCARD_STATE_MUTE)) {
			if (rd->h != 0)
				log_info("The card in \"%s\" was taken out", rd->name);
			reader_disconnect(rd);
			rd->refused = false;
		}
	}
	if (st[c->n].dwEventState & SCARD_STATE_CHANGED) {
		c->pnp_state = st[c->n].dwEventState & ~(DWORD)SCARD_STATE_CHANGED;
		r = cards_list(c);
		if (r < 0) {
			cards_drop_context(c);
			return r;
		}
	}
probe:
	/* New cards, and cards that were there but not ready at the last try. */
	for (size_t i = 0; i < c->n; i++)
		if ((c->r[i].state & SCARD_STATE_PRESENT) && !(c->r[i].state & SCARD_STATE_MUTE))
			cards_probe(c, &c->r[i]);
	return 0;
}

/* Whether a card is present that could not be connected to yet (a card still powering up): its
 * reader's state will not change again, so waiting for a change would wait for nothing. */
static bool cards_pending(const struct cards *c)
{
	for (size_t i = 0; i < c->n; i++)
		if ((c->r[i].state & SCARD_STATE_PRESENT) && !(c->r[i].state & SCARD_STATE_MUTE) &&
		    c->r[i].h == 0 && !c->r[i].refused)
			return true;
	return false;
}

static struct reader *cards_next(struct cards *c)
{
	for (size_t k = 0; k < c->n; k++) {
		struct reader *r = &c->r[(c->next + k) % c->n];

		if (r->h != 0) {
			c->next = (c->next + k + 1) % c->n;
			return r;
		}
	}
	return NULL;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct cards *c = userdata;
	size_t got = 0;

	while (got < n) {
		uint8_t chal[CHALLENGE_LEN];
		struct reader *r;
		int k;

		if (!c->have_ctx || eb_now_ms() - c->last_check_ms >= CHECK_MS) {
			k = cards_update(c, 0);
			if (k < 0 && k != -EAGAIN)
				return k;
		}
		r = cards_next(c);
		if (!r) {
			/* Nothing answers: hand over what there is, or wait for a change. */
			if (got > 0)
				break;
			if (!c->said_waiting)
				log_notice("No smart card answers GET CHALLENGE; waiting for one");
			c->said_waiting = true;
			k = cards_update(c, cards_pending(c) ? RETRY_MS : WAIT_MS);
			if (k == -EAGAIN) {
				/* No pcscd: ask again in a second, as a client of a
				 * socket-activated service would. */
				(void)eb_sleep_ms(1000);
			} else if (k < 0)
				return k;
			continue;
		}
		k = get_challenge(r, chal);
		if (k < 0) {
			if (k == -EPROTO) {
				log_warning(
				    "The card in \"%s\" stopped answering GET CHALLENGE; leaving it alone",
				    r->name);
				r->refused = true;
			} else
				log_info("Lost the card in \"%s\"", r->name);
			reader_disconnect(r);
			/* Its state changes when it comes back: look now. */
			c->last_check_ms = 0;
			continue;
		}
		/* A block ends on a whole challenge; the last one is cut to fit. */
		memcpy(buf + got, chal, MIN((size_t)CHALLENGE_LEN, n - got));
		got += MIN((size_t)CHALLENGE_LEN, n - got);
		explicit_bzero(chal, sizeof(chal));
	}
	return (ssize_t)got;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-smartcard", .help = help, .options = options, .no_arguments = true};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "smartcard"};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .name = "smartcard",
	    .gate = {.bits = 8, .h_mbits = SMARTCARD_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    /* A real card answers some tens of challenges a second: 512 bytes (64 challenges)
	     * reach the broker every few seconds rather than every minute. */
	    .block = 512,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct cards c = {.pnp_state = SCARD_STATE_UNAWARE};
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	r = eb_source_run(client, &p, sample, &c, &st);
	cards_drop_context(&c);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
