/* SPDX-License-Identifier: MIT */
/* An intrusive doubly linked list: the node lives inside the element, so linking allocates
 * nothing, and an element leaves its list in constant time knowing only itself. A list and a
 * node are both valid when zeroed (empty, unlinked), so they need no constructor and a zeroed
 * struct that holds them is ready.
 *
 * Why not glibc's <sys/queue.h>: its TAILQ head is not valid zeroed (TAILQ_INIT points it at
 * itself, so a struct holding one cannot be copied or zero-initialised), and glibc's copy lacks
 * the _SAFE iterations that every caller here needs to drop an element while walking. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct eb_list_node {
	struct eb_list_node *next, *prev;
};

struct eb_list {
	struct eb_list_node *first, *last;
};

static inline bool eb_list_is_empty(const struct eb_list *l)
{
	return !l->first;
}

/* Whether n is in l, exactly, wherever n may be linked: a walk back to the first node of n's
 * list, which is l's first only when that list is l. It costs n's distance from the front of
 * its list; a node in no list answers at once. */
static inline bool eb_list_contains(const struct eb_list *l, const struct eb_list_node *n)
{
	const struct eb_list_node *p = n;

	while (p->prev)
		p = p->prev;
	return l->first == p;
}

/* Whether n, which is in l or in no list, is in l: in constant time, since a node in no list
 * has no prev and is not l's first. For a node that may be in another list this answer is
 * wrong; ask eb_list_contains(). */
static inline bool eb_list_links_(const struct eb_list *l, const struct eb_list_node *n)
{
	return n->prev || l->first == n;
}

/* Links n into l just before at, or at the end when at is NULL. n must not be in a list. */
static inline void eb_list_insert_before(struct eb_list *l, struct eb_list_node *at,
                                         struct eb_list_node *n)
{
	n->next = at;
	n->prev = at ? at->prev : l->last;
	if (n->prev)
		n->prev->next = n;
	else
		l->first = n;
	if (at)
		at->prev = n;
	else
		l->last = n;
}

static inline void eb_list_append(struct eb_list *l, struct eb_list_node *n)
{
	eb_list_insert_before(l, NULL, n);
}

static inline void eb_list_prepend(struct eb_list *l, struct eb_list_node *n)
{
	eb_list_insert_before(l, l->first, n);
}

/* Unlinks n from l and leaves it zeroed, in constant time; nothing happens when n is in no list,
 * so that an element can leave a list it may or may not have joined. n must not be in another
 * list: it would be unlinked from that one and leave l's ends wrong. */
static inline void eb_list_remove(struct eb_list *l, struct eb_list_node *n)
{
	if (!eb_list_links_(l, n))
		return;
	if (n->prev)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->last = n->prev;
	n->next = n->prev = NULL;
}

/* The element of type that holds node in its field member; NULL for a NULL node. */
#define eb_list_entry(node, type, member)                                                          \
	({                                                                                         \
		struct eb_list_node *_eb_n = (node);                                               \
		_eb_n ? (type *)((char *)_eb_n - offsetof(type, member)) : (type *)NULL;           \
	})

/* The first element of l, or NULL when it is empty. */
#define eb_list_first(l, type, member) eb_list_entry((l)->first, type, member)

/* The element after pos, or NULL at the end. */
#define eb_list_next(pos, member) eb_list_entry((pos)->member.next, typeof(*(pos)), member)

/* Walks l front to back with pos; the body must not unlink pos (see eb_list_foreach_safe). */
#define eb_list_foreach(pos, l, member)                                                            \
	for ((pos) = eb_list_first(l, typeof(*(pos)), member); (pos);                              \
	     (pos) = eb_list_next(pos, member))

/* The same, reading the next element before the body runs: the body may unlink or free pos, but
 * no other element. */
#define eb_list_foreach_safe(pos, tmp, l, member)                                                  \
	for ((pos) = eb_list_first(l, typeof(*(pos)), member),                                     \
	    (tmp) = (pos) ? eb_list_next(pos, member) : NULL;                                      \
	     (pos); (pos) = (tmp), (tmp) = (pos) ? eb_list_next(pos, member) : NULL)
