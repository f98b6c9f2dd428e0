/* SPDX-License-Identifier: MIT */
/* json.h - the tools' JSON string output. */
#ifndef HICART_TOOLS_JSON_H
#define HICART_TOOLS_JSON_H

#include <stdio.h>

/* json_str - s as a JSON string: quotes, backslashes and control bytes
 * escaped (names come from the device and its driver).
 */
static inline void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

#endif /* HICART_TOOLS_JSON_H */
