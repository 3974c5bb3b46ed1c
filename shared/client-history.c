/* SPDX-License-Identifier: MIT */
/* The client's side of the history report: the whole table fetched page by page. The codec of
 * its rows is report-history.c, which knows nothing of a client. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>

#include "client-internal.h"
#include "report.h"

/* A listing is at most every row the broker keeps, on full pages; more is a broken broker. */
#define FETCH_PAGES_MAX                                                                            \
	((EB_HISTORY_HOUR_MAX + EB_HISTORY_DAY_MAX + 2 * (EB_HISTORY_NAMED_MAX + 1)) /             \
	     EB_REPORT_ROWS_MAX +                                                                  \
	 2)

int eb_history_fetch(struct eb_client *c, struct eb_history *ret)
{
	uint64_t after = 0;

	assert(c);
	assert(ret);

	*ret = (struct eb_history){};
	for (unsigned pages = 0;; pages++) {
		struct eb_msg_report page;
		struct eb_report_rows it;
		struct eb_report_history_row row;
		int r;

		if (pages >= FETCH_PAGES_MAX)
			return -E2BIG;
		r = eb_client_report(c, EB_REPORT_HISTORY, after, &page);
		if (r < 0)
			return r;
		eb_report_rows_init(&it, &page);
		while ((r = eb_report_next_history(&it, &row)) > 0) {
			if (eb_report_history_id(&row) <= after)
				return -EBADMSG;
			r = eb_history_add(ret, &row);
			if (r < 0)
				return r;
		}
		if (r < 0)
			return r;
		if (page.next == 0)
			return 0;
		after = page.next;
	}
}
