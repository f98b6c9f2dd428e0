/* SPDX-License-Identifier: MIT */
/*
 * tap.h - the TAP (Test Anything Protocol) output of hicart_test and the
 * unit test: ok() numbers each check and flushes it, so a test that
 * crashes still shows how far it got; tap_done() prints the plan last
 * and gives the exit status.
 */
#ifndef HICART_TAP_H
#define HICART_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int t_num, t_fail;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++t_num);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		t_fail++;
}

/* tap_done - the plan and a failure count; 1 if any check failed. */
static int tap_done(void)
{
	printf("1..%d\n", t_num);
	if (t_fail)
		printf("# %d of %d failed\n", t_fail, t_num);
	return t_fail ? 1 : 0;
}

#endif
