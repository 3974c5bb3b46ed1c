/* SPDX-License-Identifier: MIT */
/* eb-assess esv's results.json, written by json-c, in the shape docs/assess-esv.schema.json
 * gives; and the criteria and conditioning components both reports name. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "assess-esv.h"
#include "io.h"
#include "macro.h"

/* The format's name and version, so that a reader can tell what it holds. */
#define ESV_FORMAT "entropy-broker-esv/1"

bool assess_esv_sized(const struct assess_esv *e)
{
	return e->samples == ASSESS_ESV_SAMPLES && e->restarts == ASSESS_RESTARTS &&
	       e->length == ASSESS_RESTART_LENGTH;
}

static const char *const criterion_names[_ASSESS_ESV_CRITERION_MAX] = {
    [ASSESS_ESV_CLAIM] = "claim",
    [ASSESS_ESV_RESTART_SANITY] = "restart-sanity",
    [ASSESS_ESV_RESTART_VALIDATION] = "restart-validation",
};

const char *assess_esv_criterion_to_string(enum assess_esv_criterion c)
{
	return c >= 0 && c < _ASSESS_ESV_CRITERION_MAX ? criterion_names[c] : NULL;
}

void assess_esv_criterion_text(const struct assess_esv *e, enum assess_esv_criterion c, char *buf,
                               size_t size)
{
	const struct assess_restart *rs = &e->rs;

	switch (c) {
	case ASSESS_ESV_CLAIM:
		snprintf(buf, size,
		         "the stated H, %.3f bits per sample, is %s the H estimate, %.6f",
		         e->stated_h, e->pass[c] ? "at most" : "above", e->h_estimate);
		return;
	case ASSESS_ESV_RESTART_SANITY:
		if (!e->have_restart)
			snprintf(buf, size,
			         "not run: the data hold no entropy to validate (H_I 0)");
		else
			snprintf(
			    buf, size,
			    "the most common value's count is %u in a row (cutoff %u) and %u in a "
			    "column (cutoff %u) at H_I = %.6f",
			    rs->row_max, rs->cutoff, rs->col_max, rs->col_cutoff, rs->h_i);
		return;
	case ASSESS_ESV_RESTART_VALIDATION:
		if (!e->have_restart || !rs->sanity)
			snprintf(buf, size, "not run: the sanity check did not pass");
		else
			snprintf(buf, size, "min(H_r %.6f, H_c %.6f) is %s H_I / 2 = %.6f",
			         floor(rs->rows.min_entropy * 1e6) / 1e6,
			         floor(rs->cols.min_entropy * 1e6) / 1e6,
			         e->pass[c] ? "at least" : "below", rs->h_i / 2);
		return;
	case _ASSESS_ESV_CRITERION_MAX:
	case _ASSESS_ESV_CRITERION_INVALID:
		break;
	}
	snprintf(buf, size, "?");
}

size_t assess_esv_components(const struct assess_esv *e, struct assess_esv_component ret[4])
{
	size_t n = 0;

	if (e->claim.vonneumann)
		ret[n++] = (struct assess_esv_component){
		    .name = "Von Neumann debiasing",
		    .where = "the source, on its raw samples, before crediting",
		    .vetted = false};
	ret[n++] = (struct assess_esv_component){
	    .name = "SHA-512",
	    .where = "the broker's pool: every 512 + 64 credited bits of input hashed into a "
		     "512-bit full-entropy block (SP 800-90B 3.1.5.1.1, Table 1)",
	    .vetted = true};
	return n;
}

/* A figure rounded down to six decimals, and printed so: the report never credits more than the
 * computation gave. NaN (not run) is null. */
static struct json_object *figure(double v)
{
	char text[32];

	if (isnan(v))
		return NULL;
	v = floor(v * 1e6) / 1e6;
	snprintf(text, sizeof(text), "%.6f", v);
	return json_object_new_double_s(v, text);
}

static void add(struct json_object *o, const char *k, struct json_object *v)
{
	json_object_object_add(o, k, v);
}

static struct json_object *strings(char *const *v, size_t n)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < n && v[i]; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

static struct json_object *estimates(const double h[_ASSESS_ESTIMATOR_MAX])
{
	struct json_object *o = json_object_new_object();

	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++)
		add(o, assess_estimator_to_key(i), figure(h[i]));
	return o;
}

static struct json_object *sequential(const struct assess_esv *e)
{
	struct json_object *o = json_object_new_object();

	add(o, "samples", json_object_new_uint64(e->samples));
	add(o, "alphabet", json_object_new_int((int)e->seq.alphabet));
	add(o, "bitstring_bits", json_object_new_uint64(e->seq.bitstring));
	add(o, "literal", estimates(e->seq.literal));
	add(o, "bitstring", estimates(e->seq.bitstring_h));
	add(o, "h_original", figure(e->seq.h_original));
	add(o, "h_bitstring", figure(e->seq.h_bitstring));
	add(o, "min_entropy", figure(e->seq.min_entropy));
	return o;
}

static struct json_object *restart(const struct assess_esv *e)
{
	const struct assess_restart *rs = &e->rs;
	struct json_object *o = json_object_new_object();
	bool ran = e->have_restart && rs->sanity;

