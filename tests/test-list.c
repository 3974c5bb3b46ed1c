/* SPDX-License-Identifier: MIT */
/* Tests for shared/list.h: each operation on its own, removal while walking, and random runs
 * checked against an array that holds the order the list should have. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "list.h"
#include "splitmix64.h"

struct item {
	int value;
	struct eb_list_node node;
	struct eb_list_node other; /* in a second list at the same time */
};

/* Checks l holds exactly want[0..n) in order, both ways, and that first/last agree. */
static void assert_list(const struct eb_list *l, struct item *const *want, size_t n)
{
	const struct item *it;
	size_t i = 0;

	eb_list_foreach(it, l, node) {
		assert_true(i < n);
		assert_ptr_equal(it, want[i]);
		assert_true(eb_list_contains(l, &it->node));
		i++;
	}
	assert_int_equal(i, n);
	for (const struct eb_list_node *p = l->last; p; p = p->prev) {
		assert_true(i > 0);
		assert_ptr_equal(eb_list_entry((struct eb_list_node *)p, struct item, node),
		                 want[--i]);
	}
	assert_int_equal(i, 0);
	assert_int_equal(eb_list_is_empty(l), n == 0);
}

static void test_empty(void **state)
{
	struct eb_list l = {};
	struct item a = {.value = 1};
	struct item *it;

	(void)state;
	assert_true(eb_list_is_empty(&l));
	assert_null(eb_list_first(&l, struct item, node));
	assert_false(eb_list_contains(&l, &a.node));
	eb_list_foreach(it, &l, node)
		fail();
	/* Removing what is not linked changes nothing. */
	eb_list_remove(&l, &a.node);
	assert_list(&l, NULL, 0);
}

static void test_append_prepend_insert(void **state)
{
	struct eb_list l = {};
	struct item a = {.value = 1}, b = {.value = 2}, c = {.value = 3}, d = {.value = 4};

	(void)state;
	eb_list_append(&l, &b.node);
	assert_list(&l, (struct item *[]){&b}, 1);
	eb_list_prepend(&l, &a.node);
	eb_list_append(&l, &d.node);
	assert_list(&l, (struct item *[]){&a, &b, &d}, 3);
	eb_list_insert_before(&l, &d.node, &c.node);
	assert_list(&l, (struct item *[]){&a, &b, &c, &d}, 4);
	assert_ptr_equal(eb_list_first(&l, struct item, node), &a);
	assert_ptr_equal(eb_list_next(&c, node), &d);
	assert_null(eb_list_next(&d, node));
}

static void test_remove(void **state)
{
	struct eb_list l = {}, other = {};
	struct item a = {.value = 1}, b = {.value = 2}, c = {.value = 3};

	(void)state;
	eb_list_append(&l, &a.node);
	eb_list_append(&l, &b.node);
	eb_list_append(&l, &c.node);
	eb_list_append(&other, &b.other);
	eb_list_remove(&l, &b.node);
	assert_list(&l, (struct item *[]){&a, &c}, 2);
	/* Unlinked and zeroed: removing it again is harmless, and it may join again. */
	assert_null(b.node.next);
	assert_null(b.node.prev);
	eb_list_remove(&l, &b.node);
	assert_list(&l, (struct item *[]){&a, &c}, 2);
	/* Its other node is untouched. */
	assert_true(eb_list_contains(&other, &b.other));
	eb_list_remove(&l, &a.node);
	eb_list_remove(&l, &c.node);
	assert_list(&l, NULL, 0);
	eb_list_append(&l, &b.node);
	assert_list(&l, (struct item *[]){&b}, 1);
}

/* A node's answer names its own list only: one in another list is not in this one, wherever it
 * stands there, and the list it is in still says so. */
static void test_contains_is_exact(void **state)
{
	struct eb_list l = {}, other = {};
	struct item a = {.value = 1}, b = {.value = 2}, c = {.value = 3}, d = {.value = 4};

	(void)state;
	eb_list_append(&l, &a.node);
	eb_list_append(&l, &b.node);
	eb_list_append(&other, &c.node);
	eb_list_append(&other, &d.node);
	assert_false(eb_list_contains(&l, &c.node)); /* first of the other list */
	assert_false(eb_list_contains(&l, &d.node)); /* last of it, with a prev */
	assert_false(eb_list_contains(&other, &b.node));
	assert_true(eb_list_contains(&other, &d.node));
	assert_true(eb_list_contains(&l, &b.node));
	/* Removing a node that is in no list leaves both alone. */
	eb_list_remove(&other, &d.node);
	eb_list_remove(&l, &d.node);
	assert_list(&l, (struct item *[]){&a, &b}, 2);
	assert_list(&other, (struct item *[]){&c}, 1);
}

static void test_foreach_safe_removes(void **state)
{
	struct eb_list l = {};
	struct item items[6], *it, *tmp;
	size_t n = 0;

	(void)state;
	for (int i = 0; i < 6; i++) {
		items[i] = (struct item){.value = i};
		eb_list_append(&l, &items[i].node);
	}
	/* Drop every even one while walking, as the sinks drop clients. */
	eb_list_foreach_safe(it, tmp, &l, node) {
		if (it->value % 2 == 0)
			eb_list_remove(&l, &it->node);
		n++;
	}
	assert_int_equal(n, 6);
	assert_list(&l, (struct item *[]){&items[1], &items[3], &items[5]}, 3);
	eb_list_foreach_safe(it, tmp, &l, node)
		eb_list_remove(&l, &it->node);
	assert_list(&l, NULL, 0);
}

/* Random operations on 32 items, the expected order kept in an array beside the list. */
static void test_random_runs(void **state)
{
	enum { N = 32 };
	struct item items[N];
	struct item *model[N];
	size_t n = 0;
	uint64_t seed = 0x6c697374;

	(void)state;
	for (int i = 0; i < N; i++)
		items[i] = (struct item){.value = i};
	struct eb_list l = {};

	for (int step = 0; step < 20000; step++) {
		struct item *it = &items[splitmix64(&seed) % N];
		size_t pos = 0;
		bool in = false;

		for (size_t i = 0; i < n; i++)
			if (model[i] == it) {
				in = true;
				pos = i;
			}
		assert_int_equal(eb_list_contains(&l, &it->node), in);
		if (in) {
			eb_list_remove(&l, &it->node);
			memmove(&model[pos], &model[pos + 1], (n - pos - 1) * sizeof(*model));
			n--;
		} else {
			/* Before a random member, or at the end (at == n). */
			size_t at = splitmix64(&seed) % (n + 1);

			eb_list_insert_before(&l, at < n ? &model[at]->node : NULL, &it->node);
			memmove(&model[at + 1], &model[at], (n - at) * sizeof(*model));
			model[at] = it;
			n++;
		}
		assert_list(&l, model, n);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_append_prepend_insert),
	    cmocka_unit_test(test_remove),
	    cmocka_unit_test(test_contains_is_exact),
	    cmocka_unit_test(test_foreach_safe_removes),
	    cmocka_unit_test(test_random_runs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