	add(o, "restarts", json_object_new_int((int)e->restarts));
	add(o, "samples_per_restart", json_object_new_int((int)e->length));
	add(o, "h_i", figure(e->h_i));
	add(o, "cutoff_rows", e->have_restart ? json_object_new_int((int)rs->cutoff) : NULL);
	add(o, "cutoff_columns", e->have_restart ? json_object_new_int((int)rs->col_cutoff) : NULL);
	add(o, "row_max", e->have_restart ? json_object_new_int((int)rs->row_max) : NULL);
	add(o, "column_max", e->have_restart ? json_object_new_int((int)rs->col_max) : NULL);
	add(o, "sanity",
	    json_object_new_string(e->pass[ASSESS_ESV_RESTART_SANITY] ? "pass" : "fail"));
	add(o, "h_rows", ran ? figure(rs->rows.min_entropy) : NULL);
	add(o, "h_columns", ran ? figure(rs->cols.min_entropy) : NULL);
	add(o, "verdict",
	    json_object_new_string(e->pass[ASSESS_ESV_RESTART_VALIDATION] ? "pass" : "fail"));
	return o;
}

static struct json_object *registration(const struct assess_esv *e)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	struct assess_esv_component comp[4];
	size_t n = assess_esv_components(e, comp);

	add(o, "bits_per_sample", json_object_new_int((int)e->bits));
	add(o, "h_estimate", figure(e->h_estimate));
	add(o, "restarts", json_object_new_int((int)e->restarts));
	add(o, "samples_per_restart", json_object_new_int((int)e->length));
	add(o, "raw_samples", json_object_new_uint64(e->samples));
	add(o, "esv_sized", json_object_new_boolean(assess_esv_sized(e)));
	for (size_t i = 0; i < n; i++) {
		struct json_object *c = json_object_new_object();

		add(c, "name", json_object_new_string(comp[i].name));
		add(c, "vetted", json_object_new_boolean(comp[i].vetted));
		add(c, "where", json_object_new_string(comp[i].where));
		json_object_array_add(a, c);
	}
	add(o, "conditioning", a);
	return o;
}

static struct json_object *source(const struct assess_esv *e)
{
	struct json_object *o = json_object_new_object();
	size_t n = 0;

	while (e->cmd[n])
		n++;
	add(o, "command", strings(e->cmd, n));
	add(o, "version", json_object_new_string(e->source_version));
	add(o, "name", e->claim.line[0] ? json_object_new_string(e->claim.name) : NULL);
	add(o, "stated_h", figure(e->stated_h));
	add(o, "stated_h_from", json_object_new_string(e->claim_given ? "--claim" : "source"));
	add(o, "start_line", e->claim.line[0] ? json_object_new_string(e->claim.line) : NULL);
	return o;
}

static struct json_object *capture(const struct assess_esv *e)
{
	struct json_object *o = json_object_new_object();

	add(o, "host", json_object_new_string(e->host));
	add(o, "kernel", json_object_new_string(e->kernel));
	add(o, "machine", json_object_new_string(e->machine));
	add(o, "started", json_object_new_string(e->started));
	add(o, "finished", json_object_new_string(e->finished));
	add(o, "raw_seconds", figure(e->raw_seconds));
	add(o, "restart_seconds", figure(e->restart_seconds));
	add(o, "read_path",
	    json_object_new_string(
		"the source's own --dump-raw: every sample as its health tests and "
		"crediting see it, before any conditioning; a fresh run of the "
		"program for the raw file and for each restart"));
	return o;
}

static struct json_object *criteria(const struct assess_esv *e)
{
	struct json_object *a = json_object_new_array();

	for (unsigned c = 0; c < _ASSESS_ESV_CRITERION_MAX; c++) {
		struct json_object *o = json_object_new_object();
		char text[512];

		assess_esv_criterion_text(e, c, text, sizeof(text));
		add(o, "name", json_object_new_string(assess_esv_criterion_to_string(c)));
		add(o, "result", json_object_new_string(e->pass[c] ? "pass" : "fail"));
		add(o, "text", json_object_new_string(text));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *root(const struct assess_esv *e)
{
	struct json_object *o = json_object_new_object(), *tool = json_object_new_object(),
			   *files = json_object_new_object();
	bool ok = true;

	for (unsigned c = 0; c < _ASSESS_ESV_CRITERION_MAX; c++)
		ok = ok && e->pass[c];
	add(o, "format", json_object_new_string(ESV_FORMAT));
	add(tool, "name", json_object_new_string("eb-assess"));
	add(tool, "version", json_object_new_string(EB_VERSION));
	add(o, "tool", tool);
	add(o, "command", strings(e->argv, (size_t)e->argc));
	add(o, "source", source(e));
	add(o, "capture", capture(e));
	add(o, "registration", registration(e));
	add(o, "sequential", sequential(e));
	add(o, "restart", restart(e));
	add(o, "criteria", criteria(e));
	add(o, "verdict", json_object_new_string(ok ? "pass" : "fail"));
	add(files, "raw", json_object_new_string(ASSESS_ESV_RAW));
	add(files, "restart", json_object_new_string(ASSESS_ESV_RESTART));
	add(files, "log", json_object_new_string(ASSESS_ESV_LOG));
	add(files, "summary", json_object_new_string(ASSESS_ESV_SUMMARY));
	add(files, "sums", json_object_new_string(ASSESS_ESV_SUMS));
	add(o, "files", files);
	return o;
}

int assess_esv_write_json(const struct assess_esv *e, int dir_fd)
{
	struct json_object *o = root(e);
	_cleanup_close_ int fd = -EBADF;
	const char *text;
	int r;

	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
	                                             JSON_C_TO_STRING_NOSLASHESCAPE);
	fd = assess_esv_create(dir_fd, ASSESS_ESV_JSON);
	r = fd < 0 ? fd : eb_write_all(fd, text, strlen(text));
	if (r >= 0)
		r = eb_write_all(fd, "\n", 1);
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	json_object_put(o);
	return r;
}
